package memstore

import (
	"context"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

var _ ledger.Timeline = (*Store)(nil)

// ListByRef implements ledger.Timeline by looking at every row: memory has
// no index to keep, and a test store is small.
func (s *Store) ListByRef(_ context.Context, kind ledger.RefKind, ref string, since time.Time, limit int) ([]ledger.Entry, error) {
	if err := kind.Check(ref); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var out []ledger.Entry
	for _, e := range s.rows {
		if kind.Ref(e) == ref && (since.IsZero() || !e.CreatedAt.Before(since)) {
			out = append(out, clone(e))
		}
	}
	s.mu.Unlock()
	ledger.SortTimeline(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
