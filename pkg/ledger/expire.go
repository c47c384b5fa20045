package ledger

import (
	"context"
	"fmt"
	"time"
)

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
		_, p, _, err := s.neighbor(ctx, h.Identity, h.Workflow, -1)
		if err != nil {
			s.note(&rep, "", err)
			continue
		}
		to, err := s.settleHeld(ctx, h, p, w)
		if to != Held || err != nil {
			s.note(&rep, "held->"+string(to), err)
		}
	}
	return rep, nil
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
