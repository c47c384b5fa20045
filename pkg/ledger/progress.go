package ledger

import (
	"context"
	"time"
)

// How far dispatch has read the stream and the queue, so that reconcile's
// re-drive hands back only what neither can still deliver (the rule is
// internal/usecase/pacing's).

// Source is a way entries reach dispatch.
type Source string

// The two sources.
const (
	// FromStream: the ledger table's stream delivers each new claim.
	FromStream Source = "stream"
	// FromQueue: the dispatch queue delivers wake-ups of deferred entries and
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
	// Heard is when a dispatch last reported a stream batch at all, even
	// one whose lateness the window kept out (by its clock): the stream
	// is moving while Heard is recent, whatever At says.
	Heard time.Time
}

// Moved is when the stream was last known to deliver: the later of At and
// Heard.
func (l Lag) Moved() time.Time {
	if l.Heard.After(l.At) {
		return l.Heard
	}
	return l.At
}

// Marks is what Progress keeps.
type Marks struct {
	Stream Lag
	Queue  Mark
	// Redriven is when reconcile last handed entries back to the dispatch
	// queue.
	Redriven time.Time
}

// Progress keeps the marks in storage every dispatch and reconcile instance
// shares. Marks only spare hand-backs: a lost or stale mark makes reconcile
// hand back entries the sources may still deliver (the old cost), never skip
// one they cannot.
type Progress interface {
	// Lagging records that a stream batch arrived behind by behind at at:
	// it replaces the stored lag if that is smaller, or older than
	// staleBefore, and otherwise keeps it; either way the stream was heard
	// at at (Lag.Heard). A written lateness sets Heard to its at, so a
	// writer whose clock runs behind may set it back by that much; a kept
	// one only moves it forward. It returns the lag stored after the call.
	Lagging(ctx context.Context, behind time.Duration, at, staleBefore time.Time) (Lag, error)
	// Advance moves the queue's mark to through, and its At to at, unless
	// the stored mark is already at or past through.
	Advance(ctx context.Context, through, at time.Time) error
	// Redriven records that reconcile handed entries back at at.
	Redriven(ctx context.Context, at time.Time) error
	// Marks returns the stored marks; zero marks where none is stored.
	Marks(ctx context.Context) (Marks, error)
	// Seen returns, without a request, the newest marks this Progress
	// has read or written back (Lagging answers with the stored item):
	// zero marks if none. They may be behind the stored ones.
	Seen() Marks
}

// HeardEvery is how stale the stream's Lag.Heard may grow before a
// stream batch records it again: reconcile judges the stream stopped only
// after Policy.RedriveAfter without it, far longer.
const HeardEvery = 5 * time.Second
