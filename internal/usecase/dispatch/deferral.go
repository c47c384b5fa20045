package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/usecase/pacing"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// waitForSlot waits until the send slot at booked at now, if it is later.
// It returns the entry as it then stands and how long it waited.
func (d *Dispatcher) waitForSlot(ctx context.Context, e ledger.Entry, w ledger.Worker, now, at time.Time, streamed bool) (ledger.Entry, time.Duration, error) {
	wait := at.Sub(now)
	if wait <= 0 {
		return e, 0, nil
	}
	// Hold a booked slot on the entry before waiting for it. The booking
	// is made before any conditional write and is not undone when one
	// loses; while this dispatch waits, another delivery of the same
	// entry (a re-drive, a duplicate wake-up, the stream record) would
	// otherwise find it still claimed and book a slot of its own, and
	// one of the two slots would go unused. Held, the entry is deferred
	// to this slot: the other delivery waits for the same slot and
	// loses the move to dispatching, booking nothing. (A provider's
	// wait without a budget books nothing and needs no hold; nor does a
	// wait no other delivery can interrupt: holdsSlot, streamKeepsClaimUntil.)
	if d.budget != ledger.NoBudget && pacing.HoldsSlot(e, at) && !(streamed && d.marks.StreamKeepsClaimUntil(ctx, e, at)) {
		reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
		var err error
		if e, err = d.deferral(ctx, e, w, reason, ledger.BudgetCode, at, true); err != nil {
			return e, 0, err
		}
	}
	if err := d.sleep(ctx, wait); err != nil {
		return e, 0, fmt.Errorf("dispatch %s: waiting for the send-rate budget: %w", e.Key, err)
	}
	return e, wait, nil
}

// slotGrace is how late a deferred entry may wake and still use the send time
// it booked; later than that it books a new one, so a late wake-up can
// never bunch sends above the budget.
const slotGrace = time.Second

// SendReserve is the time an invocation must have left to start a send: a
// transport call that the function's timeout cuts off would leave the entry
// dispatching, then unknown. With less left, the entry is handed to the
// dispatch queue instead.
const SendReserve = 10 * time.Second

// slot returns the send time of the attempt about to start from entry e: the
// one a deferred entry holds, or a new booking in the budget. When the send
// time is further away than this dispatch may wait (Policy.BudgetWait, and
// never past the invocation's deadline minus SendReserve) the entry is
// deferred to it instead (deferred.Outcome is set); when no send time is
// left before the challenge's deadline the entry ends expired.
func (d *Dispatcher) slot(ctx context.Context, e ledger.Entry, w ledger.Worker, now time.Time) (at time.Time, deferred ledger.DispatchResult, err error) {
	booked, code := true, ledger.BudgetCode
	switch {
	case e.State == ledger.Deferred && !e.SlotAt.IsZero() && !now.After(e.SlotAt.Add(slotGrace)):
		at = e.SlotAt
	case d.budget == ledger.NoBudget:
		at, booked, code = now, false, ledger.HandOffCode
		if e.State == ledger.Deferred && e.NextAttemptAt.After(now) {
			at, code = e.NextAttemptAt, e.NotSentCode // the provider's wait
		}
	default:
		earliest := now
		if e.State == ledger.Deferred && e.NextAttemptAt.After(now) {
			earliest = e.NextAttemptAt // the provider's wait, not shortened by BudgetWait
		}
		// The last send time the move to dispatching still accepts.
		deadline := e.ExpiresAt.Add(-d.core.Policy().ExpiryMargin - ledger.Precision)
		at, err = d.budget.Reserve(ctx, e.Identity.Channel, earliest, deadline)
		if errors.Is(err, ledger.ErrNoBudget) {
			res, err := d.core.Expire(ctx, e, w, ledger.NotSentReason(ledger.BudgetCode), ledger.OutcomeExpired)
			return time.Time{}, res, err
		}
		if err != nil {
			return time.Time{}, ledger.DispatchResult{}, fmt.Errorf("dispatch %s: send-rate budget: %w", e.Key, err)
		}
	}
	if at.Sub(now) <= d.maxWait(ctx) {
		return at, ledger.DispatchResult{}, nil
	}
	reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
	if code == ledger.HandOffCode {
		reason = "no time left in this invocation to send; handed to the dispatch queue"
	} else if !booked {
		reason = fmt.Sprintf("waiting until %s as the provider asked (%s)", at.UTC().Format(time.RFC3339Nano), code)
	}
	res, err := d.deferTo(ctx, e, w, reason, code, at, booked)
	return time.Time{}, res, err
}

// maxWait is how long this dispatch may wait in-process before a send:
// Policy.BudgetWait, less if the invocation would not have SendReserve
// left after it (negative when it has not even that).
func (d *Dispatcher) maxWait(ctx context.Context) time.Duration {
	wait := d.core.Policy().BudgetWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-SendReserve)
	}
	return wait
}

// deferTo records that the entry waits until at (holding that budget slot
// if booked) and schedules its wake-up. From claimed, dispatching or
// unknown it is a transition; a deferred entry records a deferral event.
func (d *Dispatcher) deferTo(ctx context.Context, e ledger.Entry, w ledger.Worker, reason, code string, at time.Time, booked bool) (ledger.DispatchResult, error) {
	got, err := d.deferral(ctx, e, w, reason, code, at, booked)
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	return ledger.DispatchResult{Outcome: ledger.OutcomeDeferred, Entry: got, ScheduleErr: d.schedule(ctx, got)}, nil
}

// deferral writes what deferTo records, without scheduling the wake-up.
func (d *Dispatcher) deferral(ctx context.Context, e ledger.Entry, w ledger.Worker, reason, code string, at time.Time, booked bool) (ledger.Entry, error) {
	at = at.Truncate(ledger.Precision) // as stored
	mut := func(n *ledger.Entry) {
		n.NextAttemptAt = at
		n.SlotAt = time.Time{}
		if booked {
			n.SlotAt = at
		}
		n.NotSentCode = code
		n.LeaseUntil, n.NextCheckAt = time.Time{}, time.Time{}
		n.Reason = reason
	}
	var c ledger.Change
	if e.State == ledger.Deferred {
		c = d.core.Record(e, ledger.KindDeferral, ledger.Deferred, w, reason, mut)
	} else {
		var err error
		if c, err = d.core.Transition(e, ledger.Deferred, w, reason, mut); err != nil {
			return ledger.Entry{}, err
		}
	}
	c.Event.Code, c.Event.NextAttemptAt = code, at
	c.Event = ledger.Chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	got, err := d.core.Write(ctx, c)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("%s -> deferred %s: %w", e.State, e.Key, err)
	}
	return got, nil
}

// RescheduleNotDue schedules the wake-up of a deferred entry again after a
// wake-up delivered it before it was due (res.Outcome OutcomeNotDue).
func (d *Dispatcher) RescheduleNotDue(ctx context.Context, res ledger.DispatchResult) error {
	if res.Outcome != ledger.OutcomeNotDue {
		return nil
	}
	return d.schedule(ctx, res.Entry)
}

// schedule asks for the deferred entry e to be dispatched at its next
// attempt time.
func (d *Dispatcher) schedule(ctx context.Context, e ledger.Entry) error {
	if d.scheduler == ledger.NoScheduler {
		return nil
	}
	if err := d.scheduler.Schedule(ctx, e.Key, e.NextAttemptAt); err != nil {
		return fmt.Errorf("schedule %s: %w", e.Key, err)
	}
	return nil
}

// sleepTimer waits for d or until ctx ends: the default Ports.Sleep.
func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before attempt n+1 after attempt n was not sent:
// RetryBase * 2^(n-1) capped at RetryMax, the upper half of it random, or
// the provider's Retry-After if that is longer.
func (d *Dispatcher) backoff(n int, retryAfter time.Duration) time.Duration {
	delay := d.core.Policy().RetryBase
	for i := 1; i < n && delay < d.core.Policy().RetryMax; i++ {
		delay *= 2
	}
	delay = min(delay, d.core.Policy().RetryMax)
	delay = delay/2 + time.Duration(d.jitter()*float64(delay/2))
	return max(delay, retryAfter).Truncate(ledger.Precision)
}

// notSent records a provider's proof that attempt e.Attempts was not taken:
// the entry is deferred to its next attempt, or ends expired when that would
// start after the deadline (expiry minus the margin).
func (d *Dispatcher) notSent(ctx context.Context, e ledger.Entry, ns *ledger.NotSent, w ledger.Worker) (ledger.DispatchResult, error) {
	code := ns.Code
	if code == "" {
		code = "unspecified"
	}
	from := e
	var res ledger.DispatchResult
	err := d.core.OnConflict(ctx, e, func(e ledger.Entry) (err error) {
		next := d.core.Now().Add(d.backoff(e.Attempts, ns.RetryAfter))
		if d.core.ExpiredAt(e.ExpiresAt, next) && e.State == ledger.Dispatching {
			// Unknown (reconcile got there first) cannot end expired
			// directly; it is deferred, and its wake-up expires it.
			res, err = d.core.Expire(ctx, e, w, ledger.NotSentReason(code), ledger.OutcomeExpired)
		} else {
			reason := fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s", code, e.Attempts, next.UTC().Format(time.RFC3339Nano))
			res, err = d.deferTo(ctx, e, w, reason, code, next, false)
		}
		return err
	}, func(fresh ledger.Entry) bool {
		// As in recordOutcome: a concurrent write that kept the attempt (a
		// content-mismatch event, or reconcile marking the entry unknown
		// after its lease) does not lose the answer in hand.
		return fresh.Attempts == from.Attempts && (fresh.State == from.State || fresh.State == ledger.Unknown)
	})
	res.NotSent = ns
	return res, err
}
