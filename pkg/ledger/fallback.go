package ledger

import (
	"context"
	"errors"
	"fmt"
)

// The fallback rule: one active channel per challenge.

// neighbor reads the row of the channel step places from id's channel in
// wf: -1 the earlier fallback channel, +1 the next. ok is false when there
// is no such channel; a channel without a row yet is the zero Entry (state
// None). The one read of a fallback neighbor.
func (s *Service) neighbor(ctx context.Context, id Identity, wf Workflow, step int) (ch Channel, row Entry, ok bool, err error) {
	if ch, ok = wf.neighbor(id.Channel, step); !ok {
		return "", Entry{}, false, nil
	}
	id.Channel = ch
	row, err = s.Store.Get(ctx, id.Key())
	if errors.Is(err, ErrNotFound) {
		return ch, Entry{}, true, nil
	}
	if err != nil {
		return ch, Entry{}, true, fmt.Errorf("read fallback %s of %s: %w", ch, id.Key(), err)
	}
	return ch, row, true, nil
}

// fallbackGate decides the first state of a new claim: claimed, unless it
// is a fallback channel, whose state follows its predecessor's. The
// predecessor's terminal state is immutable, so reading it is safe.
func (s *Service) fallbackGate(ctx context.Context, in Intent) (State, string, error) {
	prev, p, ok, err := s.neighbor(ctx, in.Identity, in.Workflow, -1)
	if err != nil {
		return None, "", fmt.Errorf("claim %s: %w", in.Key(), err)
	}
	if !ok {
		return Claimed, "intent claimed", nil
	}
	to, reason := heldNext(p.State, prev)
	return to, reason, nil
}

// heldNext is the one fallback rule: given the state of the earlier channel
// prev (None if it has no claim yet), the next channel is claimed if prev
// ended rejected, suppressed if it ended otherwise, and held while it is
// open or unclaimed.
func heldNext(p State, prev Channel) (State, string) {
	switch {
	case p == Rejected:
		return Claimed, fmt.Sprintf("fallback: %s ended rejected", prev)
	case p.Terminal():
		return Suppressed, fmt.Sprintf("fallback not needed: %s ended %s", prev, p)
	case p == None:
		return Held, fmt.Sprintf("fallback: held until %s ends (not claimed yet)", prev)
	default:
		return Held, fmt.Sprintf("fallback: held until %s ends (now %s)", prev, p)
	}
}

// settleSuccessor moves the held fallback channel after e, if any, now that
// e has ended. It is best effort; the expire sweep settles whatever it
// misses.
func (s *Service) settleSuccessor(ctx context.Context, e Entry, w Worker) {
	if !e.State.Terminal() {
		return
	}
	if _, h, ok, err := s.neighbor(ctx, e.Identity, e.Workflow, +1); ok && err == nil && h.State == Held {
		_, _ = s.settleHeld(ctx, h, e.State, w)
	}
}

// settleHeld moves the held row h given the state p of its predecessor:
// expired if its challenge expired, else as heldNext says. It reports the
// new state; Held means nothing was written.
func (s *Service) settleHeld(ctx context.Context, h Entry, p State, w Worker) (State, error) {
	prev, _ := h.Workflow.neighbor(h.Identity.Channel, -1)
	to, reason := heldNext(p, prev)
	if s.expiredAt(h.ExpiresAt, s.now()) {
		to, reason = Expired, "challenge expired while held for the earlier fallback channel"
	}
	if to == Held {
		return Held, nil
	}
	c, err := s.transition(h, to, w, reason, func(n *Entry) { n.Reason = reason })
	if err != nil {
		return Held, err
	}
	if _, err := s.apply(ctx, c, ""); err != nil {
		return Held, err
	}
	return to, nil
}
