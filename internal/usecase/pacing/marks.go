package pacing

import (
	"context"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// NewMarks keeps dispatch's side of the stream marks: progress (or
// ledger.NoProgress), reconcile's hand-back rule and the use case's clock.
func NewMarks(progress ledger.Progress, rule Rule, clock func() time.Time) Marks {
	return Marks{progress: progress, rule: rule, clock: clock}
}

// Read records what dispatch took from src: for the stream, the claims of
// one batch (their UpdatedAt, the oldest sets the lateness); for the queue,
// the due time of the newest message. It writes nothing without marks
// (NoProgress) or a time. Its error is the caller's to log: a mark that did
// not move only costs hand-backs.
func (m *Marks) Read(ctx context.Context, src ledger.Source, t time.Time) error {
	if m.progress == ledger.NoProgress || t.IsZero() {
		return nil
	}
	now := m.clock()
	if src == ledger.FromStream {
		behind := max(now.Sub(t), 0)
		if m.lagRecorded(behind, now) {
			return nil
		}
		_, err := m.recordLag(ctx, behind, now)
		return err
	}
	return m.progress.Advance(ctx, t.UTC().Truncate(ledger.Precision), now)
}

// lagRecorded reports whether a stream batch behind by behind at now
// would change nothing worth a write, by the marks this process last saw:
// they hold a larger lateness, recorded within the window (a stored lag
// only grows within its window, so the write would be refused), and the
// stream was heard less than HeardEvery ago. A prompt stream then costs a
// mark write per HeardEvery, not one per batch. Marks that moved since
// they were seen only hold a lateness as large, or a window written by a
// clock behind: it closes sooner, which costs hand-backs, never one
// skipped.
func (m *Marks) lagRecorded(behind time.Duration, now time.Time) bool {
	l := m.progress.Seen().Stream
	return l.Behind > behind && now.Sub(l.At) < m.rule.Window && now.Sub(l.Moved()) < ledger.HeardEvery
}

// recordLag records the stream's lateness behind at now (Progress.Lagging)
// and returns the lag stored after it.
func (m *Marks) recordLag(ctx context.Context, behind time.Duration, now time.Time) (ledger.Lag, error) {
	return m.progress.Lagging(ctx, behind, now, now.Add(-m.rule.Window))
}

// StreamKeepsClaimUntil reports whether reconcile leaves the claim e,
// delivered by the stream, to this dispatch until its send slot at, so
// that waiting for it needs no hold on the entry. The marks this process last
// saw answer without a request when they cover it (a stream batch
// refreshes them); otherwise this claim's own lateness is recorded, and the
// lag stored after that answers. Without marks (NoProgress), or if the
// write fails, it does not: the caller holds the slot.
func (m *Marks) StreamKeepsClaimUntil(ctx context.Context, e ledger.Entry, at time.Time) bool {
	if m.progress == ledger.NoProgress || e.State != ledger.Claimed {
		return false
	}
	if m.rule.StreamKeepsClaim(m.progress.Seen(), e, at) {
		return true
	}
	now := m.clock()
	l, err := m.recordLag(ctx, max(now.Sub(e.UpdatedAt), 0), now)
	return err == nil && m.rule.StreamKeepsClaim(ledger.Marks{Stream: l}, e, at)
}

// Marks is dispatch's side of the stream marks: it records how far
// dispatch has read (Read), and answers whether reconcile leaves a claim to
// this dispatch while it waits for its slot.
type Marks struct {
	progress ledger.Progress
	clock    func() time.Time // the use case's clock, as core.now reads it
	rule     Rule             // reconcile's rule (Policy.RedriveAfter), as core.handBack makes it
}

// HoldsSlot reports whether a dispatch that booked the send slot at for the
// entry e must hold the slot on the entry (a deferral to it) before waiting for
// it: whether another delivery of the entry can arrive during the wait and
// book a slot of its own, which one of the two would then leave unused.
//
//   - A deferred entry is the dispatch queue's, whose messages may be repeated
//     and whose entry reconcile re-drives once its wake-up is late: it holds
//     the slot unless it already holds this one.
//   - A claim is the stream's until its re-drive time (RedriveAt): no
//     re-drive hands it back before then (Redrive), so a wait that ends
//     before it needs no hold. That saves the deferral write, a whole-item
//     write with an index move and a history entry that every later write
//     of the entry pays for again. A claim written without a re-drive time,
//     or whose slot is at or past it, holds the slot here; the stream's
//     delivery of it can still do without (Dispatcher.streamKeepsClaimUntil: in a
//     surge the stream delivers most claims past their re-drive time, and
//     its lateness mark keeps reconcile from handing them back).
//
// A duplicate of the stream record arriving during an unheld wait can still
// book a second slot: send capacity lost, never a second send, since the
// conditional move to dispatching decides.
func HoldsSlot(e ledger.Entry, at time.Time) bool {
	switch e.State {
	case ledger.Deferred:
		return !e.SlotAt.Equal(at)
	case ledger.Claimed:
		return e.RedriveAt.IsZero() || !at.Before(e.RedriveAt)
	}
	return true
}
