package ledger

import (
	"context"
	"time"
)

// How far dispatch has read the two ways rows reach it, so that reconcile
// hands back only what neither can still deliver (Redrive). In a surge the
// ledger stream lags far behind REDRIVE_AFTER; without the marks every
// claimed row waiting in the stream was re-driven, and then dispatched
// twice (once a skip).

// Source is a way rows reach dispatch.
type Source string

// The two sources.
const (
	// FromStream: the ledger table's stream delivers each new claim.
	FromStream Source = "stream"
	// FromQueue: the dispatch queue delivers wake-ups of deferred rows and
	// reconcile's hand-backs.
	FromQueue Source = "queue"
)

// Mark is how far dispatch has read one source.
type Mark struct {
	// Through is the newest point of the source dispatch has taken a row
	// from: the UpdatedAt a claim record's image carries (the claiming
	// worker's clock), or the due time a queue message carries (the
	// scheduling worker's clock).
	Through time.Time
	// At is when a dispatch last moved Through, by its clock.
	At time.Time
}

// Marks is what Progress keeps.
type Marks struct {
	Stream, Queue Mark
	// Redriven is when reconcile last handed rows back to the dispatch
	// queue.
	Redriven time.Time
}

// Progress keeps the marks in storage every dispatch and reconcile instance
// shares. Marks only spare hand-backs: a lost or stale mark makes reconcile
// hand back rows the sources may still deliver (the old cost), never skip
// one they cannot.
type Progress interface {
	// Advance moves src's mark to through, and its At to at, unless the
	// stored mark is already at or past through.
	Advance(ctx context.Context, src Source, through, at time.Time) error
	// Redriven records that reconcile handed rows back at at.
	Redriven(ctx context.Context, at time.Time) error
	// Marks returns the stored marks; zero marks where none is stored.
	Marks(ctx context.Context) (Marks, error)
}

// markSlack is how far past a row's point a source's mark must be before
// the row counts as passed: the clocks of the workers that write the rows,
// the marks and the messages differ by up to this.
const markSlack = 2 * time.Second

// Read records that dispatch took rows from src up to through. It writes
// nothing without Progress or a through. Its error is the caller's to log:
// a mark that did not move only costs hand-backs.
func (s *Service) Read(ctx context.Context, src Source, through time.Time) error {
	if s.Progress == nil || through.IsZero() {
		return nil
	}
	return s.Progress.Advance(ctx, src, through.UTC().Truncate(Precision), s.now())
}

// owes reports whether the source with mark m can still deliver what was put
// on it at since: its mark has not passed since, and it moved within
// Policy.RedriveAfter (a source that stalled delivers nothing).
func (s *Service) owes(m Mark, since, now time.Time) bool {
	return m.Through.Before(since.Add(markSlack)) && now.Sub(m.At) < s.Policy.RedriveAfter
}
