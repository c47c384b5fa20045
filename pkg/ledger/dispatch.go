package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// DispatchOutcome says what Dispatch did.
type DispatchOutcome string

// Dispatch outcomes.
const (
	DispatchSkipped     DispatchOutcome = "skipped"     // row not due for dispatch (duplicate delivery, or another worker won)
	DispatchExpired     DispatchOutcome = "expired"     // challenge expired (or would before a send could start): nothing sent
	DispatchQuarantined DispatchOutcome = "quarantined" // content unavailable: nothing sent
	DispatchAccepted    DispatchOutcome = "accepted"
	DispatchRejected    DispatchOutcome = "rejected"
	DispatchUnknown     DispatchOutcome = "unknown"
	// DispatchDeferred: nothing sent; the provider did not take the message
	// for now, or the budget's next slot is later than Policy.BudgetWait.
	// The row is deferred and its wake-up scheduled.
	DispatchDeferred DispatchOutcome = "deferred"
	// DispatchNotDue: a deferred row was handed to dispatch before its
	// next attempt was due; its wake-up was scheduled again.
	DispatchNotDue DispatchOutcome = "not_due"
)

// BudgetCode is the NotSentCode of a row waiting for the send-rate budget
// rather than for a provider.
const BudgetCode = "send_rate_budget"

// NotSentReason is the reason of a row that ended expired because every
// attempt before the deadline was refused for now (code is the provider's
// last code, or BudgetCode).
func NotSentReason(code string) string { return "not sent before the challenge expired: " + code }

// DispatchResult is the row after Dispatch and what happened.
type DispatchResult struct {
	Outcome DispatchOutcome
	Entry   Entry
	// BudgetWait is how long this dispatch waited in-process for its
	// send-rate budget slot.
	BudgetWait time.Duration
	// NotSent is the provider's answer when it did not take the message.
	NotSent *NotSent
	// ScheduleErr is set when the row was deferred but its wake-up could not
	// be scheduled; reconcile's re-drive finds it instead.
	ScheduleErr error
}

// Dispatch sends the message of a claimed, or due deferred, row at most
// once per attempt. Duplicate calls are harmless: only the caller that wins
// the conditional move to dispatching sends. The move also requires the
// challenge to be unexpired (minus the margin) in the database's condition.
//
// A conditional write before the send that loses (another worker moved the
// row, or a content-mismatch event bumped its version) is not an error: the
// row is read again and the decision made afresh, so a lost race is a skip
// and a write that kept the row due never costs the send.
func (s *Service) Dispatch(ctx context.Context, key string, w Worker) (DispatchResult, error) {
	return s.dispatch(ctx, key, nil, w)
}

// DispatchRow is Dispatch starting from a row the caller already holds, such
// as the new image of the stream record that announced the claim: it saves
// the first read. The row may be stale; the conditional writes still decide,
// and a stale row that loses one is read again like any lost race.
//
// With a send-rate budget the row is read anyway: the slot is booked before
// the conditional write, and a booking is not undone when the write loses.
// A stale claimed row (the stream record arrived after a re-drive or a
// wake-up had already moved the row on) would book a slot that nobody
// sends in, and every such slot is send capacity lost for good.
func (s *Service) DispatchRow(ctx context.Context, row Entry, w Worker) (DispatchResult, error) {
	return s.dispatch(ctx, row.Key, &row, w)
}

func (s *Service) dispatch(ctx context.Context, key string, row *Entry, w Worker) (DispatchResult, error) {
	for race := 1; ; race++ {
		var e Entry
		if race == 1 && row != nil && s.Budget == nil {
			e = *row
		} else {
			var err error
			if e, err = s.Store.Get(ctx, key); err != nil {
				return DispatchResult{}, fmt.Errorf("dispatch %s: %w", key, err)
			}
		}
		res, sent, err := s.dispatchRow(ctx, e, w)
		if sent || !errors.Is(err, ErrConflict) || race == maxRaces {
			return res, err
		}
	}
}

// maxRaces bounds how often a use case re-reads a row after losing a
// conditional write to a concurrent one.
const maxRaces = 5

// dispatchRow makes the dispatch decision for the row e as read. sent reports
// whether the transport was called; a conflict before that is safe to retry.
func (s *Service) dispatchRow(ctx context.Context, e Entry, w Worker) (_ DispatchResult, sent bool, _ error) {
	now := s.now()
	switch {
	case e.State == Claimed:
	case e.State == Deferred && now.Add(s.Policy.BudgetWait).Before(e.NextAttemptAt):
		res := DispatchResult{Outcome: DispatchNotDue, Entry: e}
		res.ScheduleErr = s.schedule(ctx, e)
		return res, false, nil
	case e.State == Deferred:
	default:
		return DispatchResult{Outcome: DispatchSkipped, Entry: e}, false, nil
	}
	if s.expiredAt(e.ExpiresAt, now) {
		res, err := s.expire(ctx, e, w, expiryReason(e), DispatchExpired)
		return res, false, err
	}
	tr, ok := s.Transports[e.Identity.Channel]
	if !ok {
		return DispatchResult{}, false, fmt.Errorf("dispatch %s: %s: %w", e.Key, e.Identity.Channel, ErrNoTransport)
	}
	msg, err := s.openContent(ctx, e)
	if errors.Is(err, ErrContentUnavailable) || errors.Is(err, ErrNotFound) {
		const reason = "sealed content unavailable or failed verification; nothing sent"
		c, terr := s.transition(e, Quarantined, w, reason, func(n *Entry) { s.clearDeferral(n); n.Reason = reason })
		if terr != nil {
			return DispatchResult{}, false, terr
		}
		res, err := s.apply(ctx, c, DispatchQuarantined)
		return res, false, err
	}
	if err != nil {
		return DispatchResult{}, false, fmt.Errorf("dispatch %s: %w", e.Key, err)
	}

	at, deferred, err := s.slot(ctx, e, w, now)
	if deferred.Outcome != "" || err != nil {
		return deferred, false, err
	}
	waited := time.Duration(0)
	if d := at.Sub(now); d > 0 {
		// Hold the slot on the row before waiting for it. The booking is
		// made before any conditional write and is not undone when one
		// loses; while this dispatch waits, another delivery of the same
		// row (a re-drive, a duplicate wake-up, the stream record) would
		// otherwise find it still claimed and book a slot of its own, and
		// one of the two slots would go unused. Held, the row is deferred
		// to this slot: the other delivery waits for the same slot and
		// loses the move to dispatching, booking nothing.
		if e.State != Deferred || !e.SlotAt.Equal(at) {
			reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
			if e, err = s.deferral(ctx, e, w, reason, BudgetCode, at, true); err != nil {
				return DispatchResult{}, false, err
			}
		}
		if err := s.sleep(ctx, d); err != nil {
			return DispatchResult{}, false, fmt.Errorf("dispatch %s: waiting for the send-rate budget: %w", e.Key, err)
		}
		waited = d
		now = s.now()
	}

	c, err := s.transition(e, Dispatching, w, dispatchReason(e), func(n *Entry) {
		n.Attempts++
		if n.FirstAttemptAt.IsZero() {
			n.FirstAttemptAt = now
		}
		n.LeaseUntil = now.Add(s.Policy.Lease)
		s.clearDeferral(n)
		n.Reason = ""
	})
	if err != nil {
		return DispatchResult{}, false, err
	}
	c.NotExpiredBy = now.Add(s.Policy.ExpiryMargin)
	e, err = s.write(ctx, c)
	if err != nil {
		return DispatchResult{}, false, fmt.Errorf("dispatch %s: begin: %w", c.Next.Key, err)
	}
	res, err := s.send(ctx, e, tr, msg, w)
	res.BudgetWait = waited
	return res, true, err
}

func dispatchReason(e Entry) string {
	if e.State == Deferred {
		return "retry after not sent: " + e.NotSentCode
	}
	return "dispatch started"
}

// expiryReason says why a row that never reached the provider expired.
func expiryReason(e Entry) string {
	if e.State == Deferred && e.NotSentCode != "" {
		return NotSentReason(e.NotSentCode)
	}
	return "challenge expired before dispatch"
}

func (s *Service) clearDeferral(n *Entry) {
	n.NextAttemptAt, n.SlotAt, n.NotSentCode = timeZero, timeZero, ""
}

// slotGrace is how late a deferred row may wake and still use the send time
// it booked; later than that it books a new one, so a late wake-up can
// never bunch sends above the budget.
const slotGrace = time.Second

// slot returns the send time of the attempt about to start from row e: the
// one a deferred row holds, or a new booking in the budget. When the
// booking is further away than Policy.BudgetWait the row is deferred to it
// instead (deferred.Outcome is set); when no send time is left before the
// deadline the row ends expired.
func (s *Service) slot(ctx context.Context, e Entry, w Worker, now time.Time) (at time.Time, deferred DispatchResult, err error) {
	if e.State == Deferred && !e.SlotAt.IsZero() && !now.After(e.SlotAt.Add(slotGrace)) {
		return e.SlotAt, DispatchResult{}, nil
	}
	earliest := now
	if e.State == Deferred && e.NextAttemptAt.After(now) {
		earliest = e.NextAttemptAt // the provider's wait, not shortened by BudgetWait
	}
	if s.Budget == nil {
		return earliest, DispatchResult{}, nil
	}
	// The last send time the move to dispatching still accepts.
	deadline := e.ExpiresAt.Add(-s.Policy.ExpiryMargin - Precision)
	at, err = s.Budget.Reserve(ctx, e.Identity.Channel, earliest, deadline)
	if errors.Is(err, ErrNoBudget) {
		res, err := s.expire(ctx, e, w, NotSentReason(BudgetCode), DispatchExpired)
		return time.Time{}, res, err
	}
	if err != nil {
		return time.Time{}, DispatchResult{}, fmt.Errorf("dispatch %s: send-rate budget: %w", e.Key, err)
	}
	if at.Sub(now) <= s.Policy.BudgetWait {
		return at, DispatchResult{}, nil
	}
	reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
	res, err := s.deferTo(ctx, e, w, reason, BudgetCode, at, true)
	return time.Time{}, res, err
}

// deferTo records that the row waits until at (holding that budget slot
// if booked) and schedules its wake-up. From claimed, dispatching or
// unknown it is a transition; a deferred row records a deferral event.
func (s *Service) deferTo(ctx context.Context, e Entry, w Worker, reason, code string, at time.Time, booked bool) (DispatchResult, error) {
	got, err := s.deferral(ctx, e, w, reason, code, at, booked)
	if err != nil {
		return DispatchResult{}, err
	}
	return DispatchResult{Outcome: DispatchDeferred, Entry: got, ScheduleErr: s.schedule(ctx, got)}, nil
}

// deferral writes what deferTo records, without scheduling the wake-up.
func (s *Service) deferral(ctx context.Context, e Entry, w Worker, reason, code string, at time.Time, booked bool) (Entry, error) {
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
		c = s.record(e, KindDeferral, Deferred, w, reason, mut)
	} else {
		var err error
		if c, err = s.transition(e, Deferred, w, reason, mut); err != nil {
			return Entry{}, err
		}
	}
	c.Event.Code, c.Event.NextAttemptAt = code, at
	c.Event = chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	got, err := s.write(ctx, c)
	if err != nil {
		return Entry{}, fmt.Errorf("%s -> deferred %s: %w", e.State, e.Key, err)
	}
	return got, nil
}

// schedule asks for the deferred row e to be dispatched at its next
// attempt time.
func (s *Service) schedule(ctx context.Context, e Entry) error {
	if s.Scheduler == nil {
		return nil
	}
	if err := s.Scheduler.Schedule(ctx, e.Key, e.NextAttemptAt); err != nil {
		return fmt.Errorf("schedule %s: %w", e.Key, err)
	}
	return nil
}

func (s *Service) sleep(ctx context.Context, d time.Duration) error {
	if s.Sleep != nil {
		return s.Sleep(ctx, d)
	}
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
func (s *Service) backoff(n int, retryAfter time.Duration) time.Duration {
	d := s.Policy.RetryBase
	for i := 1; i < n && d < s.Policy.RetryMax; i++ {
		d *= 2
	}
	d = min(d, s.Policy.RetryMax)
	j := rand.Float64
	if s.Jitter != nil {
		j = s.Jitter
	}
	d = d/2 + time.Duration(j()*float64(d/2))
	return max(d, retryAfter).Truncate(Precision)
}

// send makes one transport attempt for the dispatching row e and records
// its outcome.
func (s *Service) send(ctx context.Context, e Entry, tr Transport, msg Message, w Worker) (DispatchResult, error) {
	ack, err := tr.Send(ctx, Send{
		IdempotencyKey: e.Key, ContentHash: e.ContentHash, Channel: e.Identity.Channel,
		Attempt: e.Attempts, ExpiresAt: e.ExpiresAt, Message: msg,
	})
	var ns *NotSent
	if errors.As(err, &ns) {
		return s.notSent(ctx, e, ns, w)
	}
	to, out, reason, ackID := outcomeOf(ack, err)
	return s.recordOutcome(ctx, e, to, out, reason, ackID, w)
}

// notSent records a provider's proof that attempt e.Attempts was not taken:
// the row is deferred to its next attempt, or ends expired when that would
// start after the deadline (expiry minus the margin).
func (s *Service) notSent(ctx context.Context, e Entry, ns *NotSent, w Worker) (DispatchResult, error) {
	code := ns.Code
	if code == "" {
		code = "unspecified"
	}
	for race := 1; ; race++ {
		now := s.now()
		next := now.Add(s.backoff(e.Attempts, ns.RetryAfter))
		var res DispatchResult
		var err error
		if s.expiredAt(e.ExpiresAt, next) && e.State == Dispatching {
			// Unknown (reconcile got there first) cannot end expired
			// directly; it is deferred, and its wake-up expires it.
			res, err = s.expire(ctx, e, w, NotSentReason(code), DispatchExpired)
		} else {
			reason := fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s", code, e.Attempts, next.UTC().Format(time.RFC3339Nano))
			res, err = s.deferTo(ctx, e, w, reason, code, next, false)
		}
		res.NotSent = ns
		if !errors.Is(err, ErrConflict) || race == maxRaces {
			return res, err
		}
		// As in recordOutcome: a concurrent write that kept the attempt
		// (a content-mismatch event, or reconcile marking the row unknown
		// after its lease) does not lose the answer in hand.
		fresh, gerr := s.Store.Get(ctx, e.Key)
		if gerr != nil || fresh.Attempts != e.Attempts || (fresh.State != e.State && fresh.State != Unknown) {
			return res, err
		}
		e = fresh
	}
}

// outcomeOf maps a transport result to the three outcomes. Only an ack is
// accepted and only a *Rejection is rejected; everything else is unknown.
// (A *NotSent never gets here: see send.)
func outcomeOf(ack Ack, err error) (State, DispatchOutcome, string, string) {
	var rej *Rejection
	switch {
	case err == nil:
		return Accepted, DispatchAccepted, "transport accepted", ack.ID
	case errors.As(err, &rej):
		return Rejected, DispatchRejected, "transport rejected: " + rej.Reason, ""
	default:
		return Unknown, DispatchUnknown, "no acknowledgement: " + err.Error(), ""
	}
}

// recordOutcome records the outcome of the attempt made from row e. If a
// write that kept the row's state and attempt (a content-mismatch event)
// bumped its version while the send was in flight, the outcome is recorded
// on the fresh row rather than lost.
func (s *Service) recordOutcome(ctx context.Context, e Entry, to State, out DispatchOutcome, reason, ackID string, w Worker) (DispatchResult, error) {
	for race := 1; ; race++ {
		now := s.now()
		c, err := s.transition(e, to, w, reason, func(n *Entry) {
			n.AckID = ackID
			n.Reason = reason
			n.LeaseUntil = timeZero
			n.NextCheckAt = timeZero
			if to == Unknown {
				n.NextCheckAt = now.Add(s.Policy.RecheckAfter)
			}
		})
		if err != nil {
			return DispatchResult{}, err
		}
		res, err := s.apply(ctx, c, out)
		if !errors.Is(err, ErrConflict) || race == maxRaces {
			return res, err
		}
		fresh, gerr := s.Store.Get(ctx, e.Key)
		if gerr != nil || fresh.Attempts != e.Attempts {
			return res, err
		}
		switch {
		case fresh.State == e.State:
		case e.State == Dispatching && (fresh.State == Unknown || fresh.State == Quarantined) && to != Unknown:
			// The send outlived its lease and reconcile already marked the
			// row unknown (or quarantined it); the provider's answer in hand
			// is the evidence that resolves it.
			reason += " (acknowledged after the lease expired)"
		default:
			return res, err
		}
		e = fresh
	}
}

// apply writes c and purges sealed content when the row ends.
func (s *Service) apply(ctx context.Context, c Change, out DispatchOutcome) (DispatchResult, error) {
	e, err := s.write(ctx, c)
	if err != nil {
		return DispatchResult{}, fmt.Errorf("%s -> %s %s: %w", c.From, c.Next.State, c.Next.Key, err)
	}
	if e.State.Terminal() || e.State == Quarantined {
		if err := s.purge(ctx, e); err != nil {
			return DispatchResult{Outcome: out, Entry: e}, err
		}
	}
	s.settleSuccessor(ctx, e, Worker(c.Event.Worker))
	return DispatchResult{Outcome: out, Entry: e}, nil
}

// write applies c. When the store reports a failure, the row is read back:
// if its history holds our event, the write landed (its response was lost,
// or a retry of it failed its own condition) and counts as done.
func (s *Service) write(ctx context.Context, c Change) (Entry, error) {
	e, err := s.Store.Apply(ctx, c)
	if err != nil {
		fresh, gerr := s.Store.Get(ctx, c.Next.Key)
		if gerr != nil || !fresh.Holds(c.Event.ID) {
			return Entry{}, err
		}
		e = fresh
	}
	s.transitioned(c.From, c.Next)
	return e, nil
}

// ContentKey is the content-store key of a row's sealed content: the dedupe
// key and the content hash, so content offered with another hash can never
// stand in for the row's own.
func ContentKey(e Entry) string { return contentKey(e.Key, e.ContentHash) }

func contentKey(key, hash string) string { return key + ":" + hash }

func (s *Service) purge(ctx context.Context, e Entry) error {
	if s.Content == nil {
		return nil
	}
	if err := s.Content.Delete(ctx, ContentKey(e)); err != nil {
		return fmt.Errorf("purge content %s: %w", e.Key, err)
	}
	return nil
}

func (s *Service) expire(ctx context.Context, e Entry, w Worker, reason string, out DispatchOutcome) (DispatchResult, error) {
	c, err := s.transition(e, Expired, w, reason, func(n *Entry) {
		n.LeaseUntil, n.NextCheckAt, n.NextAttemptAt, n.SlotAt = timeZero, timeZero, timeZero, timeZero
		n.Reason = reason
	})
	if err != nil {
		return DispatchResult{}, err
	}
	return s.apply(ctx, c, out)
}

// openContent fetches and opens the sealed message of e and checks it
// against the recorded content hash.
func (s *Service) openContent(ctx context.Context, e Entry) (Message, error) {
	sealed, err := s.Content.Get(ctx, ContentKey(e))
	if err != nil {
		return Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	m, err := s.Opener.Open(ctx, e.Key, sealed)
	if err != nil {
		return Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	if ContentHash(e.TemplateID, e.TemplateVersion, m) != e.ContentHash {
		return Message{}, fmt.Errorf("content %s: opened content does not match recorded hash: %w", e.Key, ErrContentUnavailable)
	}
	return m, nil
}
