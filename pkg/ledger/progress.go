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

// Mark is how far dispatch has read the dispatch queue.
type Mark struct {
	// Through is the newest due time dispatch has taken a queue message
	// for (the scheduling worker's clock).
	Through time.Time
	// At is when a dispatch last moved Through, by its clock.
	At time.Time
}

// Lag is how far behind the ledger stream is. The stream's shards are read
// in parallel, each at its own pace, so no single position says which
// claims the stream has delivered; how late the latest records arrived does,
// and the slowest shard's lateness covers them all.
type Lag struct {
	// Behind is the largest lateness a dispatch saw within the window (see
	// Progress.Lagging): its clock minus the UpdatedAt of the oldest claim
	// in a stream batch.
	Behind time.Duration
	// At is when it was recorded, by the dispatch's clock.
	At time.Time
}

// Marks is what Progress keeps.
type Marks struct {
	Stream Lag
	Queue  Mark
	// Redriven is when reconcile last handed rows back to the dispatch
	// queue.
	Redriven time.Time
}

// Progress keeps the marks in storage every dispatch and reconcile instance
// shares. Marks only spare hand-backs: a lost or stale mark makes reconcile
// hand back rows the sources may still deliver (the old cost), never skip
// one they cannot.
type Progress interface {
	// Lagging records that a stream batch arrived behind by behind at at:
	// it replaces the stored lag if that is smaller, or older than
	// staleBefore, and otherwise keeps it.
	Lagging(ctx context.Context, behind time.Duration, at, staleBefore time.Time) error
	// Advance moves the queue's mark to through, and its At to at, unless
	// the stored mark is already at or past through.
	Advance(ctx context.Context, through, at time.Time) error
	// Redriven records that reconcile handed rows back at at.
	Redriven(ctx context.Context, at time.Time) error
	// Marks returns the stored marks; zero marks where none is stored.
	Marks(ctx context.Context) (Marks, error)
}

// markSlack is how far past a row's point a source's mark must be before
// the row counts as passed: the clocks of the workers that write the rows,
// the marks and the messages differ by up to this.
const markSlack = 2 * time.Second

// Read records what dispatch took from src: for the stream, the claims of
// one batch (their UpdatedAt, the oldest sets the lateness); for the queue,
// the due time of the newest message. It writes nothing without Progress or
// a time. Its error is the caller's to log: a mark that did not move only
// costs hand-backs.
func (s *Service) Read(ctx context.Context, src Source, t time.Time) error {
	if s.Progress == nil || t.IsZero() {
		return nil
	}
	now := s.now()
	if src == FromStream {
		return s.Progress.Lagging(ctx, max(now.Sub(t), 0), now, now.Add(-s.Policy.RedriveAfter))
	}
	return s.Progress.Advance(ctx, t.UTC().Truncate(Precision), now)
}

// owes reports whether the queue, with mark m, can still deliver what was
// put on it at since: its mark has not passed since, and it moved within
// Policy.RedriveAfter (a queue that stalled delivers nothing).
func (s *Service) owes(m Mark, since, now time.Time) bool {
	return m.Through.Before(since.Add(markSlack)) && now.Sub(m.At) < s.Policy.RedriveAfter
}

// streamOwes reports whether the stream, running behind by l, can still
// deliver the claim made at claimed: it moved within Policy.RedriveAfter,
// and the claim is younger than its lateness plus Policy.RedriveAfter (the
// margin covers a backlog that grows while the claim waits in it).
func (s *Service) streamOwes(l Lag, claimed, now time.Time) bool {
	return now.Sub(l.At) < s.Policy.RedriveAfter && now.Sub(claimed) < l.Behind+s.Policy.RedriveAfter
}
