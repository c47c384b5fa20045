package ledgertest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// beginAt moves the claimed row e to dispatching at the clock's time, as
// dispatch's begin does, with a lease of lease, and returns the stored row.
func (env *Env) beginAt(t *testing.T, e ledger.Entry, lease time.Duration) ledger.Entry {
	t.Helper()
	now := env.Clock.Now()
	next := e
	next.State, next.Version, next.UpdatedAt = ledger.Dispatching, e.Version+1, now
	next.Attempts, next.FirstAttemptAt = 1, now
	next.RedriveAt, next.LeaseUntil = time.Time{}, now.Add(lease)
	ev := ledger.Event{ID: fmt.Sprintf("ev-begin-%s", e.Key[:8]), Kind: ledger.KindTransition, From: ledger.Claimed,
		To: ledger.Dispatching, At: now, Worker: string(contractWorker), Attempt: 1}
	next.History = append(append([]ledger.Event(nil), e.History...), ev)
	got, err := env.Store.Apply(context.Background(), ledger.Change{From: ledger.Claimed, Version: e.Version, Next: next, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// dispatchingFromClaimIsDispatching: a row that moved from claimed to
// dispatching is listed, timed and counted as dispatching at its lease,
// whatever its claim's re-drive time, and never as a claim, whether or not
// its challenge expired meanwhile; the claims beside it are listed as
// before, and reconcile sweeps the row once its lease has passed.
func dispatchingFromClaimIsDispatching(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Cases.Policy.RedriveAfter = 20 * time.Second
	t0 := env.Clock.Now().UTC().Truncate(ledger.Precision)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// a: expires at 2 min, dispatching from 1 s with a lease to 121 s (after its re-drive time, 20 s).
	// b: a claim expiring at 10 min, due for its re-drive at 20 s.
	// c: dispatching from 1 s with a lease to 11 s (before its re-drive time).
	_, _, b := env.claim(t, 601, ledger.Email)
	inA, sealedA := Intent(602, ledger.SMS, t0, 2*time.Minute)
	a, err := env.Cases.Claim(ctx, inA, sealedA, contractWorker)
	if err != nil {
		t.Fatal(err)
	}
	_, _, c := env.claim(t, 603, ledger.SMS)
	env.Clock.Advance(time.Second)
	ra := env.beginAt(t, a.Entry, 2*time.Minute)
	rc := env.beginAt(t, c.Entry, 10*time.Second)
	if !ra.OpenDue().Equal(at(121*time.Second)) || !rc.OpenDue().Equal(at(11*time.Second)) {
		t.Fatalf("leases %s and %s, want 121 s and 11 s", ra.OpenDue(), rc.OpenDue())
	}
	expect := func(when time.Duration, dispatching []string, claimed []string, expired []string) {
		t.Helper()
		by := at(when)
		checkListing(t, env.Store, ledger.Dispatching, by, dispatching)
		checkListing(t, env.Store, ledger.Claimed, by, claimed)
		rows, err := env.Store.ListExpired(ctx, ledger.Claimed, by, 0)
		exp, err2 := env.Store.Expiries(ctx, ledger.Claimed, by)
		if err != nil || err2 != nil || !sameKeys(rows, expired) || len(exp) != len(expired) {
			t.Fatalf("at %s: expired claims %v (%d expiries), want %v (%v %v)", when, keysOf(rows), len(exp), expired, err, err2)
		}
		stats, err := ledger.ReadStats(ctx, env.Store, by)
		if err != nil || stats[ledger.Dispatching].Count != len(dispatching) || stats[ledger.Claimed].Count != len(expired) {
			t.Fatalf("at %s: stats dispatching %d claimed %d, want %d and %d (%v)", when,
				stats[ledger.Dispatching].Count, stats[ledger.Claimed].Count, len(dispatching), len(expired), err)
		}
	}
	expect(5*time.Second, nil, nil, nil)
	expect(15*time.Second, []string{rc.Key}, nil, nil)
	expect(30*time.Second, []string{rc.Key}, []string{b.Entry.Key}, nil)
	// At 3 min a's lease has passed and its challenge has expired: still dispatching, not a claim.
	expect(3*time.Minute, []string{rc.Key, ra.Key}, []string{b.Entry.Key}, nil)
	checkListing(t, env.Store, ledger.Dispatching, time.Time{}, []string{rc.Key, ra.Key})

	env.Clock.Advance(3*time.Minute - time.Second)
	if rep, err := env.Cases.Reconcile(ctx, contractWorker, 10); err != nil || rep.Err() != nil {
		t.Fatal(err, rep.Err())
	}
	checkListing(t, env.Store, ledger.Dispatching, time.Time{}, nil)
	for _, key := range []string{rc.Key, ra.Key} {
		if e, err := env.Store.Get(ctx, key); err != nil || e.State == ledger.Dispatching || e.State == ledger.Claimed {
			t.Fatalf("after reconcile: %s is %s (%v), want it swept", key, e.State, err)
		}
	}
	checkListing(t, env.Store, ledger.Claimed, time.Time{}, []string{b.Entry.Key})
}

// checkListing fails the test unless ListOpen and DueTimes of state due by
// by give exactly the rows want, soonest due first, each at its OpenDue.
func checkListing(t *testing.T, store ledger.Store, state ledger.State, by time.Time, want []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := store.ListOpen(ctx, state, by, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := keysOf(rows); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("%s due by %s: listed %v, want %v", state, by, got, want)
	}
	for _, r := range rows {
		if r.State != state {
			t.Fatalf("%s due by %s: listed a row in %s", state, by, r.State)
		}
	}
	if by.IsZero() {
		return
	}
	times, err := store.DueTimes(ctx, state, by)
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != len(rows) {
		t.Fatalf("%s due by %s: %d due times for %d rows", state, by, len(times), len(rows))
	}
	for i, r := range rows {
		if !times[i].Equal(r.OpenDue()) {
			t.Fatalf("%s due by %s: due time %d is %s, its row's %s", state, by, i, times[i], r.OpenDue())
		}
	}
}

func keysOf(rows []ledger.Entry) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Key)
	}
	return out
}

// sameKeys reports whether rows are the rows of want, in any order.
func sameKeys(rows []ledger.Entry, want []string) bool {
	got := slices.Sorted(slices.Values(keysOf(rows)))
	return slices.Equal(got, slices.Sorted(slices.Values(want))) || (len(got) == 0 && len(want) == 0)
}
