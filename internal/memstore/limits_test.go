package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestLimitsContract(t *testing.T) {
	ledgertest.RunLimitsContract(t, func(*testing.T) ledgertest.Limits { return &memstore.Limits{} })
}

// Counter reads what a counter holds: a message counted once however often
// it is admitted, in its window's item and the next one's, a full counter
// unchanged by the message it stops.
func TestLimitsCounter(t *testing.T) {
	ctx, l := context.Background(), &memstore.Limits{}
	now := ledgertest.Epoch
	c := ledger.Count{Rule: ledger.RuleDestination, Key: "email#fp", Cap: ledger.Cap{Max: 1, Window: time.Minute}}
	id := ledger.CounterID(c, now)
	if n := l.Counter(id); n != 0 {
		t.Fatalf("a new counter holds %d", n)
	}
	for range 2 {
		if a, err := l.Admit(ctx, "key-1", []ledger.Count{c}, now, now.Add(time.Hour)); err != nil || a.Limited != -1 {
			t.Fatalf("admit: %+v %v", a, err)
		}
	}
	if a, err := l.Admit(ctx, "key-2", []ledger.Count{c}, now, now.Add(time.Hour)); err != nil || a.Limited != 0 {
		t.Fatalf("admit over the cap: %+v %v", a, err)
	}
	if n := l.Counter(id); n != 1 {
		t.Fatalf("the counter holds %d, want 1", n)
	}
	if n := l.Counter(ledger.CounterID(c, now.Add(time.Minute))); n != 1 {
		t.Fatalf("the next window's item holds %d, want 1: it counts this window too", n)
	}
	if n := l.Counter(ledger.CounterID(c, now.Add(2*time.Minute))); n != 0 {
		t.Fatalf("the item of the window after next holds %d", n)
	}
}
