package ledger

import (
	"context"
	"time"
)

// ExpireSweep marks still-claimed entries whose challenge expired (for example
// a stream record that never reached dispatch), and deferred entries whose
// challenge ran out before their next attempt, as expired, and purges their
// sealed content. It also settles held fallback entries: claimed or suppressed
// once their earlier channel ended, expired with their challenge.
func (s *Expirer) ExpireSweep(ctx context.Context, w Worker, limit int) (SweepReport, error) {
	var rep SweepReport
	now := s.core.Now()
	// By expiry, not by OpenDue: a claim is due for its re-drive earlier,
	// and a surge's claims waiting in the stream would crowd the expired
	// ones out of the limit.
	listExpired := func() ([]Entry, error) {
		return s.core.Store().ListExpired(ctx, Claimed, now.Add(s.core.Policy().ExpiryMargin), limit)
	}
	err := s.core.SweepRows(&rep, "expire", Claimed, listExpired, func(e Entry) (string, error) {
		if !s.core.ExpiredAt(e.ExpiresAt, now) {
			return "", nil
		}
		_, err := s.core.Expire(ctx, e, w, "challenge expired while claimed; never dispatched", OutcomeExpired)
		return "claimed->expired", err
	})
	if err != nil {
		return rep, err
	}
	// Deferred entries whose challenge ran out while they waited (a lost
	// wake-up and a missed re-drive): they were never sent.
	err = s.core.SweepOpen(ctx, &rep, "expire", Deferred, now, limit, func(e Entry) (string, error) {
		if !s.core.ExpiredAt(e.ExpiresAt, now) {
			return "", nil
		}
		_, err := s.core.Expire(ctx, e, w, expiryReason(e), OutcomeExpired)
		return "deferred->expired", err
	})
	if err != nil {
		return rep, err
	}
	// Held fallback channels: settle those whose earlier channel ended (a
	// missed settleSuccessor) and expire those whose challenge did. All of
	// them are listed, not the first limit: entries still waiting would
	// otherwise hide a straggler behind them on every tick.
	err = s.core.SweepOpen(ctx, &rep, "expire", Held, time.Time{}, 0, func(h Entry) (string, error) {
		_, p, _, err := s.core.Neighbor(ctx, h.Identity, h.Workflow, -1)
		if err != nil {
			return "", err
		}
		to, err := s.core.SettleHeld(ctx, h, p, w)
		if to == Held && err == nil {
			return "", nil
		}
		return "held->" + string(to), err
	})
	return rep, err
}

func (s *Core) Expire(ctx context.Context, e Entry, w Worker, reason string, out Outcome) (DispatchResult, error) {
	c, err := s.Transition(e, Expired, w, reason, func(n *Entry) {
		n.LeaseUntil, n.NextCheckAt, n.NextAttemptAt, n.SlotAt = timeZero, timeZero, timeZero, timeZero
		n.Reason = reason
	})
	if err != nil {
		return DispatchResult{}, err
	}
	return s.Apply(ctx, c, out)
}
