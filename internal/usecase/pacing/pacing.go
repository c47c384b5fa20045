// Package pacing is what dispatch and reconcile share about when an entry
// goes back to dispatch: the hand-back rule over the dispatch marks,
// dispatch's side of the stream marks, and whether waiting for a send slot
// needs a hold on the entry.
package pacing

import (
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// markSlack is how far past an entry's point a source's mark must be before
// the entry counts as passed: the clocks of the workers that write the entries,
// the marks and the messages differ by up to this.
const markSlack = 2 * time.Second

// The marks answer one question for reconcile's re-drive: can a source
// still deliver this entry, so that handing it back would only deliver it
// twice? Rule is that rule, over Policy.RedriveAfter (its window):
//
//   - queueWillDeliver: the queue will still deliver what was put on it at
//     some time (a deferred entry's wake-up, the last hand-backs);
//   - streamWillDeliver: the stream will still deliver a claim;
//   - lagSpeaksFor: a recorded lag still covers a claim (both of the
//     stream's questions rest on it);
//   - streamKeepsClaim: reconcile leaves a claim to the stream until a
//     given time, whatever it reads meanwhile.
//
// Dispatch asks the last one, of the marks it last saw, to wait for its send
// slot without a hold on the entry (streamKeepsClaimUntil).
type Rule struct{ Window time.Duration }

// RuleFor is the hand-back rule of policy p: its window is
// Policy.RedriveAfter.
func RuleFor(p ledger.Policy) Rule { return Rule{Window: p.RedriveAfter} }

// QueueWillDeliver reports whether the queue, with mark q, can still
// deliver what was put on it at putAt: its mark has not passed putAt, and
// it moved within the window (a queue that stalled delivers nothing).
func (r Rule) QueueWillDeliver(q ledger.Mark, putAt, now time.Time) bool {
	return q.Through.Before(putAt.Add(markSlack)) && now.Sub(q.At) < r.Window
}

// StreamWillDeliver reports whether the stream, running behind by l, can
// still deliver the claim made at claimedAt: it moved (Lag.moved) within
// the window, and its lag speaks for the claim.
func (r Rule) StreamWillDeliver(l ledger.Lag, claimedAt, now time.Time) bool {
	return r.lagSpeaksFor(l, l.Moved(), claimedAt, now)
}

// lagSpeaksFor reports whether the lag l, trusted since since, still covers
// the claim made at claimedAt: since is within the window, and the claim is
// younger than l's lateness plus the window.
func (r Rule) lagSpeaksFor(l ledger.Lag, since, claimedAt, now time.Time) bool {
	return now.Sub(since) < r.Window && now.Sub(claimedAt) < l.Behind+r.Window
}

// StreamKeepsClaim reports whether, by the marks m, reconcile leaves the
// claim e to the stream until until (markSlack past it): the lag's window,
// in which a stored lag only grows, is still open then.
func (r Rule) StreamKeepsClaim(m ledger.Marks, e ledger.Entry, until time.Time) bool {
	return e.State == ledger.Claimed && r.lagSpeaksFor(m.Stream, m.Stream.At, e.UpdatedAt, until.Add(markSlack))
}
