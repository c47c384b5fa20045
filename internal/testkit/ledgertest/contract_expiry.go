package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// claimsDueForRedriveThenExpiry: a claim is due (ListOpen, DueTimes) at
// its re-drive time, the earlier of its claim plus Policy.RedriveAfter and
// its expiry, so claims not yet due are never listed; ListExpired and
// Expiries find claims by their expiry, soonest first, across shards,
// whatever their due time, and neither lists rows that closed.
func claimsDueForRedriveThenExpiry(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Cases.Policy.RedriveAfter = 2 * time.Minute
	now := env.Clock.Now()
	sec := func(n int) time.Time { return now.Add(time.Duration(n) * time.Second).UTC().Truncate(ledger.Precision) }
	// Claim i is made at 10i s and expires at 60(i+1) s: it is due for
	// its re-drive at 10i+120 s, or at its expiry if sooner. Due: claim 0
	// at 60 s, 1 at 120 s, 2 at 140 s, 3 at 150 s, ..., 9 at 210 s.
	var keys []string
	for i := range 10 {
		in, sealed := Intent(300+i, ledger.Email, env.Clock.Now(), time.Duration(60*(i+1)-10*i)*time.Second)
		if _, err := env.Cases.Claim(ctx, in, sealed, contractWorker); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key())
		env.Clock.Advance(10 * time.Second)
	}
	wantDue := []time.Time{sec(60), sec(120), sec(140), sec(150)}
	rows, err := env.Store.ListOpen(ctx, ledger.Claimed, sec(155), 0)
	if err != nil {
		t.Fatal(err)
	}
	times, err := env.Store.DueTimes(ctx, ledger.Claimed, sec(155))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(wantDue) || len(times) != len(wantDue) {
		t.Fatalf("due by 155 s: %d rows and %d due times, want %d", len(rows), len(times), len(wantDue))
	}
	for i, want := range wantDue {
		if rows[i].Key != keys[i] || !rows[i].OpenDue().Equal(want) || !times[i].Equal(want) {
			t.Fatalf("due %d: claim %s due %s (index %s), want claim %d due %s", i, rows[i].Key, rows[i].OpenDue(), times[i], i, want)
		}
	}
	// By 270 s every claim is due, and claims 0..3 (60, 120, 180, 240 s)
	// have expired: only those are listed by expiry.
	by := sec(270)
	if all, _ := env.Store.ListOpen(ctx, ledger.Claimed, by, 0); len(all) != 10 {
		t.Fatalf("due by 270 s: %d claims, want 10", len(all))
	}
	expired, err := env.Store.ListExpired(ctx, ledger.Claimed, by, 0)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := env.Store.Expiries(ctx, ledger.Claimed, by)
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 4 || len(exp) != 4 {
		t.Fatalf("expired by 270 s: %d rows, %d expiries, want 4", len(expired), len(exp))
	}
	for i := range 4 {
		if expired[i].Key != keys[i] || !exp[i].Equal(sec(60*(i+1))) {
			t.Fatalf("expired %d: claim %s, expiry %s; want claim %d expiring at %s", i, expired[i].Key, exp[i], i, sec(60*(i+1)))
		}
	}
	if first, _ := env.Store.ListExpired(ctx, ledger.Claimed, by, 2); len(first) != 2 || first[0].Key != keys[0] || first[1].Key != keys[1] {
		t.Fatalf("limit 2: got %d rows", len(first))
	}
	// A claim that moved on (dispatched at 100 s) is listed by neither.
	if _, err := env.Cases.Dispatch(ctx, keys[1], contractWorker); err != nil {
		t.Fatal(err)
	}
	if left, _ := env.Store.ListExpired(ctx, ledger.Claimed, by, 0); len(left) != 3 {
		t.Fatalf("after dispatch: %d expired claims listed, want 3", len(left))
	}
	if left, _ := env.Store.Expiries(ctx, ledger.Claimed, by); len(left) != 3 {
		t.Fatalf("after dispatch: %d expiries, want 3", len(left))
	}
}
