package ledger

import (
	"context"
	"slices"
	"strings"
	"time"
)

// RefKind names the opaque reference a timeline lists entries by.
type RefKind string

// The references an entry can be listed by.
const (
	// BySubject lists the entries of one account: the intents' subject_ref.
	// An entry whose intent carried none is on no subject's timeline.
	BySubject RefKind = "subject_ref"
	// ByDestination lists the entries sent, or not sent, to one destination:
	// the intents' destination_ref.
	ByDestination RefKind = "destination_ref"
)

// Check reports whether ref can be listed by k: a known kind, and a
// reference with the intent's rules for that field (1 to 256 characters of
// the opaque alphabet). The error is a *FieldError naming the field, never
// quoting ref, which may be an address given by mistake.
func (k RefKind) Check(ref string) error {
	switch k {
	case BySubject, ByDestination:
		return checkOpaque(string(k), ref, 256)
	}
	return FieldErr("ref_kind", "unknown (want subject_ref or destination_ref)")
}

// Ref returns e's reference of kind k ("" for an unknown kind, or an entry
// without a subject).
func (k RefKind) Ref(e Entry) string {
	switch k {
	case BySubject:
		return e.SubjectRef
	case ByDestination:
		return e.DestinationRef
	}
	return ""
}

// Timeline lists what one subject or one destination was sent over time,
// for reviewers: every challenge, whatever became of it. Implementations
// read an index kept for it, never the whole table.
type Timeline interface {
	// ListByRef returns the entries whose reference of kind kind is ref and
	// that were created at or after since (no bound if zero), newest
	// first (entries created in the same instant in key order), at most
	// limit of them (all if limit <= 0). The entries are read with the
	// store's consistent read; the index behind them is eventually
	// consistent, so an entry claimed a moment ago may be missing. A ref
	// that fails kind.Check is an error.
	ListByRef(ctx context.Context, kind RefKind, ref string, since time.Time, limit int) ([]Entry, error)
}

// SortTimeline orders entries as ListByRef returns them: newest CreatedAt
// first, then by key.
func SortTimeline(rows []Entry) {
	slices.SortFunc(rows, func(a, b Entry) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
}
