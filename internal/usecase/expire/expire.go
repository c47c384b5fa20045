// Package expire ends held and claimed entries whose challenge expired
// (functions/expire).
package expire

import (
	"context"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// ExpireSweep marks still-claimed entries whose challenge expired (for example
// a stream record that never reached dispatch), and deferred entries whose
// challenge ran out before their next attempt, as expired, and purges their
// sealed content. It also settles held fallback entries: claimed or suppressed
// once their earlier channel ended, expired with their challenge.
func (x *Expirer) ExpireSweep(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error) {
	var rep ledger.SweepReport
	now := x.core.Now()
	// By expiry, not by OpenDue: a claim is due for its re-drive earlier,
	// and a surge's claims waiting in the stream would crowd the expired
	// ones out of the limit.
	listExpired := func() ([]ledger.Entry, error) {
		return x.core.Store().ListExpired(ctx, ledger.Claimed, now.Add(x.core.Policy().ExpiryMargin), limit)
	}
	err := rep.Rows("expire", ledger.Claimed, listExpired, func(e ledger.Entry) (string, error) {
		if !x.core.ExpiredAt(e.ExpiresAt, now) {
			return "", nil
		}
		_, err := x.core.Expire(ctx, e, w, "challenge expired while claimed; never dispatched", ledger.OutcomeExpired)
		return "claimed->expired", err
	})
	if err != nil {
		return rep, err
	}
	// Deferred entries whose challenge ran out while they waited (a lost
	// wake-up and a missed re-drive): they were never sent.
	err = rep.Open(ctx, x.core.Store(), "expire", ledger.Deferred, now, limit, func(e ledger.Entry) (string, error) {
		if !x.core.ExpiredAt(e.ExpiresAt, now) {
			return "", nil
		}
		_, err := x.core.Expire(ctx, e, w, ledger.ExpiryReason(e), ledger.OutcomeExpired)
		return "deferred->expired", err
	})
	if err != nil {
		return rep, err
	}
	// Held fallback channels: settle those whose earlier channel ended (a
	// missed settleSuccessor) and expire those whose challenge did. All of
	// them are listed, not the first limit: entries still waiting would
	// otherwise hide a straggler behind them on every tick.
	err = rep.Open(ctx, x.core.Store(), "expire", ledger.Held, time.Time{}, 0, func(h ledger.Entry) (string, error) {
		_, p, _, err := x.core.Neighbor(ctx, h.Identity, h.Workflow, -1)
		if err != nil {
			return "", err
		}
		to, err := x.core.SettleHeld(ctx, h, p, w)
		if to == ledger.Held && err == nil {
			return "", nil
		}
		return "held->" + string(to), err
	})
	return rep, err
}

// Expirer ends held and claimed entries whose challenge expired
// (functions/expire).
type Expirer struct{ core ledger.Core }

// New builds the expire use case. It needs the ledger's tables alone.
func New(core ledger.Core) *Expirer { return &Expirer{core: core} }
