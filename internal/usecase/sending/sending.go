// Package sending is the sending rules dispatch and reconcile's same-key
// retry share: open the sealed content, make the attempt under its
// deadline with its proof, and record its outcome.
package sending

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// OpenContent fetches and opens the sealed message of e and checks it
// against the recorded content hash.
func (s *Sender) OpenContent(ctx context.Context, e ledger.Entry) (ledger.Message, error) {
	sealed, err := s.core.Content().Get(ctx, ledger.ContentKey(e))
	if err != nil {
		return ledger.Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	m, err := s.opener.Open(ctx, e.Key, sealed)
	if err != nil {
		return ledger.Message{}, fmt.Errorf("content %s: %w", e.Key, err)
	}
	if ledger.ContentHash(e.TemplateID, e.TemplateVersion, m) != e.ContentHash {
		return ledger.Message{}, fmt.Errorf("content %s: opened content does not match recorded hash: %w", e.Key, ledger.ErrContentUnavailable)
	}
	return m, nil
}

// Attempt makes the transport call for the Attempt the dispatching entry e
// records, under the send deadline (expiry minus Policy.SendGuard), with the
// Attempt's proof when the transport reports events. An Attempt with no
// time left, or whose proof cannot be signed, stops before the provider: it
// answers *NotSent, as nothing was sent.
//
// The deadline is a duration on the worker's clock, so the call is cut
// when that much time has passed, whatever the clock reads then.
func (s *Sender) Attempt(ctx context.Context, e ledger.Entry, tr ledger.Transport, msg ledger.Message) (ledger.Ack, error) {
	deadline := e.ExpiresAt.Add(-s.core.Policy().SendGuard)
	left := deadline.Sub(s.core.Clock())
	if left <= 0 {
		return ledger.Ack{}, &ledger.NotSent{Code: ledger.DeadlineCode}
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	send := ledger.Send{
		IdempotencyKey: e.Key, ContentHash: e.ContentHash, Channel: e.Identity.Channel,
		Attempt: e.Attempts, ExpiresAt: e.ExpiresAt, Deadline: deadline, Message: msg,
	}
	if tr.Capabilities().Events {
		proof, err := s.proofs.Sign(ctx, ledger.AttemptRef{Key: e.Key, Channel: e.Identity.Channel, Attempt: e.Attempts})
		if err != nil {
			return ledger.Ack{}, &ledger.NotSent{Code: ledger.ProofCode}
		}
		send.Proof = proof
	}
	return tr.Send(ctx, send)
}

// OutcomeOf maps a transport result to the three outcomes. Only an ack is
// accepted and only a *Rejection is rejected; everything else is unknown.
// (A *NotSent never gets here: see send.)
func OutcomeOf(ack ledger.Ack, err error) (ledger.State, ledger.Outcome, string, string) {
	var rej *ledger.Rejection
	switch {
	case err == nil:
		return ledger.Accepted, ledger.OutcomeAccepted, "transport accepted", ack.ID
	case errors.As(err, &rej):
		return ledger.Rejected, ledger.OutcomeRejected, "transport rejected: " + rej.Reason, ""
	default:
		return ledger.Unknown, ledger.OutcomeUnknown, "no acknowledgement: " + err.Error(), ""
	}
}

// RecordOutcome records the outcome of the attempt made from entry e. If a
// write that kept the entry's state and attempt (a content-mismatch event)
// bumped its version while the send was in flight, the outcome is recorded
// on the fresh entry rather than lost.
func (s *Sender) RecordOutcome(ctx context.Context, e ledger.Entry, to ledger.State, out ledger.Outcome, reason, ackID string, w ledger.Worker) (ledger.DispatchResult, error) {
	from := e
	var res ledger.DispatchResult
	err := s.core.OnConflict(ctx, e, func(e ledger.Entry) error {
		now := s.core.Now()
		c, err := s.core.Transition(e, to, w, reason, func(n *ledger.Entry) {
			n.AckID = ackID
			n.Reason = reason
			n.LeaseUntil = time.Time{}
			n.NextCheckAt = time.Time{}
			if to == ledger.Unknown {
				n.NextCheckAt = now.Add(s.core.Policy().RecheckAfter)
			}
		})
		if err != nil {
			return err
		}
		res, err = s.core.Apply(ctx, c, out)
		return err
	}, func(fresh ledger.Entry) bool {
		switch {
		case fresh.Attempts != from.Attempts:
			return false
		case fresh.State == from.State:
			return true
		case from.State == ledger.Dispatching && (fresh.State == ledger.Unknown || fresh.State == ledger.Quarantined) && to != ledger.Unknown:
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

// Sender is what dispatch and reconcile's same-key retry share: the
// transports, the opener of sealed content and the attempt proofs.
type Sender struct {
	core       *ledger.Core // its owner's
	transports map[ledger.Channel]ledger.Transport
	opener     ledger.Opener
	proofs     ledger.Proofs
}

// New checks the sending ports: at least one transport, none nil, and,
// for the transports whose sends this use case makes (sends), the opener
// of their content and, where they report provider events, Proofs (those
// sends carry a proof).
// Ports are what a Sender sends with: a transport per channel, the
// opener of sealed content and the attempt proofs.
type Ports struct {
	Transports map[ledger.Channel]ledger.Transport
	Opener     ledger.Opener
	Proofs     ledger.Proofs
}

func New(role string, p Ports, sends func(ledger.Capabilities) bool) (Sender, error) {
	need := ledger.PortCheck{UseCase: role}
	need.Port(len(p.Transports) > 0, "Transports")
	opens, events := false, false
	for _, ch := range ledger.Channels {
		tr, ok := p.Transports[ch]
		if !ok {
			continue
		}
		need.Port(tr != nil, "Transports["+string(ch)+"]")
		if tr == nil {
			continue
		}
		if caps := tr.Capabilities(); sends(caps) {
			opens, events = true, events || caps.Events
		}
	}
	need.Port(!opens || p.Opener != nil, "Opener")
	need.Port(!events || p.Proofs != nil, "Proofs (a transport reports provider events: its sends carry a proof)")
	if err := need.Err(); err != nil {
		return Sender{}, err
	}
	return Sender{transports: p.Transports, opener: p.Opener, proofs: p.Proofs}, nil
}

// Transport is the transport of channel ch, if the stage has one.
func (s *Sender) Transport(ch ledger.Channel) (ledger.Transport, bool) {
	tr, ok := s.transports[ch]
	return tr, ok
}

// For returns s writing through core, its owner's.
func (s Sender) For(core *ledger.Core) Sender {
	s.core = core
	return s
}
