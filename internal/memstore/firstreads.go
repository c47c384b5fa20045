package memstore

import (
	"context"
	"errors"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// FirstReads is ledger.FirstReads over any three ports, read one after the
// other at the moment of the call: what the DynamoDB one does in one
// request.
type FirstReads struct {
	Store      ledger.Store
	Challenges ledger.Challenges
	Content    ledger.ContentStore
}

var _ ledger.FirstReads = (*FirstReads)(nil)

// ReadFirst implements ledger.FirstReads.
func (f *FirstReads) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	e, err := f.Store.Get(ctx, q.Key)
	if err != nil {
		return ledger.FirstRead{}, err
	}
	out := ledger.FirstRead{Entry: e}
	if q.Stream != nil {
		c, ok, err := f.Challenges.Newest(ctx, *q.Stream)
		if err != nil {
			return ledger.FirstRead{}, err
		}
		out.Newest = &ledger.Found[ledger.Challenge]{Value: c, OK: ok}
	}
	if q.ContentKey != "" {
		b, err := f.Content.Get(ctx, q.ContentKey)
		if err != nil && !errors.Is(err, ledger.ErrNotFound) {
			return ledger.FirstRead{}, err
		}
		out.Content = &ledger.Found[[]byte]{Value: b, OK: err == nil}
	}
	return out, nil
}
