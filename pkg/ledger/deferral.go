package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Not sent, and waiting: the send-rate budget, deferrals, wake-ups and
// backoff.

// BudgetCode is the NotSentCode of an entry waiting for the send-rate budget
// rather than for a provider.
const BudgetCode = "send_rate_budget"

// NotSentReason is the reason of an entry that ended expired because every
// attempt before the deadline was refused for now (code is the provider's
// last code, or BudgetCode).
func NotSentReason(code string) string { return "not sent before the challenge expired: " + code }

// ExpiryReason says why an entry that never reached the provider expired.
func ExpiryReason(e Entry) string {
	if e.State == Deferred && e.NotSentCode != "" {
		return NotSentReason(e.NotSentCode)
	}
	return "challenge expired before dispatch"
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

// HandOffCode is the NotSentCode of an entry handed to the dispatch queue
// because its invocation had no time left to send it.
const HandOffCode = "invocation_deadline"

// slot returns the send time of the attempt about to start from entry e: the
// one a deferred entry holds, or a new booking in the budget. When the send
// time is further away than this dispatch may wait (Policy.BudgetWait, and
// never past the invocation's deadline minus SendReserve) the entry is
// deferred to it instead (deferred.Outcome is set); when no send time is
// left before the challenge's deadline the entry ends expired.
func (s *Dispatcher) slot(ctx context.Context, e Entry, w Worker, now time.Time) (at time.Time, deferred DispatchResult, err error) {
	booked, code := true, BudgetCode
	switch {
	case e.State == Deferred && !e.SlotAt.IsZero() && !now.After(e.SlotAt.Add(slotGrace)):
		at = e.SlotAt
	case s.budget == NoBudget:
		at, booked, code = now, false, HandOffCode
		if e.State == Deferred && e.NextAttemptAt.After(now) {
			at, code = e.NextAttemptAt, e.NotSentCode // the provider's wait
		}
	default:
		earliest := now
		if e.State == Deferred && e.NextAttemptAt.After(now) {
			earliest = e.NextAttemptAt // the provider's wait, not shortened by BudgetWait
		}
		// The last send time the move to dispatching still accepts.
		deadline := e.ExpiresAt.Add(-s.core.Policy().ExpiryMargin - Precision)
		at, err = s.budget.Reserve(ctx, e.Identity.Channel, earliest, deadline)
		if errors.Is(err, ErrNoBudget) {
			res, err := s.core.Expire(ctx, e, w, NotSentReason(BudgetCode), OutcomeExpired)
			return time.Time{}, res, err
		}
		if err != nil {
			return time.Time{}, DispatchResult{}, fmt.Errorf("dispatch %s: send-rate budget: %w", e.Key, err)
		}
	}
	if at.Sub(now) <= s.maxWait(ctx) {
		return at, DispatchResult{}, nil
	}
	reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
	if code == HandOffCode {
		reason = "no time left in this invocation to send; handed to the dispatch queue"
	} else if !booked {
		reason = fmt.Sprintf("waiting until %s as the provider asked (%s)", at.UTC().Format(time.RFC3339Nano), code)
	}
	res, err := s.deferTo(ctx, e, w, reason, code, at, booked)
	return time.Time{}, res, err
}

// maxWait is how long this dispatch may wait in-process before a send:
// Policy.BudgetWait, less if the invocation would not have SendReserve
// left after it (negative when it has not even that).
func (s *Dispatcher) maxWait(ctx context.Context) time.Duration {
	wait := s.core.Policy().BudgetWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-SendReserve)
	}
	return wait
}

// deferTo records that the entry waits until at (holding that budget slot
// if booked) and schedules its wake-up. From claimed, dispatching or
// unknown it is a transition; a deferred entry records a deferral event.
func (s *Dispatcher) deferTo(ctx context.Context, e Entry, w Worker, reason, code string, at time.Time, booked bool) (DispatchResult, error) {
	got, err := s.deferral(ctx, e, w, reason, code, at, booked)
	if err != nil {
		return DispatchResult{}, err
	}
	return DispatchResult{Outcome: OutcomeDeferred, Entry: got, ScheduleErr: s.schedule(ctx, got)}, nil
}

// deferral writes what deferTo records, without scheduling the wake-up.
func (s *Dispatcher) deferral(ctx context.Context, e Entry, w Worker, reason, code string, at time.Time, booked bool) (Entry, error) {
	at = at.Truncate(Precision) // as stored
	mut := func(n *Entry) {
		n.NextAttemptAt = at
		n.SlotAt = timeZero
		if booked {
			n.SlotAt = at
		}
		n.NotSentCode = code
		n.LeaseUntil, n.NextCheckAt = timeZero, timeZero
		n.Reason = reason
	}
	var c Change
	if e.State == Deferred {
		c = s.core.Record(e, KindDeferral, Deferred, w, reason, mut)
	} else {
		var err error
		if c, err = s.core.Transition(e, Deferred, w, reason, mut); err != nil {
			return Entry{}, err
		}
	}
	c.Event.Code, c.Event.NextAttemptAt = code, at
	c.Event = Chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	got, err := s.core.Write(ctx, c)
	if err != nil {
		return Entry{}, fmt.Errorf("%s -> deferred %s: %w", e.State, e.Key, err)
	}
	return got, nil
}

// RescheduleNotDue schedules the wake-up of a deferred entry again after a
// wake-up delivered it before it was due (res.Outcome OutcomeNotDue).
func (s *Dispatcher) RescheduleNotDue(ctx context.Context, res DispatchResult) error {
	if res.Outcome != OutcomeNotDue {
		return nil
	}
	return s.schedule(ctx, res.Entry)
}

// schedule asks for the deferred entry e to be dispatched at its next
// attempt time.
func (s *Dispatcher) schedule(ctx context.Context, e Entry) error {
	if s.scheduler == NoScheduler {
		return nil
	}
	if err := s.scheduler.Schedule(ctx, e.Key, e.NextAttemptAt); err != nil {
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
func (s *Dispatcher) backoff(n int, retryAfter time.Duration) time.Duration {
	d := s.core.Policy().RetryBase
	for i := 1; i < n && d < s.core.Policy().RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.core.Policy().RetryMax)
	d = d/2 + time.Duration(s.jitter()*float64(d/2))
	return max(d, retryAfter).Truncate(Precision)
}

// notSent records a provider's proof that attempt e.Attempts was not taken:
// the entry is deferred to its next attempt, or ends expired when that would
// start after the deadline (expiry minus the margin).
func (s *Dispatcher) notSent(ctx context.Context, e Entry, ns *NotSent, w Worker) (DispatchResult, error) {
	code := ns.Code
	if code == "" {
		code = "unspecified"
	}
	from := e
	var res DispatchResult
	err := s.core.OnConflict(ctx, e, func(e Entry) (err error) {
		next := s.core.Now().Add(s.backoff(e.Attempts, ns.RetryAfter))
		if s.core.ExpiredAt(e.ExpiresAt, next) && e.State == Dispatching {
			// Unknown (reconcile got there first) cannot end expired
			// directly; it is deferred, and its wake-up expires it.
			res, err = s.core.Expire(ctx, e, w, NotSentReason(code), OutcomeExpired)
		} else {
			reason := fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s", code, e.Attempts, next.UTC().Format(time.RFC3339Nano))
			res, err = s.deferTo(ctx, e, w, reason, code, next, false)
		}
		return err
	}, func(fresh Entry) bool {
		// As in recordOutcome: a concurrent write that kept the attempt (a
		// content-mismatch event, or reconcile marking the entry unknown
		// after its lease) does not lose the answer in hand.
		return fresh.Attempts == from.Attempts && (fresh.State == from.State || fresh.State == Unknown)
	})
	res.NotSent = ns
	return res, err
}
