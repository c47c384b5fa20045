package dynamostore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestItemRoundTripsACompactHistory checks the stored form of a busy row:
// every history field comes back (links restored, content hashes filled in
// from the row), while the item omits what it can derive.
func TestItemRoundTripsACompactHistory(t *testing.T) {
	env := ledgertest.NewEnv(&memstore.Store{})
	ctx := context.Background()
	in, sealed := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	if _, err := env.Cases.Claim(ctx, in, sealed, "claim/r1"); err != nil {
		t.Fatal(err)
	}
	other := in
	other.ContentHash = ledger.ContentHash(in.TemplateID, "9", ledgertest.Message(1, ledger.Email))
	if _, err := env.Cases.Claim(ctx, other, sealed, "claim/r2"); err != nil { // a mismatch event
		t.Fatal(err)
	}
	if _, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/r3"); err != nil {
		t.Fatal(err)
	}
	want, err := env.Store.Get(ctx, in.Key())
	if err != nil {
		t.Fatal(err)
	}
	item, got := roundTrip(t, want)
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	hist := item[attrHistory].(*types.AttributeValueMemberL).Value
	for i, h := range hist {
		m := h.(*types.AttributeValueMemberM).Value
		if _, ok := m["prev"]; ok {
			t.Fatalf("entry %d stores its link", i)
		}
		_, hasCH := m[evContent]
		if mismatch := want.History[i].Kind == ledger.KindContentMismatch; hasCH != mismatch {
			t.Fatalf("entry %d (%s): content hash stored = %v", i, want.History[i].Kind, hasCH)
		}
		if _, ok := m["hash"].(*types.AttributeValueMemberB); !ok {
			t.Fatalf("entry %d: hash not stored as bytes", i)
		}
	}
}

// TestItemOmitsOnlyWhatDecodeRestores: an entry leaves out its kind, the
// state it left, its policy version and its attempt only when decode
// restores them (a transition, the previous entry's state and attempt, the
// row's policy version), and packs a worker's request id only when it is a UUID in
// Lambda's lowercase form; rows whose entries break the usual pattern (an
// entry that does not start where the previous one ended, a policy change
// mid-row, workers of every shape) come back field for field.
func TestItemOmitsOnlyWhatDecodeRestores(t *testing.T) {
	const (
		packed  = "dispatch/9c4e1f7a-2b3d-4a5e-8f6c-1d7b3e9a5c2f"
		nested  = "ops/run/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3b"
		upper   = "claim/3F2B8A4C-6D1E-4F7A-9B0C-2E5D8F1A7C3B"
		plain   = "operator:alice"
		badUUID = "claim/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3"
	)
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	ev := func(kind ledger.EventKind, from, to ledger.State, by, pv string, attempt int) ledger.Event {
		at = at.Add(time.Second)
		return ledger.Event{ID: "0123456789abcdef0123456789abcdef", Kind: kind, From: from, To: to, At: at, Worker: by,
			PolicyVersion: pv, Attempt: attempt, ContentHash: "ab", Hash: "cd"}
	}
	want := ledger.Entry{
		Key: "k", State: ledger.Accepted, Version: 5, ContentHash: "ab", PolicyVersion: "policy-1",
		History: []ledger.Event{
			ev(ledger.KindTransition, ledger.None, ledger.Claimed, packed, "policy-1", 0),
			ev(ledger.KindContentMismatch, ledger.Claimed, ledger.Claimed, upper, "policy-1", 0),
			ev(ledger.KindTransition, ledger.Deferred, ledger.Dispatching, nested, "policy-2", 1), // not where entry 1 ended
			ev(ledger.KindTransition, ledger.Dispatching, ledger.Unknown, plain, "", 1),
			ev(ledger.KindTransition, ledger.Unknown, ledger.Accepted, badUUID, "policy-1", 2),
		},
	}
	for i := range want.History {
		if i > 0 {
			want.History[i].Prev = want.History[i-1].Hash
		}
	}
	item, got := roundTrip(t, want)
	if _, ok := item[f2ContentHash].(*types.AttributeValueMemberB); !ok || got.ContentHash != want.ContentHash {
		t.Fatalf("content hash stored as %T, read back %q", item[f2ContentHash], got.ContentHash)
	}
	if _, ok := item[f2Mismatches]; ok {
		t.Fatal("a row without mismatches stores the attribute")
	}
	hist := item[attrHistory].(*types.AttributeValueMemberL).Value
	stored := func(i int, name string) bool { _, ok := hist[i].(*types.AttributeValueMemberM).Value[name]; return ok }
	for i, c := range []struct{ kind, from, pv, n, packedBy bool }{
		{false, false, false, false, true},
		{true, false, false, false, false},
		{false, true, true, true, true},
		{false, false, true, false, false},
		{false, false, false, true, false},
	} {
		by := hist[i].(*types.AttributeValueMemberM).Value[evBy]
		_, isBytes := by.(*types.AttributeValueMemberB)
		if stored(i, evKind) != c.kind || stored(i, evFrom) != c.from || stored(i, evPolicy) != c.pv || stored(i, evAttempt) != c.n || isBytes != c.packedBy {
			t.Errorf("entry %d stores kind %v from %v pv %v n %v, worker as bytes %v; want %+v",
				i, stored(i, evKind), stored(i, evFrom), stored(i, evPolicy), stored(i, evAttempt), isBytes, c)
		}
	}
	// A packed worker that is not one fails the decode rather than inventing a name.
	hist[0].(*types.AttributeValueMemberM).Value[evBy] = &types.AttributeValueMemberB{Value: []byte("short")}
	if _, err := decode(item); err == nil {
		t.Fatal("a malformed packed worker decoded")
	}
}

// roundTrip encodes want as the store writes it, decodes it again, and
// fails t unless the history came back field for field.
func roundTrip(t *testing.T, want ledger.Entry) (map[string]types.AttributeValue, ledger.Entry) {
	t.Helper()
	item := New(nil, "t", DefaultShards).item(want)
	got, err := decode(item)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want.History, got.History) {
		t.Fatalf("history did not round-trip:\nwant %+v\ngot  %+v", want.History, got.History)
	}
	return item, got
}
