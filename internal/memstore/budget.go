package memstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Budget is an in-memory ledger.Budget for tests: the same booking rule as
// the DynamoDB budget (see dynamostore.Budget), under a mutex.
type Budget struct {
	// Rates is sends per second per channel; a channel without one has no
	// budget.
	Rates map[ledger.Channel]float64
	mu    sync.Mutex
	tat   map[ledger.Channel]time.Time
}

var _ ledger.Budget = (*Budget)(nil)

// Reserve implements ledger.Budget.
func (b *Budget) Reserve(_ context.Context, ch ledger.Channel, now, notAfter time.Time) (time.Time, error) {
	rate, ok := b.Rates[ch]
	if !ok || rate <= 0 {
		return now, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tat == nil {
		b.tat = map[ledger.Channel]time.Time{}
	}
	at := b.tat[ch]
	if at.Before(now) {
		at = now
	}
	if at.After(notAfter) {
		return time.Time{}, fmt.Errorf("%s budget: next send at %s: %w", ch, at.UTC().Format(time.RFC3339Nano), ledger.ErrNoBudget)
	}
	b.tat[ch] = at.Add(ledger.Interval(rate))
	return at, nil
}
