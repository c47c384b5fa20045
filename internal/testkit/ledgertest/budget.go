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

// budgetT0 is the first booking time of the budget contract; budgetFar is a
// deadline no property reaches.
var (
	budgetT0  = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	budgetFar = budgetT0.Add(time.Hour)
)

// budgetContract is the booking rule every ledger.Budget follows: one
// function per property, each run by RunBudgetContract as a subtest of that
// name.
var budgetContract = []property[NewBudget]{
	{"spaces bookings at the rate", budgetSpacesAtRate},
	{"an idle budget books now, never the past", budgetIdleBooksNow},
	{"a full budget books nothing before the deadline", budgetFullBooksNothing},
	{"channels are independent and unpaced channels get now", budgetChannelsIndependent},
	{"concurrent bookings get distinct spaced slots", budgetConcurrentSlotsDistinct},
}

// RunBudgetContract checks the booking rule every ledger.Budget follows:
// sends on a channel are spaced 1/rate apart from whichever instance books
// them, a booking is never before its now nor after its deadline, a full
// budget books nothing, channels are independent, and a channel without a
// rate is not paced.
func RunBudgetContract(t *testing.T, newBudget NewBudget) {
	runProperties(t, budgetContract, newBudget)
}

// budgetSpacesAtRate: bookings on one channel are 1/rate apart.
func budgetSpacesAtRate(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
	b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 4})
	for i := range 5 {
		at, err := b.Reserve(ctx, ledger.Email, budgetT0, budgetFar)
		if err != nil {
			t.Fatal(err)
		}
		if want := budgetT0.Add(time.Duration(i) * 250 * time.Millisecond); !at.Equal(want) {
			t.Fatalf("booking %d at %s, want %s", i, at, want)
		}
	}
}

// budgetIdleBooksNow: an idle budget books now, never a time in the past.
func budgetIdleBooksNow(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
	b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 1})
	if _, err := b.Reserve(ctx, ledger.Email, budgetT0, budgetFar); err != nil {
		t.Fatal(err)
	}
	later := budgetT0.Add(10 * time.Second)
	at, err := b.Reserve(ctx, ledger.Email, later, budgetFar)
	if err != nil || !at.Equal(later) {
		t.Fatalf("after idle: %s, %v; want %s", at, err, later)
	}
}

// budgetFullBooksNothing: a budget full up to the deadline books nothing
// (ErrNoBudget), and the refusal takes no slot.
func budgetFullBooksNothing(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
	b := newBudget(t, map[ledger.Channel]float64{ledger.SMS: 1})
	deadline := budgetT0.Add(2 * time.Second)
	for i := range 3 {
		if _, err := b.Reserve(ctx, ledger.SMS, budgetT0, deadline); err != nil {
			t.Fatalf("booking %d: %v", i, err)
		}
	}
	if at, err := b.Reserve(ctx, ledger.SMS, budgetT0, deadline); !errors.Is(err, ledger.ErrNoBudget) {
		t.Fatalf("fourth booking in 2s at 1/s: %s, %v; want ErrNoBudget", at, err)
	}
	// The refusal booked nothing: a later deadline gets the next slot.
	at, err := b.Reserve(ctx, ledger.SMS, budgetT0, budgetFar)
	if err != nil || !at.Equal(budgetT0.Add(3*time.Second)) {
		t.Fatalf("after a refusal: %s, %v; want %s", at, err, budgetT0.Add(3*time.Second))
	}
}

// budgetChannelsIndependent: channels do not share a budget, and a channel
// without a rate gets now.
func budgetChannelsIndependent(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
	b := newBudget(t, map[ledger.Channel]float64{ledger.Email: 1})
	for range 3 {
		if _, err := b.Reserve(ctx, ledger.Email, budgetT0, budgetFar); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		at, err := b.Reserve(ctx, ledger.SMS, budgetT0, budgetFar)
		if err != nil || !at.Equal(budgetT0) {
			t.Fatalf("unpaced channel: %s, %v; want now", at, err)
		}
	}
}

// budgetConcurrentSlotsDistinct: concurrent bookings get distinct,
// contiguous slots.
func budgetConcurrentSlotsDistinct(t *testing.T, newBudget NewBudget) {
	ctx := context.Background()
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
				at, err := b.Reserve(ctx, ledger.Email, budgetT0, budgetFar)
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
		if !seen[budgetT0.Add(time.Duration(i)*10*time.Millisecond)] {
			t.Fatalf("slot %d (%s) not booked: bookings are not contiguous", i, budgetT0.Add(time.Duration(i)*10*time.Millisecond))
		}
	}
}
