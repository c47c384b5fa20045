package sim

import (
	"context"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Expiries and ListExpired are store calls like ListOpen: each is one step
// that may fail.
func (p *storePort) Expiries(ctx context.Context, st ledger.State, by time.Time) ([]time.Time, error) {
	r := p.inv.yield(&call{op: opListOpen, detail: st.String() + " expiries"})
	if r.fault == failCall {
		return nil, injected("expiries", st.String())
	}
	return p.inv.sim.store.Expiries(ctx, st, by)
}

// ListExpired returns the rows in the in-memory store's order: soonest
// expiring first, then by key.
func (p *storePort) ListExpired(ctx context.Context, st ledger.State, by time.Time, limit int) ([]ledger.Entry, error) {
	r := p.inv.yield(&call{op: opListOpen, detail: st.String() + " expired"})
	if r.fault == failCall {
		return nil, injected("list expired", st.String())
	}
	rows, err := p.inv.sim.store.ListExpired(ctx, st, by, limit)
	for i := range rows {
		rows[i] = p.inv.sim.read(p.inv, rows[i], "store.ListExpired")
	}
	return rows, err
}
