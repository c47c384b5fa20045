package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The fallback rule: one active channel per challenge.

// Neighbor reads the entry of the channel step places from id's channel in
// wf: -1 the earlier fallback channel, +1 the next. ok is false when there
// is no such channel; a channel without an entry yet is the zero Entry (state
// None). The one read of a fallback Neighbor.
func (s *Core) Neighbor(ctx context.Context, id Identity, wf Workflow, step int) (ch Channel, row Entry, ok bool, err error) {
	if ch, ok = wf.neighbor(id.Channel, step); !ok {
		return "", Entry{}, false, nil
	}
	id.Channel = ch
	row, err = s.store.Get(ctx, id.Key())
	if errors.Is(err, ErrNotFound) {
		return ch, Entry{}, true, nil
	}
	if err != nil {
		return ch, Entry{}, true, fmt.Errorf("read fallback %s of %s: %w", ch, id.Key(), err)
	}
	return ch, row, true, nil
}

// FallbackGate decides the first state of a new claim: claimed, unless it
// is a fallback channel, whose state follows its predecessor's. The
// predecessor's terminal state is immutable, so reading it is safe.
func (s *Core) FallbackGate(ctx context.Context, in Intent) (State, string, error) {
	prev, p, ok, err := s.Neighbor(ctx, in.Identity, in.Workflow, -1)
	if err != nil {
		return None, "", fmt.Errorf("claim %s: %w", in.Key(), err)
	}
	if !ok {
		return Claimed, "intent claimed", nil
	}
	to, reason := s.heldNext(p, prev)
	return to, reason, nil
}

// heldNext is the one fallback rule. Given the entry p of the earlier channel
// prev (the zero Entry if it has no claim yet), the next channel is:
//   - claimed if prev ended rejected, or ended accepted and the provider then
//     reported a permanent delivery failure (a hard bounce);
//   - held while prev is open or unclaimed, and for Policy.FallbackWait
//     after prev was accepted, waiting for its delivery or failure;
//   - suppressed once prev was delivered, that wait passed, or prev ended
//     any other way.
func (s *Core) heldNext(p Entry, prev Channel) (State, string) {
	switch {
	case p.State == Rejected:
		return Claimed, fmt.Sprintf("fallback: %s ended rejected", prev)
	case p.State == Accepted:
		if f, ok := p.DeliveryFailure(); ok {
			return Claimed, fmt.Sprintf("fallback: %s was accepted, then the provider reported a permanent delivery failure: %s", prev, describeFailure(f))
		}
		if p.Delivered() {
			return Suppressed, fmt.Sprintf("fallback not needed: %s was delivered", prev)
		}
		if until := p.enteredAt().Add(s.policy.FallbackWait); s.Now().Before(until) {
			return Held, fmt.Sprintf("fallback: held until %s is delivered or fails permanently, at most until %s", prev, until.Format(time.RFC3339))
		}
		if s.policy.FallbackWait > 0 {
			return Suppressed, fmt.Sprintf("fallback not needed: %s ended accepted, no permanent delivery failure reported within %s", prev, s.policy.FallbackWait)
		}
		return Suppressed, fmt.Sprintf("fallback not needed: %s ended accepted", prev)
	case p.State.Terminal():
		return Suppressed, fmt.Sprintf("fallback not needed: %s ended %s", prev, p.State)
	case p.State == None:
		return Held, fmt.Sprintf("fallback: held until %s ends (not claimed yet)", prev)
	default:
		return Held, fmt.Sprintf("fallback: held until %s ends (now %s)", prev, p.State)
	}
}

func describeFailure(f Event) string {
	d := f.ProviderType
	if f.Detail != "" {
		d += " " + f.Detail
	}
	return d
}

// SettleSuccessor moves the held fallback channel after e, if any, now that
// e has ended. It is best effort; the expire sweep settles whatever it
// misses.
func (s *Core) SettleSuccessor(ctx context.Context, e Entry, w Worker) {
	if !e.State.Terminal() {
		return
	}
	if _, h, ok, err := s.Neighbor(ctx, e.Identity, e.Workflow, +1); ok && err == nil && h.State == Held {
		_, _ = s.SettleHeld(ctx, h, e, w)
	}
}

// SettleHeld moves the held entry h given the entry p of its predecessor:
// expired if its challenge expired, else as heldNext says. It reports the
// new state; Held means nothing was written.
func (s *Core) SettleHeld(ctx context.Context, h Entry, p Entry, w Worker) (State, error) {
	prev, _ := h.Workflow.neighbor(h.Identity.Channel, -1)
	to, reason := s.heldNext(p, prev)
	if s.ExpiredAt(h.ExpiresAt, s.Now()) {
		to, reason = Expired, "challenge expired while held for the earlier fallback channel"
	}
	if to == Held {
		return Held, nil
	}
	c, err := s.Transition(h, to, w, reason, func(n *Entry) { n.Reason = reason })
	if err != nil {
		return Held, err
	}
	if _, err := s.Apply(ctx, c, ""); err != nil {
		return Held, err
	}
	return to, nil
}
