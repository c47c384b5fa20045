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

// lagRecorded reports whether recording a stream batch behind by behind at
// now would change nothing, by the marks last seen: a larger lateness in
// its window, heard less than HeardEvery ago.
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
	rule     Rule             // reconcile's rule (Policy.RedriveAfter), as RuleFor makes it
}

// HoldsSlot reports whether a dispatch that booked the slot at for e must
// hold it on the entry (a deferral to it) before waiting for it: whether
// another delivery of e can book a slot of its own during the wait. A
// deferred entry can (the queue repeats, reconcile re-drives); a claim can
// once its slot is at or past its re-drive time (docs/design.md, "Liveness
// under throttling and surges").
func HoldsSlot(e ledger.Entry, at time.Time) bool {
	switch e.State {
	case ledger.Deferred:
		return !e.SlotAt.Equal(at)
	case ledger.Claimed:
		return e.RedriveAt.IsZero() || !at.Before(e.RedriveAt)
	}
	return true
}
