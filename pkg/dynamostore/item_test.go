package dynamostore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// TestItemRoundTripsACompactHistory checks the stored form of a busy row:
// every history field comes back (links restored, content hashes filled in
// from the row), while the item omits what it can derive.
func TestItemRoundTripsACompactHistory(t *testing.T) {
	env := ledgertest.NewEnv(&memstore.Store{})
	ctx := context.Background()
	in, sealed := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	if _, err := env.Svc.Claim(ctx, in, sealed, "claim/r1"); err != nil {
		t.Fatal(err)
	}
	other := in
	other.ContentHash = ledger.ContentHash(in.TemplateID, "9", ledgertest.Message(1, ledger.Email))
	if _, err := env.Svc.Claim(ctx, other, sealed, "claim/r2"); err != nil { // a mismatch event
		t.Fatal(err)
	}
	if _, err := env.Svc.Dispatch(ctx, in.Key(), "dispatch/r3"); err != nil {
		t.Fatal(err)
	}
	want, err := env.Store.Get(ctx, in.Key())
	if err != nil {
		t.Fatal(err)
	}
	st := New(nil, "t", DefaultShards)
	item := st.item(want)
	got, err := decode(item)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want.History, got.History) {
		t.Fatalf("history did not round-trip:\nwant %+v\ngot  %+v", want.History, got.History)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	hist := item[attrHistory].(*types.AttributeValueMemberL).Value
	for i, h := range hist {
		m := h.(*types.AttributeValueMemberM).Value
		if _, ok := m["prev"]; ok {
			t.Fatalf("entry %d stores its link", i)
		}
		_, hasCH := m["ch"]
		if mismatch := want.History[i].Kind == ledger.KindContentMismatch; hasCH != mismatch {
			t.Fatalf("entry %d (%s): content hash stored = %v", i, want.History[i].Kind, hasCH)
		}
		if _, ok := m["hash"].(*types.AttributeValueMemberB); !ok {
			t.Fatalf("entry %d: hash not stored as bytes", i)
		}
	}
}
