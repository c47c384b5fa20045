package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// claimRoundTrips: a claimed row reads back with every field as written.
func claimRoundTrips(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	in, sealed := Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	in.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	in.SubjectRef = "tenant-7:acct_000001.eu"
	res, err := env.Cases.Claim(ctx, in, sealed, contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeClaimed {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}
	got, err := env.Store.Get(ctx, in.Key())
	if err != nil {
		t.Fatal(err)
	}
	assertSameEntry(t, res.Entry, got)
	if got.SubjectRef != in.SubjectRef {
		t.Fatalf("subject_ref %q, want %q", got.SubjectRef, in.SubjectRef)
	}
	if got.State != ledger.Claimed || got.Version != 1 || len(got.History) != 1 {
		t.Fatalf("state %s version %d history %d", got.State, got.Version, len(got.History))
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
}

// getMissingIsNotFound: Get of a key never written is ErrNotFound.
func getMissingIsNotFound(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	_, err := newStore(t).Get(ctx, "0000")
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("got %v", err)
	}
}

// createExistingIsConflict: Create of an existing key is ErrConflict and
// returns the stored row, not the one offered.
func createExistingIsConflict(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	in, _, first := env.claim(t, 2, ledger.SMS)
	again := first.Entry
	again.ContentHash = "different"
	again.History = []ledger.Event{{ID: "another-claim", Kind: ledger.KindTransition, To: ledger.Claimed, At: env.Clock.Now()}}
	got, err := env.Store.Create(ctx, again)
	if !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("want conflict, got %v", err)
	}
	if got.ContentHash != in.ContentHash || got.Version != first.Entry.Version {
		t.Fatalf("conflict did not return the stored row: %+v", got)
	}
}

// applyIsCompareAndSet: Apply is compare-and-set on state, version and
// expiry; only the change that matches all three is written.
func applyIsCompareAndSet(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	in, _, res := env.claim(t, 3, ledger.Email)
	e := res.Entry
	mk := func(from ledger.State, version int64, notExpiredBy time.Time) ledger.Change {
		next := e
		next.State = ledger.Dispatching
		next.Version = e.Version + 1
		next.RedriveAt, next.LeaseUntil = time.Time{}, env.Clock.Now().Add(time.Minute)
		ev := ledger.Event{ID: fmt.Sprint("ev-", version), Kind: ledger.KindTransition, From: e.State, To: ledger.Dispatching, At: env.Clock.Now()}
		next.History = append(append([]ledger.Event(nil), e.History...), ev)
		return ledger.Change{From: from, Version: version, NotExpiredBy: notExpiredBy, Next: next, Event: ev}
	}
	for name, c := range map[string]ledger.Change{
		"wrong state":   mk(ledger.Unknown, e.Version, time.Time{}),
		"wrong version": mk(ledger.Claimed, e.Version+7, time.Time{}),
		"expired":       mk(ledger.Claimed, e.Version, in.ExpiresAt),
	} {
		cur, err := env.Store.Apply(ctx, c)
		if !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("%s: want conflict, got %v", name, err)
		}
		// The conflict answers with the row as stored, so the caller can
		// decide afresh without reading it again.
		if cur.Key != e.Key || cur.State != e.State || cur.Version != e.Version || len(cur.History) != len(e.History) {
			t.Fatalf("%s: the conflict returned %q %s v%d, want the stored row %s v%d", name, cur.Key, cur.State, cur.Version, e.State, e.Version)
		}
	}
	got, err := env.Store.Apply(ctx, mk(ledger.Claimed, e.Version, in.ExpiresAt.Add(-time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != ledger.Dispatching || got.Version != e.Version+1 || len(got.History) != 2 {
		t.Fatalf("after apply: %s v%d h%d", got.State, got.Version, len(got.History))
	}
	stored, _ := env.Store.Get(ctx, e.Key)
	assertSameEntry(t, got, stored)
}

// notSentDefers: a not-sent answer defers the row, the deferral round-trips,
// the index lists the row only once it is due, and the retry sends once.
func notSentDefers(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Transport.Script = func(s ledger.Send) Behavior {
		if s.Attempt == 1 {
			return Throttle
		}
		return Accept
	}
	env.Transport.RetryAfter = 7 * time.Second
	in, _, _ := env.claim(t, 13, ledger.Email)
	res, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeDeferred {
		t.Fatalf("dispatch: %s, %v; want deferred", res.Outcome, err)
	}
	stored, err := env.Store.Get(ctx, in.Key())
	if err != nil {
		t.Fatal(err)
	}
	assertSameEntry(t, res.Entry, stored)
	if err := stored.Verify(); err != nil {
		t.Fatal(err)
	}
	ev := stored.Last()
	if stored.State != ledger.Deferred || stored.NotSentCode != ThrottleCode || ev.Code != ThrottleCode ||
		!ev.NextAttemptAt.Equal(stored.NextAttemptAt) || stored.NextAttemptAt.Before(env.Clock.Now().Add(7*time.Second)) {
		t.Fatalf("deferral not recorded: state %s code %q event %+v next %s", stored.State, stored.NotSentCode, ev, stored.NextAttemptAt)
	}
	due, err := env.Store.ListOpen(ctx, ledger.Deferred, stored.NextAttemptAt, 10)
	if err != nil || len(due) != 1 || due[0].Key != in.Key() {
		t.Fatalf("deferred row not listed when due: %v, %v", due, err)
	}
	if early, _ := env.Store.ListOpen(ctx, ledger.Deferred, env.Clock.Now(), 10); len(early) != 0 {
		t.Fatalf("deferred row listed before it is due")
	}
	env.Clock.Advance(stored.NextAttemptAt.Sub(env.Clock.Now()))
	res, err = env.Cases.Dispatch(ctx, in.Key(), contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.Entry.Attempts != 2 {
		t.Fatalf("retry: %s attempt %d, %v; want accepted at attempt 2", res.Outcome, res.Entry.Attempts, err)
	}
	if got := env.Transport.Recorded(in.Key()); got != 1 {
		t.Fatalf("provider recorded %d messages", got)
	}
}

// repeatedWriteLandsOnce: a Create or Apply repeated after its first attempt
// landed (an SDK retry after a lost response) succeeds once; another
// change on the stale version still conflicts.
func repeatedWriteLandsOnce(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	// What an SDK retry after a lost response looks like to the store.
	env := NewEnv(newStore(t))
	_, _, res := env.claim(t, 5, ledger.Email)
	if _, err := env.Store.Create(ctx, res.Entry); err != nil {
		t.Fatalf("repeated create: %v", err)
	}
	e := res.Entry
	ev := ledger.Event{ID: "ev-repeat", Kind: ledger.KindTransition, From: ledger.Claimed, To: ledger.Expired, At: env.Clock.Now()}
	next := e
	next.State, next.Version = ledger.Expired, e.Version+1
	next.History = append(append([]ledger.Event(nil), e.History...), ev)
	c := ledger.Change{From: ledger.Claimed, Version: e.Version, Next: next, Event: ev}
	if _, err := env.Store.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := env.Store.Apply(ctx, c)
	if err != nil || got.State != ledger.Expired || len(got.History) != 2 {
		t.Fatalf("repeated apply: %v, state %s, history %d", err, got.State, len(got.History))
	}
	other := c
	other.Event.ID = "ev-other"
	if _, err := env.Store.Apply(ctx, other); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("a different change on the stale version must conflict: %v", err)
	}
}

// historyIsAppendOnly: the stored history is append-only even if the caller
// drops entries from the one it passes.
func historyIsAppendOnly(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	_, _, res := env.claim(t, 4, ledger.Email)
	e := res.Entry
	ev := ledger.Event{ID: "ev-x", Kind: ledger.KindTransition, From: ledger.Claimed, To: ledger.Expired, At: env.Clock.Now()}
	next := e
	next.State, next.Version, next.History = ledger.Expired, e.Version+1, []ledger.Event{ev}
	got, err := env.Store.Apply(ctx, ledger.Change{From: ledger.Claimed, Version: e.Version, Next: next, Event: ev})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.History) != 2 || got.History[0].ID != e.History[0].ID || got.History[1].ID != "ev-x" {
		t.Fatalf("history rewritten: %+v", got.History)
	}
}

// openIndexListsDueOpenRows: ListOpen returns only due rows of the asked
// state, oldest due first, up to the limit, and drops rows that closed.
func openIndexListsDueOpenRows(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Cases.Policy.RedriveAfter = time.Hour // claims due at their expiry
	now := env.Clock.Now()
	var keys []string
	for i, ttl := range []time.Duration{30 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
		in, sealed := Intent(100+i, ledger.Email, now, ttl)
		if _, err := env.Cases.Claim(ctx, in, sealed, contractWorker); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key())
	}
	all, err := env.Store.ListOpen(ctx, ledger.Claimed, time.Time{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all[0].Key != keys[1] || all[1].Key != keys[2] || all[2].Key != keys[0] {
		t.Fatalf("want 3 rows oldest due first, got %d", len(all))
	}
	due, _ := env.Store.ListOpen(ctx, ledger.Claimed, now.Add(25*time.Minute), 10)
	if len(due) != 2 {
		t.Fatalf("want 2 due rows, got %d", len(due))
	}
	limited, _ := env.Store.ListOpen(ctx, ledger.Claimed, time.Time{}, 1)
	if len(limited) != 1 || limited[0].Key != keys[1] {
		t.Fatalf("limit: got %d", len(limited))
	}
	if _, err := env.Cases.Dispatch(ctx, keys[1], contractWorker); err != nil {
		t.Fatal(err)
	}
	left, _ := env.Store.ListOpen(ctx, ledger.Claimed, time.Time{}, 10)
	if len(left) != 2 {
		t.Fatalf("accepted row still listed as claimed: %d", len(left))
	}
	for _, st := range []ledger.State{ledger.Dispatching, ledger.Unknown, ledger.Quarantined} {
		if rows, _ := env.Store.ListOpen(ctx, st, time.Time{}, 10); len(rows) != 0 {
			t.Fatalf("%s: %d rows", st, len(rows))
		}
	}
}

// dueTimesFromTheIndex: DueTimes gives the OpenDue of exactly the rows
// ListOpen lists as due, soonest first, across shards, and nothing for rows
// not yet due or closed.
func dueTimesFromTheIndex(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Cases.Policy.RedriveAfter = time.Hour // claims due at their expiry
	now := env.Clock.Now()
	var keys []string
	for i := range 12 {
		in, sealed := Intent(200+i, ledger.Email, now, time.Duration(10+i)*time.Minute)
		if _, err := env.Cases.Claim(ctx, in, sealed, contractWorker); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key())
	}
	if _, err := env.Cases.Dispatch(ctx, keys[0], contractWorker); err != nil { // closed: not claimed any more
		t.Fatal(err)
	}
	dueBy := now.Add(15*time.Minute + 30*time.Second)
	got, err := env.Store.DueTimes(ctx, ledger.Claimed, dueBy)
	if err != nil {
		t.Fatal(err)
	}
	var want []time.Time
	for i := 1; i <= 5; i++ { // expiring at 11..15 minutes
		want = append(want, now.Add(time.Duration(10+i)*time.Minute).UTC().Truncate(ledger.Precision))
	}
	if len(got) != len(want) {
		t.Fatalf("due times %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].Equal(want[i]) {
			t.Fatalf("due time %d = %s, want %s (all: %v)", i, got[i], want[i], got)
		}
	}
	if none, err := env.Store.DueTimes(ctx, ledger.Unknown, dueBy); err != nil || len(none) != 0 {
		t.Fatalf("unknown due times %v %v, want none", none, err)
	}
}

// concurrentClaimsMakeOneRowEach: 32 goroutines claiming the same 200
// identities create exactly one row each, and every loser sees that row.
func concurrentClaimsMakeOneRowEach(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	now := env.Clock.Now()
	const ids, workers = 200, 32
	var mu sync.Mutex
	created := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, ids*workers)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for j := 0; j < ids; j++ {
				i := (j + g*7) % ids
				in, sealed := Intent(1000+i, ledger.Email, now, 10*time.Minute)
				res, err := env.Cases.Claim(ctx, in, sealed, ledger.Worker(fmt.Sprint("claim/", g)))
				if err != nil {
					errs <- err
					continue
				}
				if res.Entry.Key != in.Key() || res.Entry.ContentHash != in.ContentHash || res.Entry.State != ledger.Claimed {
					errs <- fmt.Errorf("loser saw a different row for %s", in.Key())
				}
				if res.Outcome == ledger.OutcomeClaimed {
					mu.Lock()
					created[in.Key()]++
					mu.Unlock()
				} else if res.Outcome != ledger.OutcomeDuplicate {
					errs <- fmt.Errorf("unexpected outcome %s", res.Outcome)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(created) != ids {
		t.Fatalf("%d identities created, want %d", len(created), ids)
	}
	for k, n := range created {
		if n != 1 {
			t.Fatalf("%s created %d times", k, n)
		}
	}
	rows, err := env.Store.ListOpen(ctx, ledger.Claimed, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != ids {
		t.Fatalf("store holds %d claimed rows, want %d", len(rows), ids)
	}
}

// racingDispatchSendsOnce: two workers racing one row from claimed to
// dispatching make exactly one send.
func racingDispatchSendsOnce(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	for i := 0; i < 20; i++ {
		in, _, _ := env.claim(t, 2000+i, ledger.Email)
		var wg sync.WaitGroup
		results := make([]ledger.Outcome, 2)
		for k := range results {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				r, err := env.Cases.Dispatch(ctx, in.Key(), ledger.Worker(fmt.Sprint("dispatch/", k)))
				if err != nil {
					t.Error(err)
				}
				results[k] = r.Outcome
			}(k)
		}
		wg.Wait()
		wins := 0
		for _, o := range results {
			if o == ledger.OutcomeAccepted {
				wins++
			}
		}
		if wins != 1 || env.Transport.Recorded(in.Key()) != 1 {
			t.Fatalf("identity %d: %d winners, %d recorded sends (%v)", i, wins, env.Transport.Recorded(in.Key()), results)
		}
	}
}

// expiredClaimIsNotSent: once the clock is past the expiry (less the margin)
// of a claimed row, dispatch sends nothing, records expired with a reason
// and purges the content.
func expiredClaimIsNotSent(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	in, _, _ := env.claim(t, 3000, ledger.SMS)
	env.Clock.Advance(10*time.Minute - env.Cases.Policy.ExpiryMargin)
	res, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeExpired {
		t.Fatalf("dispatch: %v %v", res.Outcome, err)
	}
	got, _ := env.Store.Get(ctx, in.Key())
	if got.State != ledger.Expired || got.Reason == "" || got.Last().Reason == "" {
		t.Fatalf("row %s reason %q", got.State, got.Reason)
	}
	if env.Transport.Calls() != 0 || env.Content.Len() != 0 {
		t.Fatalf("sent %d, content left %d", env.Transport.Calls(), env.Content.Len())
	}
}

// changedContentIsBlocked: the same identity with a changed content hash is
// blocked (no overwrite, no second send) and recorded as a mismatch event.
func changedContentIsBlocked(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	in, _, _ := env.claim(t, 4000, ledger.Email)
	changed := in
	changed.TemplateVersion = "4"
	m := Message(4000, ledger.Email)
	m.Body += " (new wording)"
	changed.ContentHash = ledger.ContentHash(changed.TemplateID, changed.TemplateVersion, m)
	res, err := env.Cases.Claim(ctx, changed, Seal(m), contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeMismatch {
		t.Fatalf("claim: %v %v", res.Outcome, err)
	}
	got, _ := env.Store.Get(ctx, in.Key())
	if got.ContentHash != in.ContentHash || got.TemplateVersion != "3" || got.State != ledger.Claimed || got.Mismatches != 1 {
		t.Fatalf("row changed: hash %s tv %s state %s mismatches %d", got.ContentHash, got.TemplateVersion, got.State, got.Mismatches)
	}
	last := got.Last()
	if last.Kind != ledger.KindContentMismatch || last.ContentHash != changed.ContentHash {
		t.Fatalf("mismatch event not recorded: %+v", last)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker); err != nil {
		t.Fatal(err)
	}
	if s := env.Transport.Sent; len(s) != 1 || s[0].ContentHash != in.ContentHash {
		t.Fatalf("sent %d messages, want the original content once", len(s))
	}
}

// unknownStaysUnknown: an unknown outcome stays unknown through redelivery,
// a duplicate dispatch, the expire sweep and a decision without evidence.
func unknownStaysUnknown(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Transport.Script = func(ledger.Send) Behavior { return AcceptThenDrop }
	in, sealed, _ := env.claim(t, 5000, ledger.Email)
	res, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeUnknown {
		t.Fatalf("dispatch: %v %v", res.Outcome, err)
	}
	// Redelivery, a duplicate stream record, the expire sweep and an
	// operator decision without evidence all leave it unknown.
	if r, err := env.Cases.Claim(ctx, in, sealed, contractWorker); err != nil || r.Outcome != ledger.OutcomeDuplicate {
		t.Fatalf("redelivery: %v %v", r.Outcome, err)
	}
	if r, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker); err != nil || r.Outcome != ledger.OutcomeSkipped {
		t.Fatalf("second dispatch: %v %v", r.Outcome, err)
	}
	env.Clock.Advance(time.Hour)
	if _, err := env.Cases.ExpireSweep(ctx, contractWorker, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Cases.Resolve(ctx, in.Key(), ledger.DecideAccepted, "looks fine", "", "operator:test"); !errors.Is(err, ledger.ErrNoEvidence) {
		t.Fatalf("resolve without evidence: %v", err)
	}
	got, _ := env.Store.Get(ctx, in.Key())
	if got.State != ledger.Unknown {
		t.Fatalf("unknown became %s", got.State)
	}
	if env.Transport.Recorded(in.Key()) != 1 {
		t.Fatalf("recorded %d", env.Transport.Recorded(in.Key()))
	}
}

// providerEventsRoundTrip: provider-event entries keep every field they
// carry (type, detail, provider time, permanence, message id) through the
// store, the chain verifies after them, and a duplicate writes nothing.
func providerEventsRoundTrip(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	env := NewEnv(newStore(t))
	env.Transport.Events = true
	in, _, _ := env.claim(t, 12, ledger.Email)
	if _, err := env.Cases.Dispatch(ctx, in.Key(), contractWorker); err != nil {
		t.Fatal(err)
	}
	attempt, proof, _ := env.Transport.Carried(in.Key())
	p := ledger.ProviderEvent{
		Key: in.Key(), Channel: ledger.Email, Kind: ledger.KindBounced, Type: "Bounce", Detail: "Permanent/General",
		MessageID: "0100018f-example-000000", At: env.Clock.Now().Add(1500 * time.Millisecond), Permanent: true,
		Attempt: attempt, Proof: proof,
	}
	res, err := env.Cases.RecordProviderEvent(ctx, p, contractWorker)
	if err != nil || res.Outcome != ledger.OutcomeRecorded {
		t.Fatalf("record: %s %v", res.Outcome, err)
	}
	got, err := env.Store.Get(ctx, in.Key())
	if err != nil {
		t.Fatal(err)
	}
	last := got.Last()
	if last.Kind != ledger.KindBounced || last.ProviderType != p.Type || last.Detail != p.Detail || !last.ProviderAt.Equal(p.At) ||
		!last.Permanent || last.AckID != p.MessageID || last.ID != p.ID() || got.State != ledger.Accepted {
		t.Fatalf("stored entry %+v", last)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	if f, ok := got.DeliveryFailure(); !ok || f.ID != p.ID() {
		t.Fatal("the stored bounce is not read back as a delivery failure")
	}
	again, err := env.Cases.RecordProviderEvent(ctx, p, contractWorker)
	if err != nil || again.Outcome != ledger.OutcomeDuplicate || again.Entry.Version != got.Version {
		t.Fatalf("duplicate: %s %v", again.Outcome, err)
	}
}
