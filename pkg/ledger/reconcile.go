package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reconcile sweeps entries stuck in dispatching past their lease (to unknown)
// and due unknown entries, applying the transport's policy: a same-key retry
// inside the window the transport honors, a lookup where supported, and
// otherwise quarantine for an explicit decision. It never turns unknown into
// accepted or rejected without transport evidence. At most limit entries per
// state are handled per call.
func (s *Reconciler) Reconcile(ctx context.Context, w Worker, limit int) (SweepReport, error) {
	var rep SweepReport
	now := s.core.Now()
	err := s.core.SweepOpen(ctx, &rep, "reconcile", Dispatching, now, limit, func(e Entry) (string, error) {
		c, err := s.core.Transition(e, Unknown, w, "lease expired without a recorded outcome", func(n *Entry) {
			n.LeaseUntil = timeZero
			n.NextCheckAt = now
			n.Reason = "lease expired without a recorded outcome"
		})
		if err == nil {
			_, err = s.core.Write(ctx, c)
		}
		return "dispatching->unknown", err
	})
	if err != nil {
		return rep, err
	}
	err = s.core.SweepOpen(ctx, &rep, "reconcile", Unknown, now, limit, func(e Entry) (string, error) {
		return s.resolveUnknown(ctx, e, w)
	})
	return rep, err
}

// resolveUnknown applies the reconcile policy of the entry's transport.
func (s *Reconciler) resolveUnknown(ctx context.Context, e Entry, w Worker) (string, error) {
	now := s.core.Now()
	tr, ok := s.sender.transports[e.Identity.Channel]
	if !ok {
		return "", fmt.Errorf("reconcile %s: %s: %w", e.Key, e.Identity.Channel, ErrNoTransport)
	}
	caps := tr.Capabilities()

	if caps.Events {
		// An event may have arrived while the entry was still dispatching:
		// it was kept in the history, and is the evidence now.
		if ev, ok := e.ProviderEvidence(); ok {
			_, err := s.core.AcceptOnEvidence(ctx, e, w, ev, "reconcile")
			return "unknown->accepted (provider event)", err
		}
		if now.Before(e.lastAttemptAt().Add(s.core.Policy().SettlePeriod)) {
			return "waiting (provider events settle period)", s.recheck(ctx, e, w, now, "reconcile: no provider event yet; waiting for the settle period")
		}
		if caps.IdempotencyWindow == 0 && !caps.Lookup {
			return "unknown->quarantined", s.core.Quarantine(ctx, e, w, fmt.Sprintf("no provider event within the settle period of %s, and the transport has no idempotency key or lookup; outcome unknown, needs an operator decision", s.core.Policy().SettlePeriod))
		}
	}

	if lk, ok := tr.(Looker); ok && caps.Lookup {
		ack, found, err := lk.Lookup(ctx, e.Key)
		if err != nil {
			return "", fmt.Errorf("reconcile %s: lookup: %w", e.Key, err)
		}
		if found {
			_, err := s.core.Decide(ctx, e, Accepted, w, "reconcile: transport lookup found the message", ack.ID)
			return "unknown->accepted (lookup)", err
		}
		if now.Before(e.FirstAttemptAt.Add(s.core.Policy().SettlePeriod)) {
			return "waiting (lookup settle period)", s.recheck(ctx, e, w, now, "reconcile: lookup found nothing yet; waiting for the settle period")
		}
		// Settled and not found: fall through to the retry or quarantine policy.
	}

	if caps.IdempotencyWindow > 0 {
		switch {
		case s.core.ExpiredAt(e.ExpiresAt, now):
			return "unknown->quarantined", s.core.Quarantine(ctx, e, w, "same-key retry not allowed: challenge expired; outcome unknown")
		case e.Attempts >= s.core.Policy().MaxAttempts:
			return "unknown->quarantined", s.core.Quarantine(ctx, e, w, fmt.Sprintf("same-key retry budget of %d attempts spent; outcome unknown", s.core.Policy().MaxAttempts))
		case !now.Add(s.core.Policy().Lease + s.core.Policy().ExpiryMargin).Before(e.FirstAttemptAt.Add(caps.IdempotencyWindow)):
			// The retry must reach the provider before it forgets the key:
			// an attempt may take up to its lease (the next look is pushed
			// past it), and the margin covers skew between the clock that
			// recorded the first attempt, this one and the provider's.
			return "unknown->quarantined", s.core.Quarantine(ctx, e, w, "transport idempotency window passed, or would before a retry could finish within its lease; outcome unknown")
		}
		return s.retry(ctx, e, tr, w, now.Add(s.core.Policy().Lease))
	}
	return "unknown->quarantined", s.core.Quarantine(ctx, e, w, "transport has no idempotency key or lookup; outcome unknown, needs an operator decision")
}

// recheck moves the entry's next look later without a state change.
func (s *Reconciler) recheck(ctx context.Context, e Entry, w Worker, now time.Time, reason string) error {
	c := s.core.Record(e, KindRecheck, Unknown, w, reason, func(n *Entry) {
		n.NextCheckAt = now.Add(s.core.Policy().RecheckAfter)
	})
	_, err := s.core.Write(ctx, c)
	return err
}

// retry makes another attempt under the same idempotency key. The attempt is
// recorded (and the next look pushed past the lease) before the send, so a
// crash during the retry leaves an unknown entry with an honest attempt count.
// The transport call is cut at until (the lease the window check allowed it)
// or at the send deadline, whichever comes first.
func (s *Reconciler) retry(ctx context.Context, e Entry, tr Transport, w Worker, until time.Time) (string, error) {
	msg, err := s.sender.openContent(ctx, e)
	if errors.Is(err, ErrContentUnavailable) || errors.Is(err, ErrNotFound) {
		return "unknown->quarantined", s.core.Quarantine(ctx, e, w, "same-key retry impossible: sealed content unavailable; outcome unknown")
	}
	if err != nil {
		return "", err
	}
	now := s.core.Now() // after the content read: the write's expiry condition uses the clock of the write
	c := s.core.Record(e, KindRetry, Unknown, w, "reconcile: same-key retry inside the transport's idempotency window", func(n *Entry) {
		n.Attempts++
		n.NextCheckAt = now.Add(s.core.Policy().Lease)
	})
	c.NotExpiredBy = now.Add(s.core.Policy().ExpiryMargin)
	e, err = s.core.Write(ctx, c)
	if err != nil {
		return "", err
	}
	// The write's answer can come back late, as dispatch's begin can: the
	// retry is sent only if the challenge still counts as unexpired now.
	if s.core.ExpiredAt(e.ExpiresAt, s.core.Now()) {
		return "unknown->quarantined", s.core.Quarantine(ctx, e, w, "same-key retry not made: challenge expired before it could start; outcome unknown")
	}
	callCtx, cancel := context.WithTimeout(ctx, until.Sub(s.core.Clock()))
	ack, err := s.sender.attempt(callCtx, e, tr, msg)
	cancel()
	to, out, reason, ackID := outcomeOf(ack, err)
	var ns *NotSent
	if errors.As(err, &ns) {
		// The provider (or the send deadline, or the proof) proves this
		// retry sent nothing; the earlier attempt is still unknown.
		reason = "not sent: " + ns.Code
	}
	if to == Unknown {
		// Still no answer: the entry stays unknown; record the attempt's result.
		c := s.core.Record(e, KindRetry, Unknown, w, "reconcile: same-key retry got "+reason, func(n *Entry) {
			n.NextCheckAt = s.core.Now().Add(s.core.Policy().RecheckAfter)
		})
		_, err := s.core.Write(ctx, c)
		return "unknown (retry unanswered)", err
	}
	_, err = s.sender.recordOutcome(ctx, e, to, out, "reconcile: same-key retry: "+reason, ackID, w)
	return "unknown->" + string(to) + " (same-key retry)", err
}
