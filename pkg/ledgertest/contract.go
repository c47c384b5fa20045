package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// NewStore returns a fresh, empty store for one subtest.
type NewStore func(t *testing.T) ledger.Store

// Env is a Service wired for contract tests over a store.
type Env struct {
	Svc       *ledger.Service
	Store     ledger.Store
	Content   *memstore.Content
	Clock     *Clock
	Transport *Transport
}

// NewEnv wires a Service over store with a memory content store, a plain
// opener and one scriptable transport for both channels.
func NewEnv(store ledger.Store) *Env {
	clk := NewClock()
	tr := &Transport{}
	content := &memstore.Content{}
	return &Env{
		Store: store, Content: content, Clock: clk, Transport: tr,
		Svc: &ledger.Service{
			Store: store, Content: content, Opener: PlainOpener{}, Clock: clk.Now,
			Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
			Policy:     ledger.DefaultPolicy(),
		},
	}
}

// RunStoreContract runs the contract every ledger.Store must pass, including
// the concurrency cases of the release gate that belong at the database
// boundary.
func RunStoreContract(t *testing.T, newStore NewStore) {
	ctx := context.Background()
	const w = ledger.Worker("contract/test")

	t.Run("claim round-trips every field", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
		in.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
		res, err := env.Svc.Claim(ctx, in, sealed, w)
		if err != nil || res.Outcome != ledger.ClaimCreated {
			t.Fatalf("claim: %v %v", res.Outcome, err)
		}
		got, err := env.Store.Get(ctx, in.Key())
		if err != nil {
			t.Fatal(err)
		}
		assertSameEntry(t, res.Entry, got)
		if got.State != ledger.Claimed || got.Version != 1 || len(got.History) != 1 {
			t.Fatalf("state %s version %d history %d", got.State, got.Version, len(got.History))
		}
		if err := got.Verify(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("get of a missing key is ErrNotFound", func(t *testing.T) {
		_, err := newStore(t).Get(ctx, "0000")
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("create of an existing key is ErrConflict and returns the existing row", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(2, ledger.SMS, env.Clock.Now(), 10*time.Minute)
		first, err := env.Svc.Claim(ctx, in, sealed, w)
		if err != nil {
			t.Fatal(err)
		}
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
	})

	t.Run("apply is compare-and-set on state, version and expiry", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(3, ledger.Email, env.Clock.Now(), 10*time.Minute)
		res, err := env.Svc.Claim(ctx, in, sealed, w)
		if err != nil {
			t.Fatal(err)
		}
		e := res.Entry
		mk := func(from ledger.State, version int64, notExpiredBy time.Time) ledger.Change {
			next := e
			next.State = ledger.Dispatching
			next.Version = e.Version + 1
			next.LeaseUntil = env.Clock.Now().Add(time.Minute)
			ev := ledger.Event{ID: fmt.Sprint("ev-", version), Kind: ledger.KindTransition, From: e.State, To: ledger.Dispatching, At: env.Clock.Now()}
			next.History = append(append([]ledger.Event(nil), e.History...), ev)
			return ledger.Change{From: from, Version: version, NotExpiredBy: notExpiredBy, Next: next, Event: ev}
		}
		for name, c := range map[string]ledger.Change{
			"wrong state":   mk(ledger.Unknown, e.Version, time.Time{}),
			"wrong version": mk(ledger.Claimed, e.Version+7, time.Time{}),
			"expired":       mk(ledger.Claimed, e.Version, in.ExpiresAt),
		} {
			if _, err := env.Store.Apply(ctx, c); !errors.Is(err, ledger.ErrConflict) {
				t.Fatalf("%s: want conflict, got %v", name, err)
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
	})

	t.Run("a not-sent answer defers the row, and the deferral round-trips", func(t *testing.T) {
		env := NewEnv(newStore(t))
		env.Transport.Script = func(s ledger.Send) Behavior {
			if s.Attempt == 1 {
				return Throttle
			}
			return Accept
		}
		env.Transport.RetryAfter = 7 * time.Second
		in, sealed := Intent(13, ledger.Email, env.Clock.Now(), 10*time.Minute)
		if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
			t.Fatal(err)
		}
		res, err := env.Svc.Dispatch(ctx, in.Key(), w)
		if err != nil || res.Outcome != ledger.DispatchDeferred {
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
		res, err = env.Svc.Dispatch(ctx, in.Key(), w)
		if err != nil || res.Outcome != ledger.DispatchAccepted || res.Entry.Attempts != 2 {
			t.Fatalf("retry: %s attempt %d, %v; want accepted at attempt 2", res.Outcome, res.Entry.Attempts, err)
		}
		if got := env.Transport.Recorded(in.Key()); got != 1 {
			t.Fatalf("provider recorded %d messages", got)
		}
	})

	t.Run("a create or apply repeated after its first attempt landed succeeds once", func(t *testing.T) {
		// What an SDK retry after a lost response looks like to the store.
		env := NewEnv(newStore(t))
		in, sealed := Intent(5, ledger.Email, env.Clock.Now(), 10*time.Minute)
		res, err := env.Svc.Claim(ctx, in, sealed, w)
		if err != nil {
			t.Fatal(err)
		}
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
	})

	t.Run("history is append-only even if the caller drops entries", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(4, ledger.Email, env.Clock.Now(), 10*time.Minute)
		res, _ := env.Svc.Claim(ctx, in, sealed, w)
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
	})

	t.Run("open index lists only due open rows, oldest first, and drops closed rows", func(t *testing.T) {
		env := NewEnv(newStore(t))
		now := env.Clock.Now()
		var keys []string
		for i, ttl := range []time.Duration{30 * time.Minute, 10 * time.Minute, 20 * time.Minute} {
			in, sealed := Intent(100+i, ledger.Email, now, ttl)
			if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
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
		if _, err := env.Svc.Dispatch(ctx, keys[1], w); err != nil {
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
	})

	t.Run("32 goroutines claiming 200 identities make exactly 200 rows", func(t *testing.T) {
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
					res, err := env.Svc.Claim(ctx, in, sealed, ledger.Worker(fmt.Sprint("claim/", g)))
					if err != nil {
						errs <- err
						continue
					}
					if res.Entry.Key != in.Key() || res.Entry.ContentHash != in.ContentHash || res.Entry.State != ledger.Claimed {
						errs <- fmt.Errorf("loser saw a different row for %s", in.Key())
					}
					if res.Outcome == ledger.ClaimCreated {
						mu.Lock()
						created[in.Key()]++
						mu.Unlock()
					} else if res.Outcome != ledger.ClaimDuplicate {
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
	})

	t.Run("two workers racing claimed to dispatching: exactly one sends", func(t *testing.T) {
		env := NewEnv(newStore(t))
		for i := 0; i < 20; i++ {
			in, sealed := Intent(2000+i, ledger.Email, env.Clock.Now(), 10*time.Minute)
			if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			results := make([]ledger.DispatchOutcome, 2)
			for k := range results {
				wg.Add(1)
				go func(k int) {
					defer wg.Done()
					r, err := env.Svc.Dispatch(ctx, in.Key(), ledger.Worker(fmt.Sprint("dispatch/", k)))
					if err != nil {
						t.Error(err)
					}
					results[k] = r.Outcome
				}(k)
			}
			wg.Wait()
			wins := 0
			for _, o := range results {
				if o == ledger.DispatchAccepted {
					wins++
				}
			}
			if wins != 1 || env.Transport.Recorded(in.Key()) != 1 {
				t.Fatalf("identity %d: %d winners, %d recorded sends (%v)", i, wins, env.Transport.Recorded(in.Key()), results)
			}
		}
	})

	t.Run("clock past expiry while claimed: dispatch refuses and records expired", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(3000, ledger.SMS, env.Clock.Now(), 10*time.Minute)
		if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
			t.Fatal(err)
		}
		env.Clock.Advance(10*time.Minute - env.Svc.Policy.ExpiryMargin)
		res, err := env.Svc.Dispatch(ctx, in.Key(), w)
		if err != nil || res.Outcome != ledger.DispatchExpired {
			t.Fatalf("dispatch: %v %v", res.Outcome, err)
		}
		got, _ := env.Store.Get(ctx, in.Key())
		if got.State != ledger.Expired || got.Reason == "" || got.Last().Reason == "" {
			t.Fatalf("row %s reason %q", got.State, got.Reason)
		}
		if env.Transport.Calls() != 0 || env.Content.Len() != 0 {
			t.Fatalf("sent %d, content left %d", env.Transport.Calls(), env.Content.Len())
		}
	})

	t.Run("same identity with a changed content hash is blocked and recorded", func(t *testing.T) {
		env := NewEnv(newStore(t))
		in, sealed := Intent(4000, ledger.Email, env.Clock.Now(), 10*time.Minute)
		if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
			t.Fatal(err)
		}
		changed := in
		changed.TemplateVersion = "4"
		m := Message(4000, ledger.Email)
		m.Body += " (new wording)"
		changed.ContentHash = ledger.ContentHash(changed.TemplateID, changed.TemplateVersion, m)
		res, err := env.Svc.Claim(ctx, changed, Seal(m), w)
		if err != nil || res.Outcome != ledger.ClaimMismatch {
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
		if _, err := env.Svc.Dispatch(ctx, in.Key(), w); err != nil {
			t.Fatal(err)
		}
		if s := env.Transport.Sent; len(s) != 1 || s[0].ContentHash != in.ContentHash {
			t.Fatalf("sent %d messages, want the original content once", len(s))
		}
	})

	t.Run("unknown stays unknown without a recorded decision", func(t *testing.T) {
		env := NewEnv(newStore(t))
		env.Transport.Script = func(ledger.Send) Behavior { return AcceptThenDrop }
		in, sealed := Intent(5000, ledger.Email, env.Clock.Now(), 10*time.Minute)
		if _, err := env.Svc.Claim(ctx, in, sealed, w); err != nil {
			t.Fatal(err)
		}
		res, err := env.Svc.Dispatch(ctx, in.Key(), w)
		if err != nil || res.Outcome != ledger.DispatchUnknown {
			t.Fatalf("dispatch: %v %v", res.Outcome, err)
		}
		// Redelivery, a duplicate stream record, the expire sweep and an
		// operator decision without evidence all leave it unknown.
		if r, err := env.Svc.Claim(ctx, in, sealed, w); err != nil || r.Outcome != ledger.ClaimDuplicate {
			t.Fatalf("redelivery: %v %v", r.Outcome, err)
		}
		if r, err := env.Svc.Dispatch(ctx, in.Key(), w); err != nil || r.Outcome != ledger.DispatchSkipped {
			t.Fatalf("second dispatch: %v %v", r.Outcome, err)
		}
		env.Clock.Advance(time.Hour)
		if _, err := env.Svc.ExpireSweep(ctx, w, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Svc.Resolve(ctx, in.Key(), ledger.DecideAccepted, "looks fine", "", "operator:test"); !errors.Is(err, ledger.ErrNoEvidence) {
			t.Fatalf("resolve without evidence: %v", err)
		}
		got, _ := env.Store.Get(ctx, in.Key())
		if got.State != ledger.Unknown {
			t.Fatalf("unknown became %s", got.State)
		}
		if env.Transport.Recorded(in.Key()) != 1 {
			t.Fatalf("recorded %d", env.Transport.Recorded(in.Key()))
		}
	})
}

func assertSameEntry(t *testing.T, want, got ledger.Entry) {
	t.Helper()
	if want.Key != got.Key || want.Identity != got.Identity || want.State != got.State || want.Version != got.Version ||
		want.ContentHash != got.ContentHash || want.DestinationRef != got.DestinationRef ||
		want.TemplateID != got.TemplateID || want.TemplateVersion != got.TemplateVersion ||
		want.PolicyVersion != got.PolicyVersion || !want.ExpiresAt.Equal(got.ExpiresAt) ||
		!want.CreatedAt.Equal(got.CreatedAt) || !want.UpdatedAt.Equal(got.UpdatedAt) ||
		!want.LeaseUntil.Equal(got.LeaseUntil) || !want.NextCheckAt.Equal(got.NextCheckAt) ||
		!want.FirstAttemptAt.Equal(got.FirstAttemptAt) || !want.RetainUntil.Equal(got.RetainUntil) ||
		want.Attempts != got.Attempts || want.AckID != got.AckID || want.Reason != got.Reason ||
		want.Mismatches != got.Mismatches || want.Workflow.Kind != got.Workflow.Kind ||
		!want.NextAttemptAt.Equal(got.NextAttemptAt) || !want.SlotAt.Equal(got.SlotAt) || want.NotSentCode != got.NotSentCode ||
		fmt.Sprint(want.Workflow.Order) != fmt.Sprint(got.Workflow.Order) || len(want.History) != len(got.History) {
		t.Fatalf("entry did not round-trip:\nwant %+v\ngot  %+v", want, got)
	}
	for i := range want.History {
		a, b := want.History[i], got.History[i]
		if a.ID != b.ID || a.Kind != b.Kind || a.From != b.From || a.To != b.To || !a.At.Equal(b.At) || a.Worker != b.Worker ||
			a.Reason != b.Reason || a.PolicyVersion != b.PolicyVersion || a.Attempt != b.Attempt || a.AckID != b.AckID ||
			a.ContentHash != b.ContentHash || a.Prev != b.Prev || a.Hash != b.Hash ||
			a.Code != b.Code || !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			t.Fatalf("history entry %d did not round-trip:\nwant %+v\ngot  %+v", i, a, b)
		}
	}
}

// RunContentContract runs the contract every ledger.ContentStore must pass.
func RunContentContract(t *testing.T, newContent func(t *testing.T) ledger.ContentStore) {
	ctx := context.Background()
	t.Run("put once, get, delete", func(t *testing.T) {
		c := newContent(t)
		exp := time.Now().Add(10 * time.Minute)
		if wrote, err := c.Put(ctx, "k1", []byte("sealed-1"), exp); err != nil || !wrote {
			t.Fatalf("first put: %v %v", wrote, err)
		}
		if wrote, err := c.Put(ctx, "k1", []byte("sealed-2"), exp); err != nil || wrote {
			t.Fatalf("second put must not overwrite: %v %v", wrote, err)
		}
		got, err := c.Get(ctx, "k1")
		if err != nil || string(got) != "sealed-1" {
			t.Fatalf("get: %q %v", got, err)
		}
		if err := c.Delete(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "k1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := c.Delete(ctx, "k1"); err != nil {
			t.Fatalf("second delete: %v", err)
		}
	})
}
