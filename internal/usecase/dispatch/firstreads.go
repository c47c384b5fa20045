package dispatch

import (
	"context"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// rowFirst is what New makes of ReadRowAlone.
type rowFirst struct{ store ledger.Store }

func (r rowFirst) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	e, err := r.store.Get(ctx, q.Key)
	return ledger.FirstRead{Entry: e}, err
}

// firstQuery is what a dispatch of the record whose image is image reads
// first: the newest challenge only if supersession may end it, the
// content only for a row a dispatch may send.
func (d *Dispatcher) firstQuery(image ledger.Entry) ledger.FirstQuery {
	q := ledger.FirstQuery{Key: image.Key}
	if d.gate.Limits().Supersede && image.SubjectRef != "" && ledger.Supersedable(image) {
		st := ledger.StreamOf(image)
		q.Stream = &st
	}
	if image.State == ledger.Claimed || image.State == ledger.Deferred {
		q.ContentKey = ledger.ContentKey(image)
	}
	return q
}

// primed returns a copy of s for one dispatch whose first reads r answered:
// the first Newest of q's stream and the first Get of q's content come from
// r; every later call (after a lost race, or a wait for a slot) reads
// afresh.
func (d *Dispatcher) primed(q ledger.FirstQuery, r ledger.FirstRead) *Dispatcher {
	cp := *d
	if q.Stream != nil && r.Newest != nil {
		cp.gate = cp.gate.WithNewest(&primedNewest{Challenges: d.gate.Challenges(), stream: *q.Stream, read: *r.Newest})
	}
	if q.ContentKey != "" && r.Content != nil {
		cp.core = cp.core.WithContent(&primedContent{ContentStore: d.core.Content(), key: q.ContentKey, read: *r.Content})
	}
	cp.bind()
	return &cp
}

// primedNewest answers the first Newest of its stream from a read already
// made.
type primedNewest struct {
	ledger.Challenges
	stream ledger.SubjectStream
	read   ledger.Found[ledger.Challenge]
	used   bool
}

func (p *primedNewest) Newest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	if p.used || ref != p.stream {
		return p.Challenges.Newest(ctx, ref)
	}
	p.used = true
	return p.read.Value, p.read.OK, nil
}

// primedContent answers the first Get of its key from a read already made.
type primedContent struct {
	ledger.ContentStore
	key  string
	read ledger.Found[[]byte]
	used bool
}

func (p *primedContent) Get(ctx context.Context, key string) ([]byte, error) {
	if p.used || key != p.key {
		return p.ContentStore.Get(ctx, key)
	}
	p.used = true
	if !p.read.OK {
		return nil, ledger.ErrNotFound
	}
	return p.read.Value, nil
}
