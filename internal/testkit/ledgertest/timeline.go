package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// TimelineStore is a ledger.Store that also lists rows by reference.
type TimelineStore interface {
	ledger.Store
	ledger.Timeline
}

// NewTimelineStore returns a fresh, empty store for one subtest.
type NewTimelineStore func(t *testing.T) TimelineStore

// timelineContract is the contract of ledger.Timeline, run over the rows a
// the use cases claim and move on.
var timelineContract = []property[NewTimelineStore]{
	{"a subject's rows, newest first, no other subject's, none without a subject", timelineBySubject},
	{"a destination's rows, with or without a subject", timelineByDestination},
	{"since is inclusive, limit keeps the newest", timelineSinceAndLimit},
	{"rows are read as they are now, not as they were claimed", timelineReadsCurrentRows},
	{"an address or an unknown kind is refused without echoing it", timelineRefusesBadRefs},
}

// RunTimelineContract runs the contract every ledger.Timeline must pass.
// Each property is a subtest with a fresh store from newStore.
func RunTimelineContract(t *testing.T, newStore NewTimelineStore) {
	runProperties(t, timelineContract, newStore)
}

// timelineEnv claims, one second apart, intent i on ch with the subject
// (none if "") and destination given, and returns the rows' keys in claim
// order.
type timelineClaim struct {
	i           int
	ch          ledger.Channel
	subject     string
	destination string
}

func claimTimeline(t *testing.T, env *Env, claims []timelineClaim) []string {
	t.Helper()
	var keys []string
	for _, c := range claims {
		env.Clock.Advance(time.Second)
		in, sealed := Intent(c.i, c.ch, env.Clock.Now(), 10*time.Minute)
		in.SubjectRef = c.subject
		if c.destination != "" {
			in.DestinationRef = c.destination
		}
		res, err := env.Cases.Claim(context.Background(), in, sealed, contractWorker)
		if err != nil || res.Outcome != ledger.OutcomeClaimed {
			t.Fatalf("claim %d/%s: %v %v", c.i, c.ch, res.Outcome, err)
		}
		keys = append(keys, in.Key())
	}
	return keys
}

// listKeys lists kind/ref and returns the rows' keys, failing the test on
// an error or a row that does not carry ref.
func listKeys(t *testing.T, tl ledger.Timeline, kind ledger.RefKind, ref string, since time.Time, limit int) []string {
	t.Helper()
	rows, err := tl.ListByRef(context.Background(), kind, ref, since, limit)
	if err != nil {
		t.Fatalf("ListByRef(%s, %s): %v", kind, ref, err)
	}
	var keys []string
	for i, e := range rows {
		if kind.Ref(e) != ref {
			t.Errorf("row %s has %s %q, listed under %q", e.Key, kind, kind.Ref(e), ref)
		}
		if i > 0 && e.CreatedAt.After(rows[i-1].CreatedAt) {
			t.Errorf("row %s (created %s) after a row created %s: want newest first", e.Key, e.CreatedAt, rows[i-1].CreatedAt)
		}
		keys = append(keys, e.Key)
	}
	return keys
}

func reversed(keys []string) []string {
	out := slices.Clone(keys)
	slices.Reverse(out)
	return out
}

func wantKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: listed %d rows %v, want %d %v", what, len(got), got, len(want), want)
	}
}

func timelineBySubject(t *testing.T, newStore NewTimelineStore) {
	store := newStore(t)
	env := NewEnv(store)
	keys := claimTimeline(t, env, []timelineClaim{
		{i: 1, ch: ledger.Email, subject: "acct-1"},
		{i: 2, ch: ledger.SMS, subject: "acct-2"},
		{i: 3, ch: ledger.SMS, subject: "acct-1"},
		{i: 4, ch: ledger.Email},
		{i: 5, ch: ledger.Email, subject: "acct-1"},
		{i: 6, ch: ledger.Email, subject: "acct-10"},
	})
	wantKeys(t, "acct-1", listKeys(t, store, ledger.BySubject, "acct-1", time.Time{}, 0), []string{keys[4], keys[2], keys[0]})
	wantKeys(t, "acct-2", listKeys(t, store, ledger.BySubject, "acct-2", time.Time{}, 0), []string{keys[1]})
	wantKeys(t, "acct-10", listKeys(t, store, ledger.BySubject, "acct-10", time.Time{}, 0), []string{keys[5]})
	wantKeys(t, "a subject never seen", listKeys(t, store, ledger.BySubject, "acct-3", time.Time{}, 0), nil)
	rows, err := store.ListByRef(context.Background(), ledger.BySubject, "acct-1", time.Time{}, 0)
	if err != nil || len(rows) != 3 {
		t.Fatalf("ListByRef: %d rows, %v", len(rows), err)
	}
	for _, e := range rows {
		got, err := store.Get(context.Background(), e.Key)
		if err != nil {
			t.Fatal(err)
		}
		assertSameEntry(t, got, e)
		if got.SubjectRef != "acct-1" {
			t.Errorf("Get(%s).SubjectRef = %q", e.Key, got.SubjectRef)
		}
	}
	// The row claimed without a subject kept none.
	if e, err := store.Get(context.Background(), keys[3]); err != nil || e.SubjectRef != "" {
		t.Errorf("row without a subject: %q, %v", e.SubjectRef, err)
	}
}

func timelineByDestination(t *testing.T, newStore NewTimelineStore) {
	store := newStore(t)
	env := NewEnv(store)
	keys := claimTimeline(t, env, []timelineClaim{
		{i: 1, ch: ledger.Email, destination: "dest-a"},
		{i: 2, ch: ledger.Email, subject: "acct-2", destination: "dest-a"},
		{i: 3, ch: ledger.SMS, subject: "acct-2", destination: "dest-b"},
		{i: 4, ch: ledger.SMS, destination: "dest-a"},
	})
	wantKeys(t, "dest-a", listKeys(t, store, ledger.ByDestination, "dest-a", time.Time{}, 0), []string{keys[3], keys[1], keys[0]})
	wantKeys(t, "dest-b", listKeys(t, store, ledger.ByDestination, "dest-b", time.Time{}, 0), []string{keys[2]})
	wantKeys(t, "a destination never seen", listKeys(t, store, ledger.ByDestination, "dest-c", time.Time{}, 0), nil)
}

func timelineSinceAndLimit(t *testing.T, newStore NewTimelineStore) {
	store := newStore(t)
	env := NewEnv(store)
	var claims []timelineClaim
	for i := range 12 {
		claims = append(claims, timelineClaim{i: 100 + i, ch: ledger.Email, subject: "acct-many"})
	}
	keys := claimTimeline(t, env, claims)
	all := listKeys(t, store, ledger.BySubject, "acct-many", time.Time{}, 0)
	wantKeys(t, "all", all, reversed(keys))
	wantKeys(t, "limit 5", listKeys(t, store, ledger.BySubject, "acct-many", time.Time{}, 5), reversed(keys)[:5])
	first, err := store.Get(context.Background(), keys[4])
	if err != nil {
		t.Fatal(err)
	}
	// since is the creation time of the fifth row: it and the newer ones.
	wantKeys(t, "since the fifth", listKeys(t, store, ledger.BySubject, "acct-many", first.CreatedAt, 0), reversed(keys[4:]))
	wantKeys(t, "since the fifth, limit 3", listKeys(t, store, ledger.BySubject, "acct-many", first.CreatedAt, 3), reversed(keys)[:3])
	wantKeys(t, "since a millisecond after the fifth", listKeys(t, store, ledger.BySubject, "acct-many", first.CreatedAt.Add(time.Millisecond), 0), reversed(keys[5:]))
	wantKeys(t, "since after the last", listKeys(t, store, ledger.BySubject, "acct-many", env.Clock.Now().Add(time.Second), 0), nil)
	wantKeys(t, "by destination, limit 2", listKeys(t, store, ledger.ByDestination, fmt.Sprintf("acct-%06d:email", 111), time.Time{}, 2), []string{keys[11]})
}

func timelineReadsCurrentRows(t *testing.T, newStore NewTimelineStore) {
	ctx := context.Background()
	store := newStore(t)
	env := NewEnv(store)
	keys := claimTimeline(t, env, []timelineClaim{
		{i: 1, ch: ledger.Email, subject: "acct-live"},
		{i: 2, ch: ledger.SMS, subject: "acct-live"},
	})
	if _, err := env.Cases.Dispatch(ctx, keys[1], contractWorker); err != nil {
		t.Fatal(err)
	}
	rows, err := store.ListByRef(ctx, ledger.BySubject, "acct-live", time.Time{}, 0)
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListByRef: %d rows, %v", len(rows), err)
	}
	for _, e := range rows {
		now, err := store.Get(ctx, e.Key)
		if err != nil {
			t.Fatal(err)
		}
		if e.State != now.State || e.Version != now.Version || len(e.History) != len(now.History) {
			t.Errorf("listed %s as %s v%d, the row is %s v%d", e.Key, e.State, e.Version, now.State, now.Version)
		}
	}
	if rows[0].Key != keys[1] || rows[0].Version < 2 {
		t.Errorf("the dispatched row is listed as %s v%d, want %s moved past its claim", rows[0].Key, rows[0].Version, keys[1])
	}
}

func timelineRefusesBadRefs(t *testing.T, newStore NewTimelineStore) {
	store := newStore(t)
	for _, c := range []struct {
		kind ledger.RefKind
		ref  string
	}{
		{ledger.BySubject, "player@example.test"},
		{ledger.ByDestination, "+15555550123"},
		{ledger.BySubject, ""},
		{ledger.ByDestination, strings.Repeat("d", 257)},
		{ledger.RefKind("challenge_id"), "chal-1"},
	} {
		rows, err := store.ListByRef(context.Background(), c.kind, c.ref, time.Time{}, 0)
		if !errors.Is(err, ledger.ErrInvalidIntent) || rows != nil {
			t.Errorf("ListByRef(%s, %q) = %d rows, %v; want a field error", c.kind, c.ref, len(rows), err)
		}
		if err != nil && c.ref != "" && strings.Contains(err.Error(), c.ref) {
			t.Errorf("error echoes the reference: %v", err)
		}
	}
}
