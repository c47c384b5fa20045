package ledger

import (
	"context"
	"errors"
	"fmt"
)

// The sending rules dispatch and reconcile's same-key retry share.

// openContent fetches and opens the sealed message of e and checks it
// against the recorded content hash.
func (s *sender) openContent(ctx context.Context, e Entry) (Message, error) {
	sealed, err := s.core.Content().Get(ctx, ContentKey(e))
	if err != nil {
		return Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	m, err := s.opener.Open(ctx, e.Key, sealed)
	if err != nil {
		return Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	if ContentHash(e.TemplateID, e.TemplateVersion, m) != e.ContentHash {
		return Message{}, fmt.Errorf("content %s: opened content does not match recorded hash: %w", e.Key, ErrContentUnavailable)
	}
	return m, nil
}

// attempt makes the transport call for the attempt the dispatching entry e
// records, under the send deadline (expiry minus Policy.SendGuard), with the
// attempt's proof when the transport reports events. An attempt with no
// time left, or whose proof cannot be signed, stops before the provider: it
// answers *NotSent, as nothing was sent.
//
// The deadline is a duration on the worker's clock, so the call is cut
// when that much time has passed, whatever the clock reads then.
func (s *sender) attempt(ctx context.Context, e Entry, tr Transport, msg Message) (Ack, error) {
	deadline := e.ExpiresAt.Add(-s.core.Policy().SendGuard)
	left := deadline.Sub(s.core.Clock())
	if left <= 0 {
		return Ack{}, &NotSent{Code: DeadlineCode}
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	send := Send{
		IdempotencyKey: e.Key, ContentHash: e.ContentHash, Channel: e.Identity.Channel,
		Attempt: e.Attempts, ExpiresAt: e.ExpiresAt, Deadline: deadline, Message: msg,
	}
	if tr.Capabilities().Events {
		proof, err := s.proofs.Sign(ctx, AttemptRef{Key: e.Key, Channel: e.Identity.Channel, Attempt: e.Attempts})
		if err != nil {
			return Ack{}, &NotSent{Code: ProofCode}
		}
		send.Proof = proof
	}
	return tr.Send(ctx, send)
}

// outcomeOf maps a transport result to the three outcomes. Only an ack is
// accepted and only a *Rejection is rejected; everything else is unknown.
// (A *NotSent never gets here: see send.)
func outcomeOf(ack Ack, err error) (State, Outcome, string, string) {
	var rej *Rejection
	switch {
	case err == nil:
		return Accepted, OutcomeAccepted, "transport accepted", ack.ID
	case errors.As(err, &rej):
		return Rejected, OutcomeRejected, "transport rejected: " + rej.Reason, ""
	default:
		return Unknown, OutcomeUnknown, "no acknowledgement: " + err.Error(), ""
	}
}

// recordOutcome records the outcome of the attempt made from entry e. If a
// write that kept the entry's state and attempt (a content-mismatch event)
// bumped its version while the send was in flight, the outcome is recorded
// on the fresh entry rather than lost.
func (s *sender) recordOutcome(ctx context.Context, e Entry, to State, out Outcome, reason, ackID string, w Worker) (DispatchResult, error) {
	from := e
	var res DispatchResult
	err := s.core.OnConflict(ctx, e, func(e Entry) error {
		now := s.core.Now()
		c, err := s.core.Transition(e, to, w, reason, func(n *Entry) {
			n.AckID = ackID
			n.Reason = reason
			n.LeaseUntil = timeZero
			n.NextCheckAt = timeZero
			if to == Unknown {
				n.NextCheckAt = now.Add(s.core.Policy().RecheckAfter)
			}
		})
		if err != nil {
			return err
		}
		res, err = s.core.Apply(ctx, c, out)
		return err
	}, func(fresh Entry) bool {
		switch {
		case fresh.Attempts != from.Attempts:
			return false
		case fresh.State == from.State:
			return true
		case from.State == Dispatching && (fresh.State == Unknown || fresh.State == Quarantined) && to != Unknown:
			// The send outlived its lease and reconcile already marked the
			// entry unknown (or quarantined it); the provider's answer in hand
			// is the evidence that resolves it.
			reason += " (acknowledged after the lease expired)"
			return true
		}
		return false
	})
	return res, err
}
