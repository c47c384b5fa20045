package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// formTable is a ledger table on the emulator and a Store on it.
func formTable(t *testing.T) (*dynamodb.Client, *Store) {
	t.Helper()
	client := dynamodb.NewFromConfig(emulator.Config(t))
	table, content := emulator.UniqueName(t, "ledger"), emulator.UniqueName(t, "content")
	if err := CreateTables(context.Background(), client, table, content); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{table, content} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
		}
	})
	return client, New(client, table, DefaultShards)
}

// putForm1 stores fixture f's item as form 1 wrote it and returns its entry.
func putForm1(t *testing.T, client *dynamodb.Client, st *Store, f storedFixture) ledger.Entry {
	t.Helper()
	e, err := DecodeImage(f.Image)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &st.table, Item: ItemFromImage(f.Image)}); err != nil {
		t.Fatal(err)
	}
	return e
}

// assertStoredAsEncoded fails t unless the table holds key exactly as
// form 2 encodes the entry it decodes to: an UpdateItem leaves no
// attribute behind that a PutItem of the entry would not write.
func assertStoredAsEncoded(t *testing.T, st *Store, key string) ledger.Entry {
	t.Helper()
	raw, err := st.rawGet(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	e, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if want := st.item(e); !reflect.DeepEqual(raw, want) {
		t.Fatalf("%s is stored as\n%v\nform 2 encodes its entry as\n%v", key, raw, want)
	}
	if err := e.Verify(); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestForm1RowsMigrateOnTheirNextWrite: a claimed row stored in form 1
// (a fixture) is listed by the open-row index, read, and dispatched by the
// use cases: its first transition rewrites it in form 2 with its history
// unchanged, the next is an ordinary form-2 update, and the table then
// holds exactly form 2's encoding of the accepted row. A form-2 row's
// transitions leave exactly its encoding too.
func TestForm1RowsMigrateOnTheirNextWrite(t *testing.T) {
	client, st := formTable(t)
	fs, err := readFixtures(v1Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := putForm1(t, client, st, fs[0])
	if old.State != ledger.Claimed {
		t.Fatalf("fixture 0 is %s, want a claim", old.State)
	}
	env := ledgertest.NewEnv(st)
	if open, err := st.ListOpen(ctx, ledger.Claimed, time.Time{}, 0); err != nil || len(open) != 1 || !reflect.DeepEqual(open[0], old) {
		t.Fatalf("open claims %+v, %v; want the form-1 row", open, err)
	}
	in1, sealed1 := ledgertest.Intent(1, ledger.Email, ledgertest.Epoch, 10*time.Minute)
	if in1.Key() != old.Key {
		t.Fatal("fixture 0 is not intent 1's claim")
	}
	if _, err := env.Content.Put(ctx, ledger.ContentKey(old), sealed1, old.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	res, err := env.Cases.Dispatch(ctx, old.Key, "dispatch/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3b")
	if err != nil || res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("dispatch of the form-1 claim: %+v, %v (%s)", res.Outcome, err, res.Entry.Reason)
	}
	got := assertStoredAsEncoded(t, st, old.Key)
	if got.State != ledger.Accepted || len(got.History) != 3 || !reflect.DeepEqual(got.History[0], old.History[0]) {
		t.Fatalf("after dispatch: %s with %d entries, first %+v; want accepted, 3, the claim's", got.State, len(got.History), got.History[0])
	}

	in, sealed := ledgertest.Intent(2, ledger.SMS, env.Clock.Now(), 10*time.Minute)
	if _, err := env.Cases.Claim(ctx, in, sealed, "claim/9c4e1f7a-2b3d-4a5e-8f6c-1d7b3e9a5c2f"); err != nil {
		t.Fatal(err)
	}
	assertStoredAsEncoded(t, st, in.Key())
	env.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	if _, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"); err != nil {
		t.Fatal(err)
	}
	if e := assertStoredAsEncoded(t, st, in.Key()); e.State != ledger.Deferred {
		t.Fatalf("throttled claim is %s, want deferred", e.State)
	}
	env.Transport.Script = nil
	env.Clock.Advance(2 * time.Minute)
	if _, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/7e6d5c4b-3a29-4187-9605-f4e3d2c1b0a9"); err != nil {
		t.Fatal(err)
	}
	if e := assertStoredAsEncoded(t, st, in.Key()); e.State != ledger.Accepted {
		t.Fatalf("retried claim is %s, want accepted", e.State)
	}
}

// TestForm1MigrationWritesOnlyTheStoredRow: a change to a form-1 row whose
// copy of the row differs from the stored one (an edited history entry, a
// different destination) or is stale (another version) is a conflict and
// writes nothing: the rewrite never replaces what the table holds with a
// caller's copy.
func TestForm1MigrationWritesOnlyTheStoredRow(t *testing.T) {
	client, st := formTable(t)
	fs, err := readFixtures(v1Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := putForm1(t, client, st, fs[0])
	before, err := st.rawGet(ctx, old.Key)
	if err != nil {
		t.Fatal(err)
	}
	change := func(edit func(*ledger.Entry)) ledger.Change {
		cur := old
		cur.History = append([]ledger.Event(nil), old.History...)
		edit(&cur)
		next := cur
		next.State, next.Version, next.UpdatedAt = ledger.Dispatching, cur.Version+1, cur.UpdatedAt.Add(time.Second)
		ev := ledger.Event{ID: "0123456789abcdef0123456789abcdef", From: ledger.Claimed, To: ledger.Dispatching,
			At: next.UpdatedAt, Worker: "dispatch", Prev: cur.Last().Hash}
		ev.Hash = ledger.EventHash(next.Key, ev)
		next.History = append(next.History, ev)
		return ledger.Change{From: ledger.Claimed, Version: cur.Version, Next: next, Event: ev}
	}
	for name, edit := range map[string]func(*ledger.Entry){
		"an edited history entry": func(e *ledger.Entry) { e.History[0].Reason = "forged" },
		"another destination":     func(e *ledger.Entry) { e.DestinationRef = "acct-forged:email" },
		"a stale version":         func(e *ledger.Entry) { e.Version-- },
	} {
		if _, err := st.Apply(ctx, change(edit)); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("%s: %v, want a conflict", name, err)
		}
		after, err := st.rawGet(ctx, old.Key)
		if err != nil || !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: the row changed: %v", name, err)
		}
	}
	// The genuine change lands, and a repeat of it (the SDK's retry after
	// a lost response) finds its own write.
	c := change(func(*ledger.Entry) {})
	for i := 0; i < 2; i++ {
		e, err := st.Apply(ctx, c)
		if err != nil || e.State != ledger.Dispatching || !e.Holds(c.Event.ID) {
			t.Fatalf("apply %d: %s, %v", i, e.State, err)
		}
	}
	assertStoredAsEncoded(t, st, old.Key)
}

// TestScanReadsBothForms: the export's scan filters form-1 rows on
// updated_at and form-2 rows on u by the same window.
func TestScanReadsBothForms(t *testing.T) {
	client, st := formTable(t)
	fs, err := readFixtures(v1Fixtures)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	all := map[string]ledger.Entry{} // some fixtures share a key: the last put stays
	for _, f := range fs[2:] {
		e := putForm1(t, client, st, f)
		all[e.Key] = e
	}
	for i, e := range sampleEntries(30) {
		e.Key += fmt.Sprintf("-%d", i) // distinct from the fixtures' keys and each other
		if _, err := st.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
		all[e.Key] = e
	}
	since := time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC)
	until := since.Add(3 * time.Hour)
	want, forms := map[string]bool{}, map[bool]int{}
	for _, e := range all {
		if !e.UpdatedAt.Before(since) && e.UpdatedAt.Before(until) {
			want[e.Key] = true
			forms[strings.Contains(e.Key, "-")]++
		}
	}
	if forms[false] == 0 || forms[true] == 0 {
		t.Fatalf("the window holds %d form-1 and %d form-2 rows; want some of each", forms[false], forms[true])
	}
	got := map[string]bool{}
	sc := NewScanner(client, st.table)
	if err := sc.All(ctx, ScanFilter{UpdatedSince: since, UpdatedUntil: until}, func(e ledger.Entry) error {
		got[e.Key] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(want) < 5 || len(want) == len(all) || !reflect.DeepEqual(got, want) {
		for _, e := range all {
			if got[e.Key] != want[e.Key] {
				t.Errorf("%s updated %s: found %v", e.Key, e.UpdatedAt, got[e.Key])
			}
		}
		t.Fatalf("scan found %d rows, want %d of %d (since %s until %s)", len(got), len(want), len(all), since, until)
	}
}
