package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Liveness means sent (ClassSent). Once the faults stop, a throttle streak
// has lifted and the row's wait has run out, a message nothing of which the
// provider took must reach its provider while its challenge still has time:
// ending expired (or staying open, which invLiveness judges) is a
// violation. The world judges it from its own bookkeeping: when the faults
// stopped, when each row was first claimed, the send-rate budget's next
// free time as the world saw its bookings, when each provider's streak
// ended, and what each provider took; and from the recovery bound, the
// time the protocol's own mechanisms (reconcile's re-drive of a lost
// wake-up or a lost stream record, the budget's spacing) take to deliver a
// row again.

// invNotSent is the name of a violation of liveness-means-sent.
const invNotSent = "liveness-sent"

// owedAtFaultsEnd records, per row, the earliest time from which the
// protocol owes its send once the faults stopped (s.now): the end of the
// faults, the budget's next free time on its channel, the end of its
// provider's streak plus the longest backoff, and the next attempt its row
// waits for.
func (s *sim) owedAtFaultsEnd() {
	for _, k := range s.w.keys {
		ch := s.w.rows[k].channel
		from := later(s.now, s.budgetTat[ch])
		if st := s.w.transports[ch].streak; st > 0 {
			from = later(from, ledgertest.Epoch.Add(st+s.w.policy.RetryMax))
		}
		e, ok := s.peek(k)
		if ok && e.State == ledger.Deferred {
			from = later(from, e.NextAttemptAt)
		}
		s.owedFrom[k] = from
		if ok && (e.State == ledger.Claimed || e.State == ledger.Deferred) && nothingTaken(e) {
			s.waitingAt0[k] = true
		}
	}
}

// recoveryBound is how long, from the time a row's send is owed, the
// protocol may take to reach the provider on channel ch: a stream record or
// a wake-up lost, the row is handed back once it is RedriveAfter old and
// the queue has not moved for RedriveAfter, by a reconcile that runs every
// period (one run may just have missed it); and every row of the channel
// may be ahead of it in the send-rate budget. Ten seconds cover the steps.
func (s *sim) recoveryBound(ch ledger.Channel) time.Duration {
	p := s.w.policy
	b := 2*p.RedriveAfter + 2*periods[fnReconcile] + 10*time.Second
	if r := s.w.rates[ch]; r > 0 {
		n := 0
		for _, k := range s.w.keys {
			if s.w.rows[k].channel == ch {
				n++
			}
		}
		b += time.Duration(n) * ledger.Interval(r)
	}
	return b
}

// checkSent judges, at the end of a run, every row that ended expired with
// nothing taken by its provider: it is a violation if its send was owed
// (owedAtFaultsEnd, or its claim, if later) more than the recovery bound
// before expires_at − margin. It also counts the owed rows that were sent.
func (s *sim) checkSent() {
	margin := s.w.policy.ExpiryMargin
	for _, k := range s.w.keys {
		e, ok := s.peek(k)
		claimed, wasClaimed := s.claimedAt[k]
		if !ok || !wasClaimed {
			continue
		}
		ch := s.w.rows[k].channel
		p := s.providers[ch]
		from := later(s.owedFrom[k], claimed)
		bound := s.recoveryBound(ch)
		owed := from.Add(bound).Before(e.ExpiresAt.Add(-margin))
		if len(p.msgs[k]) > 0 {
			if s.waitingAt0[k] {
				s.stats.Paths[pathSentAfterFaults]++
			}
			if s.lostWake[k] {
				s.stats.Paths[pathSentAfterLostWake]++
			}
			continue
		}
		if !owed || e.State != ledger.Expired || !nothingTaken(e) || p.rejected[k] > 0 {
			continue
		}
		why := ""
		if s.lostWake[k] {
			why = " (a dispatch-queue message of it was lost)"
		}
		s.fail(invNotSent, fmt.Sprintf("%s ended expired (%q) and its provider never took it%s: its send was owed from %s (the faults stopped at %s), and with the recovery bound of %s it had until %s (expires_at − margin) to be sent",
			s.label(k), e.Reason, why, s.rel(from), s.rel(s.liveStart), bound, s.rel(e.ExpiresAt.Add(-margin))), k)
		return
	}
}

// progressPort is the dispatch marks' store (Progress) as the use cases
// see it: not a point the schedule interleaves or faults (a stale or lost
// mark costs hand-backs, never a lost row), but where a mutant's slip sits.
type progressPort struct{ s *sim }

func (p progressPort) store() *memstore.Progress { return p.s.progress }

func (p progressPort) Lagging(ctx context.Context, behind time.Duration, at, staleBefore time.Time) (ledger.Lag, error) {
	return p.store().Lagging(ctx, behind, at, staleBefore)
}

func (p progressPort) Advance(ctx context.Context, through, at time.Time) error {
	if p.s.mutant == QueueMarkAtTTL {
		at = at.Add(markTTL)
	}
	return p.store().Advance(ctx, through, at)
}

func (p progressPort) Redriven(ctx context.Context, at time.Time) error {
	return p.store().Redriven(ctx, at)
}

func (p progressPort) Marks(ctx context.Context) (ledger.Marks, error) { return p.store().Marks(ctx) }

func (p progressPort) Seen() ledger.Marks { return p.store().Seen() }

// markTTL is how long the mark items live in the table (mutant
// QueueMarkAtTTL writes the queue mark's time as its expiry).
const markTTL = time.Hour
