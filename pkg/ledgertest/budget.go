package ledgertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// NewBudget builds a budget under test with the given rates (sends per
// second per channel), empty for every call.
type NewBudget func(t *testing.T, rates map[ledger.Channel]float64) ledger.Budget

// RunBudgetContract checks the booking rule every ledger.Budget follows:
// sends on a channel are spaced 1/rate apart from whichever instance books
// them, a booking is never before its now nor after its deadline, a full
// budget books nothing, channels are independent, and a channel without a
// rate is not paced.
func RunBudgetContract(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	far := t0.Add(time.Hour)

	t.Run("spaces bookings at the rate", func(t *testing.T) {
		b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 4})
		for i := range 5 {
			at, err := b.Reserve(ctx, ledger.Email, t0, far)
			if err != nil {
				t.Fatal(err)
			}
			if want := t0.Add(time.Duration(i) * 250 * time.Millisecond); !at.Equal(want) {
				t.Fatalf("booking %d at %s, want %s", i, at, want)
			}
		}
	})
	t.Run("an idle budget books now, never the past", func(t *testing.T) {
		b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 1})
		if _, err := b.Reserve(ctx, ledger.Email, t0, far); err != nil {
			t.Fatal(err)
		}
		later := t0.Add(10 * time.Second)
		at, err := b.Reserve(ctx, ledger.Email, later, far)
		if err != nil || !at.Equal(later) {
			t.Fatalf("after idle: %s, %v; want %s", at, err, later)
		}
	})
	t.Run("a full budget books nothing before the deadline", func(t *testing.T) {
		b := newBudget(t, map[ledger.Channel]float64{ledger.SMS: 1})
		deadline := t0.Add(2 * time.Second)
		for i := range 3 {
			if _, err := b.Reserve(ctx, ledger.SMS, t0, deadline); err != nil {
				t.Fatalf("booking %d: %v", i, err)
			}
		}
		if at, err := b.Reserve(ctx, ledger.SMS, t0, deadline); !errors.Is(err, ledger.ErrNoBudget) {
			t.Fatalf("fourth booking in 2s at 1/s: %s, %v; want ErrNoBudget", at, err)
		}
		// The refusal booked nothing: a later deadline gets the next slot.
		at, err := b.Reserve(ctx, ledger.SMS, t0, far)
		if err != nil || !at.Equal(t0.Add(3*time.Second)) {
			t.Fatalf("after a refusal: %s, %v; want %s", at, err, t0.Add(3*time.Second))
		}
	})
	t.Run("channels are independent and unpaced channels get now", func(t *testing.T) {
		b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 1})
		for range 3 {
			if _, err := b.Reserve(ctx, ledger.Email, t0, far); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			at, err := b.Reserve(ctx, ledger.SMS, t0, far)
			if err != nil || !at.Equal(t0) {
				t.Fatalf("unpaced channel: %s, %v; want now", at, err)
			}
		}
	})
	t.Run("concurrent bookings get distinct spaced slots", func(t *testing.T) {
		b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 100})
		const n = 40
		var mu sync.Mutex
		seen := map[time.Time]bool{}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n / 8 {
					at, err := b.Reserve(ctx, ledger.Email, t0, far)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seen[at] = true
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("%d distinct slots for %d bookings", len(seen), n)
		}
		for i := range n {
			if !seen[t0.Add(time.Duration(i)*10*time.Millisecond)] {
				t.Fatalf("slot %d (%s) not booked: bookings are not contiguous", i, t0.Add(time.Duration(i)*10*time.Millisecond))
			}
		}
	})
}
