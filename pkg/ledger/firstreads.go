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
