package ledger

import (
	"context"
	"errors"
)

// FirstReads reads what dispatching a stream record reads first, in one
// round trip where the database allows: the row, the newest challenge of
// the image's subject stream and the image's sealed content, each as its
// own port reads it (strongly consistent). docs/design.md, "A decision is
// made from the row".
type FirstReads interface {
	ReadFirst(ctx context.Context, q FirstQuery) (FirstRead, error)
}

// FirstQuery names what to read: the row's key, the subject stream whose
// newest challenge the dispatch checks (nil: none) and the content key
// (empty: none).
type FirstQuery struct {
	Key        string
	Stream     *SubjectStream
	ContentKey string
}

// FirstRead is what FirstReads found. A missing row is an error wrapping
// ErrNotFound; Newest and Content are nil when not read.
type FirstRead struct {
	Entry   Entry
	Newest  *Found[Challenge]
	Content *Found[[]byte]
}

// Found is a read value; OK is false when nothing is stored.
type Found[T any] struct {
	Value T
	OK    bool
}

// ReadRowAlone is the FirstReads of a store that cannot read the three
// together: the row alone, through Store; the newest challenge and the
// content are left to their ports.
var ReadRowAlone FirstReads = rowAlone{}

type rowAlone struct{}

func (rowAlone) ReadFirst(context.Context, FirstQuery) (FirstRead, error) {
	return FirstRead{}, errors.New("ledger: ReadRowAlone reads only inside a Dispatcher")
}

// rowFirst is what NewDispatcher makes of ReadRowAlone.
type rowFirst struct{ store Store }

func (r rowFirst) ReadFirst(ctx context.Context, q FirstQuery) (FirstRead, error) {
	e, err := r.store.Get(ctx, q.Key)
	return FirstRead{Entry: e}, err
}

// firstQuery is what a dispatch of the record whose image is image reads
// first: the newest challenge only if supersession may end it, the
// content only for a row a dispatch may send.
func (s *Dispatcher) firstQuery(image Entry) FirstQuery {
	q := FirstQuery{Key: image.Key}
	if s.limits.Supersede && image.SubjectRef != "" && Supersedable(image) {
		st := StreamOf(image)
		q.Stream = &st
	}
	if image.State == Claimed || image.State == Deferred {
		q.ContentKey = ContentKey(image)
	}
	return q
}

// primed returns a copy of s for one dispatch whose first reads r answered:
// the first Newest of q's stream and the first Get of q's content come from
// r; every later call (after a lost race, or a wait for a slot) reads
// afresh.
func (s *Dispatcher) primed(q FirstQuery, r FirstRead) *Dispatcher {
	d := *s
	if q.Stream != nil && r.Newest != nil {
		d.challenges = &primedNewest{Challenges: s.challenges, stream: *q.Stream, read: *r.Newest}
	}
	if q.ContentKey != "" && r.Content != nil {
		d.core = d.core.WithContent(&primedContent{ContentStore: s.core.Content(), key: q.ContentKey, read: *r.Content})
	}
	d.sender = d.sender.For(&d.core)
	return &d
}

// primedNewest answers the first Newest of its stream from a read already
// made.
type primedNewest struct {
	Challenges
	stream SubjectStream
	read   Found[Challenge]
	used   bool
}

func (p *primedNewest) Newest(ctx context.Context, ref SubjectStream) (Challenge, bool, error) {
	if p.used || ref != p.stream {
		return p.Challenges.Newest(ctx, ref)
	}
	p.used = true
	return p.read.Value, p.read.OK, nil
}

// primedContent answers the first Get of its key from a read already made.
type primedContent struct {
	ContentStore
	key  string
	read Found[[]byte]
	used bool
}

func (p *primedContent) Get(ctx context.Context, key string) ([]byte, error) {
	if p.used || key != p.key {
		return p.ContentStore.Get(ctx, key)
	}
	p.used = true
	if !p.read.OK {
		return nil, ErrNotFound
	}
	return p.read.Value, nil
}
