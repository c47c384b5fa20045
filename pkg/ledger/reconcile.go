package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var timeZero time.Time

// SweepReport counts what one sweep did, by outcome.
type SweepReport struct {
	Seen    int
	Actions map[string]int
	// Errors holds per-row failures; the sweep continues past them.
	Errors []error
}

func (r *SweepReport) count(action string) {
	if r.Actions == nil {
		r.Actions = map[string]int{}
	}
	r.Actions[action]++
}

// Err joins the per-row failures, or returns nil.
func (r SweepReport) Err() error { return errors.Join(r.Errors...) }

// Reconcile sweeps rows stuck in dispatching past their lease (to unknown)
// and due unknown rows, applying the transport's policy: a same-key retry
// inside the window the transport honors, a lookup where supported, and
// otherwise quarantine for an explicit decision. It never turns unknown into
// accepted or rejected without transport evidence. At most limit rows per
// state are handled per call.
func (s *Service) Reconcile(ctx context.Context, w Worker, limit int) (SweepReport, error) {
	var rep SweepReport
	now := s.now()
	stuck, err := s.Store.ListOpen(ctx, Dispatching, now, limit)
	if err != nil {
		return rep, fmt.Errorf("reconcile: list dispatching: %w", err)
	}
	for _, e := range stuck {
		rep.Seen++
		c, err := s.transition(e, Unknown, w, "lease expired without a recorded outcome", func(n *Entry) {
			n.LeaseUntil = timeZero
			n.NextCheckAt = now
			n.Reason = "lease expired without a recorded outcome"
		})
		if err == nil {
			_, err = s.write(ctx, c)
		}
		s.note(&rep, "dispatching->unknown", err)
	}
	unknown, err := s.Store.ListOpen(ctx, Unknown, now, limit)
	if err != nil {
		return rep, fmt.Errorf("reconcile: list unknown: %w", err)
	}
	for _, e := range unknown {
		rep.Seen++
		action, err := s.resolveUnknown(ctx, e, w)
		s.note(&rep, action, err)
	}
	return rep, nil
}

func (s *Service) note(rep *SweepReport, action string, err error) {
	switch {
	case errors.Is(err, ErrConflict):
		rep.count("skipped (changed concurrently)")
	case err != nil:
		rep.Errors = append(rep.Errors, err)
		rep.count("error")
	default:
		rep.count(action)
	}
}

// resolveUnknown applies the reconcile policy of the row's transport.
func (s *Service) resolveUnknown(ctx context.Context, e Entry, w Worker) (string, error) {
	now := s.now()
	tr, ok := s.Transports[e.Identity.Channel]
	if !ok {
		return "", fmt.Errorf("reconcile %s: %s: %w", e.Key, e.Identity.Channel, ErrNoTransport)
	}
	caps := tr.Capabilities()

	if lk, ok := tr.(Looker); ok && caps.Lookup {
		ack, found, err := lk.Lookup(ctx, e.Key)
		if err != nil {
			return "", fmt.Errorf("reconcile %s: lookup: %w", e.Key, err)
		}
		if found {
			_, err := s.decide(ctx, e, Accepted, w, "reconcile: transport lookup found the message", ack.ID)
			return "unknown->accepted (lookup)", err
		}
		if now.Before(e.FirstAttemptAt.Add(s.Policy.SettlePeriod)) {
			return "waiting (lookup settle period)", s.recheck(ctx, e, w, now)
		}
		// Settled and not found: fall through to the retry or quarantine policy.
	}

	if caps.IdempotencyWindow > 0 {
		switch {
		case s.expiredAt(e.ExpiresAt, now):
			return "unknown->quarantined", s.quarantine(ctx, e, w, "same-key retry not allowed: challenge expired; outcome unknown")
		case e.Attempts >= s.Policy.MaxAttempts:
			return "unknown->quarantined", s.quarantine(ctx, e, w, fmt.Sprintf("same-key retry budget of %d attempts spent; outcome unknown", s.Policy.MaxAttempts))
		case !now.Before(e.FirstAttemptAt.Add(caps.IdempotencyWindow)):
			return "unknown->quarantined", s.quarantine(ctx, e, w, "transport idempotency window passed; outcome unknown")
		}
		return s.retry(ctx, e, tr, w)
	}
	return "unknown->quarantined", s.quarantine(ctx, e, w, "transport has no idempotency key or lookup; outcome unknown, needs an operator decision")
}

// recheck moves the row's next look later without a state change.
func (s *Service) recheck(ctx context.Context, e Entry, w Worker, now time.Time) error {
	c := s.record(e, KindRecheck, Unknown, w, "reconcile: lookup found nothing yet; waiting for the settle period", func(n *Entry) {
		n.NextCheckAt = now.Add(s.Policy.RecheckAfter)
	})
	_, err := s.write(ctx, c)
	return err
}

// retry makes another attempt under the same idempotency key. The attempt is
// recorded (and the next look pushed past the lease) before the send, so a
// crash during the retry leaves an unknown row with an honest attempt count.
func (s *Service) retry(ctx context.Context, e Entry, tr Transport, w Worker) (string, error) {
	now := s.now()
	msg, err := s.openContent(ctx, e)
	if errors.Is(err, ErrContentUnavailable) || errors.Is(err, ErrNotFound) {
		return "unknown->quarantined", s.quarantine(ctx, e, w, "same-key retry impossible: sealed content unavailable; outcome unknown")
	}
	if err != nil {
		return "", err
	}
	c := s.record(e, KindRetry, Unknown, w, "reconcile: same-key retry inside the transport's idempotency window", func(n *Entry) {
		n.Attempts++
		n.NextCheckAt = now.Add(s.Policy.Lease)
	})
	c.NotExpiredBy = now.Add(s.Policy.ExpiryMargin)
	e, err = s.write(ctx, c)
	if err != nil {
		return "", err
	}
	ack, err := tr.Send(ctx, Send{
		IdempotencyKey: e.Key, ContentHash: e.ContentHash, Channel: e.Identity.Channel,
		Attempt: e.Attempts, ExpiresAt: e.ExpiresAt, Message: msg,
	})
	to, out, reason, ackID := outcomeOf(ack, err)
	if to == Unknown {
		// Still no answer: the row stays unknown; record the attempt's result.
		c := s.record(e, KindRetry, Unknown, w, "reconcile: same-key retry got "+reason, func(n *Entry) {
			n.NextCheckAt = s.now().Add(s.Policy.RecheckAfter)
		})
		_, err := s.write(ctx, c)
		return "unknown (retry unanswered)", err
	}
	_, err = s.recordOutcome(ctx, e, to, out, "reconcile: same-key retry: "+reason, ackID, w)
	return "unknown->" + string(to) + " (same-key retry)", err
}

func (s *Service) quarantine(ctx context.Context, e Entry, w Worker, reason string) error {
	c, err := s.transition(e, Quarantined, w, reason, func(n *Entry) {
		n.NextCheckAt = timeZero
		n.Reason = reason
	})
	if err != nil {
		return err
	}
	_, err = s.apply(ctx, c, "")
	return err
}

// decide moves an unknown or quarantined row to a final state.
func (s *Service) decide(ctx context.Context, e Entry, to State, w Worker, reason, ackID string) (Entry, error) {
	c, err := s.transition(e, to, w, reason, func(n *Entry) {
		n.NextCheckAt = timeZero
		n.Reason = reason
		if ackID != "" {
			n.AckID = ackID
		}
	})
	if err != nil {
		return Entry{}, err
	}
	r, err := s.apply(ctx, c, "")
	return r.Entry, err
}

// ExpireSweep marks still-claimed rows whose challenge expired (for example
// a stream record that never reached dispatch), and deferred rows whose
// challenge ran out before their next attempt, as expired, and purges their
// sealed content. It also settles held fallback rows: claimed or suppressed
// once their earlier channel ended, expired with their challenge.
func (s *Service) ExpireSweep(ctx context.Context, w Worker, limit int) (SweepReport, error) {
	var rep SweepReport
	now := s.now()
	rows, err := s.Store.ListOpen(ctx, Claimed, now.Add(s.Policy.ExpiryMargin), limit)
	if err != nil {
		return rep, fmt.Errorf("expire: list claimed: %w", err)
	}
	for _, e := range rows {
		rep.Seen++
		if !s.expiredAt(e.ExpiresAt, now) {
			continue
		}
		_, err := s.expire(ctx, e, w, "challenge expired while claimed; never dispatched", DispatchExpired)
		s.note(&rep, "claimed->expired", err)
	}
	// Deferred rows whose challenge ran out while they waited (a lost
	// wake-up and a missed re-drive): they were never sent.
	deferred, err := s.Store.ListOpen(ctx, Deferred, now, limit)
	if err != nil {
		return rep, fmt.Errorf("expire: list deferred: %w", err)
	}
	for _, e := range deferred {
		rep.Seen++
		if !s.expiredAt(e.ExpiresAt, now) {
			continue
		}
		_, err := s.expire(ctx, e, w, expiryReason(e), DispatchExpired)
		s.note(&rep, "deferred->expired", err)
	}
	// Held fallback channels: settle those whose earlier channel ended (a
	// missed settleSuccessor) and expire those whose challenge did. All of
	// them are listed, not the first limit: rows still waiting would
	// otherwise hide a straggler behind them on every tick.
	held, err := s.Store.ListOpen(ctx, Held, time.Time{}, 0)
	if err != nil {
		return rep, fmt.Errorf("expire: list held: %w", err)
	}
	for _, h := range held {
		rep.Seen++
		p := None
		if prev, ok := h.Workflow.neighbor(h.Identity.Channel, -1); ok {
			id := h.Identity
			id.Channel = prev
			got, err := s.Store.Get(ctx, id.Key())
			switch {
			case err == nil:
				p = got.State
			case !errors.Is(err, ErrNotFound):
				s.note(&rep, "", err)
				continue
			}
		}
		to, err := s.settleHeld(ctx, h, p, w)
		if to != Held || err != nil {
			s.note(&rep, "held->"+string(to), err)
		}
	}
	return rep, nil
}

// Decision is an operator's resolution of an unknown or quarantined row.
type Decision string

// Decisions. Accepted and rejected require transport evidence (an ack or
// provider reference); abandoned says the outcome stays unknown.
const (
	DecideAccepted  Decision = "accepted"
	DecideRejected  Decision = "rejected"
	DecideAbandoned Decision = "abandoned"
)

// Resolve records an operator's decision on an unknown or quarantined row.
// evidence is the transport's acknowledgement or reference; a decision of
// accepted or rejected without it fails with ErrNoEvidence.
func (s *Service) Resolve(ctx context.Context, key string, d Decision, reason, evidence string, w Worker) (Entry, error) {
	if reason == "" {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &FieldError{Field: "reason", Reason: "missing"})
	}
	// Operator text lands in the evidence trail: keep addresses and phone
	// numbers out of it, as everywhere else.
	if err := checkFreeText("reason", reason, true); err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	// Provider ids are long and digit-heavy; only addresses are refused there.
	if err := checkFreeText("evidence", evidence, false); err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	e, err := s.Store.Get(ctx, key)
	if err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	var to State
	switch d {
	case DecideAccepted:
		to = Accepted
	case DecideRejected:
		to = Rejected
	case DecideAbandoned:
		to = Abandoned
		reason = "abandoned, outcome unknown: " + reason
		evidence = ""
	default:
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &FieldError{Field: "decision", Reason: "want accepted, rejected or abandoned"})
	}
	if to != Abandoned && evidence == "" {
		return Entry{}, fmt.Errorf("resolve %s as %s: %w", key, d, ErrNoEvidence)
	}
	if e.State != Unknown && e.State != Quarantined {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &TransitionError{From: e.State, To: to})
	}
	if to != Abandoned {
		reason = "operator decision with transport evidence: " + reason
	}
	return s.decide(ctx, e, to, w, reason, evidence)
}

// checkFreeText refuses operator text that could carry personal data or
// break a log line: an '@', a run of 7 or more digits (a phone number, when
// phones is set), control characters, or more than 500 bytes.
func checkFreeText(field, v string, phones bool) error {
	if len(v) > 500 {
		return fieldErr(field, "too long (500 bytes at most)")
	}
	digits := 0
	for _, r := range v {
		switch {
		case r == '@':
			return fieldErr(field, "must not contain an email address")
		case r < 0x20 || r == 0x7f:
			return fieldErr(field, "contains a control character")
		case r >= '0' && r <= '9':
			digits++
			if phones && digits >= 7 {
				return fieldErr(field, "must not contain a phone number (7 or more digits in a row)")
			}
		case r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			// separators inside a phone number keep the run going
		default:
			digits = 0
		}
	}
	return nil
}

// Redrive hands back to dispatch the rows that are due for dispatch and
// that no dispatch picked up within Policy.RedriveAfter: claimed rows (a
// lost or given-up stream record, a crashed batch) and deferred rows past
// their next attempt (a lost wake-up). It writes nothing to the ledger:
// the Scheduler delivers the key to dispatch, whose conditional write
// decides as for any other delivery. Expired challenges are left to the
// expire sweep. At most limit rows per state are handed back per call.
func (s *Service) Redrive(ctx context.Context, limit int) (SweepReport, error) {
	var rep SweepReport
	if s.Scheduler == nil {
		return rep, errors.New("redrive: no scheduler configured")
	}
	now := s.now()
	late := now.Add(-s.Policy.RedriveAfter)
	deferred, err := s.Store.ListOpen(ctx, Deferred, late, limit)
	if err != nil {
		return rep, fmt.Errorf("redrive: list deferred: %w", err)
	}
	// Claimed rows are indexed by expiry, not by when they were claimed:
	// list the open ones soonest-expiring first and take the late ones.
	claimed, err := s.Store.ListOpen(ctx, Claimed, timeZero, limit)
	if err != nil {
		return rep, fmt.Errorf("redrive: list claimed: %w", err)
	}
	for _, e := range append(deferred, claimed...) {
		rep.Seen++
		if e.UpdatedAt.After(late) || s.expiredAt(e.ExpiresAt, now) {
			continue
		}
		s.note(&rep, string(e.State)+"->redriven", s.Scheduler.Schedule(ctx, e.Key, now))
	}
	return rep, nil
}
