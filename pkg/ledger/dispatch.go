package ledger

import (
	"context"
	"errors"
	"fmt"
)

// DispatchOutcome says what Dispatch did.
type DispatchOutcome string

// Dispatch outcomes.
const (
	DispatchSkipped     DispatchOutcome = "skipped"     // row not claimed (duplicate delivery, or another worker won)
	DispatchExpired     DispatchOutcome = "expired"     // challenge expired before dispatch: nothing sent
	DispatchQuarantined DispatchOutcome = "quarantined" // content unavailable: nothing sent
	DispatchAccepted    DispatchOutcome = "accepted"
	DispatchRejected    DispatchOutcome = "rejected"
	DispatchUnknown     DispatchOutcome = "unknown"
)

// DispatchResult is the row after Dispatch and what happened.
type DispatchResult struct {
	Outcome DispatchOutcome
	Entry   Entry
}

// Dispatch sends the claimed message for key at most once. Duplicate calls
// are harmless: only the caller that wins the conditional move
// claimed -> dispatching sends. The move also requires the challenge to be
// unexpired (minus the margin) in the database's condition.
//
// A conditional write before the send that loses (another worker moved the
// row, or a content-mismatch event bumped its version) is not an error: the
// row is read again and the decision made afresh, so a lost race is a skip
// and a write that kept the row claimed never costs the send.
func (s *Service) Dispatch(ctx context.Context, key string, w Worker) (DispatchResult, error) {
	return s.dispatch(ctx, key, nil, w)
}

// DispatchRow is Dispatch starting from a row the caller already holds, such
// as the new image of the stream record that announced the claim: it saves
// the first read. The row may be stale; the conditional writes still decide,
// and a stale row that loses one is read again like any lost race.
func (s *Service) DispatchRow(ctx context.Context, row Entry, w Worker) (DispatchResult, error) {
	return s.dispatch(ctx, row.Key, &row, w)
}

func (s *Service) dispatch(ctx context.Context, key string, row *Entry, w Worker) (DispatchResult, error) {
	for race := 1; ; race++ {
		var e Entry
		if race == 1 && row != nil {
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
	if e.State != Claimed {
		return DispatchResult{Outcome: DispatchSkipped, Entry: e}, false, nil
	}
	now := s.now()
	if s.expiredAt(e.ExpiresAt, now) {
		res, err := s.expire(ctx, e, w, "challenge expired before dispatch", DispatchExpired)
		return res, false, err
	}
	tr, ok := s.Transports[e.Identity.Channel]
	if !ok {
		return DispatchResult{}, false, fmt.Errorf("dispatch %s: %s: %w", e.Key, e.Identity.Channel, ErrNoTransport)
	}
	msg, err := s.openContent(ctx, e)
	if errors.Is(err, ErrContentUnavailable) || errors.Is(err, ErrNotFound) {
		const reason = "sealed content unavailable or failed verification; nothing sent"
		c, terr := s.transition(e, Quarantined, w, reason, func(n *Entry) { n.Reason = reason })
		if terr != nil {
			return DispatchResult{}, false, terr
		}
		res, err := s.apply(ctx, c, DispatchQuarantined)
		return res, false, err
	}
	if err != nil {
		return DispatchResult{}, false, fmt.Errorf("dispatch %s: %w", e.Key, err)
	}

	c, err := s.transition(e, Dispatching, w, "dispatch started", func(n *Entry) {
		n.Attempts = 1
		n.FirstAttemptAt = now
		n.LeaseUntil = now.Add(s.Policy.Lease)
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
	return res, true, err
}

// send makes one transport attempt for the dispatching row e and records
// its outcome.
func (s *Service) send(ctx context.Context, e Entry, tr Transport, msg Message, w Worker) (DispatchResult, error) {
	ack, err := tr.Send(ctx, Send{
		IdempotencyKey: e.Key, ContentHash: e.ContentHash, Channel: e.Identity.Channel,
		Attempt: e.Attempts, ExpiresAt: e.ExpiresAt, Message: msg,
	})
	to, out, reason, ackID := outcomeOf(ack, err)
	return s.recordOutcome(ctx, e, to, out, reason, ackID, w)
}

// outcomeOf maps a transport result to the three outcomes. Only an ack is
// accepted and only a *Rejection is rejected; everything else is unknown.
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
	c, err := s.transition(e, Expired, w, reason, func(n *Entry) { n.Reason = reason })
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
