package envelope_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestDictionarySealsSmallAndOpens: with the template as its dictionary,
// the 8 KB HTML email seals to version 3 with a ciphertext under 300
// bytes (about 2,450 without), its stored form well under 1 KB, and it
// opens with the stage's set to the same message.
func TestDictionarySealsSmallAndOpens(t *testing.T) {
	f := newFakeKMS(t)
	dict := shapes.Dictionary()
	set, err := envelope.NewDictionaries(dict)
	if err != nil {
		t.Fatal(err)
	}
	m := shapes.Email(3)
	e, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN, Dictionary: dict}).Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := (&envelope.Sealer{KMS: f, KeyID: fakeARN}).Seal(context.Background(), keyA, m)
	if e.V != envelope.VersionDictionary || e.Dict != envelope.DictionaryID(dict) || len(e.CT) > 300 || len(plain.CT) < 2000 {
		t.Fatalf("v=%d dict=%q ct=%d B (without the dictionary %d B)", e.V, e.Dict, len(e.CT), len(plain.CT))
	}
	stored, err := e.MarshalStored()
	if err != nil || len(stored) > 700 {
		t.Fatalf("stored form %d B (%v)", len(stored), err)
	}
	t.Logf("email: ct %d B with the dictionary, %d B without; stored form %d B", len(e.CT), len(plain.CT), len(stored))
	got, err := (&envelope.Opener{KMS: f, KeyARN: fakeARN, Dictionaries: set}).Open(context.Background(), keyA, stored)
	if err != nil || got != m {
		t.Fatalf("Open: %v", err)
	}
	wire, _ := e.Marshal()
	var doc map[string]any
	if json.Unmarshal(wire, &doc); doc["v"] != 3.0 || doc["dict"] != e.Dict {
		t.Fatalf("wire form %s", wire)
	}
}

// TestDictionaryNotHeldIsRetriedNotQuarantined: an envelope naming a
// dictionary the opener lacks is not opened (no KMS call), and the error
// is not ErrContentUnavailable: a stage whose dispatch is updated after its
// claim retries rather than quarantines. Content sealed against one
// dictionary and opened with another is unauthentic all the same.
func TestDictionaryNotHeldIsRetriedNotQuarantined(t *testing.T) {
	f := newFakeKMS(t)
	dict := shapes.Dictionary()
	m := shapes.Email(4)
	e, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN, Dictionary: dict}).Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e.MarshalStored()
	other, _ := envelope.NewDictionaries([]byte("another template"))
	f.lastDecr = nil
	_, err = (&envelope.Opener{KMS: f, KeyARN: fakeARN, Dictionaries: other}).Open(context.Background(), keyA, stored)
	if err == nil || errors.Is(err, ledger.ErrContentUnavailable) || f.lastDecr != nil {
		t.Fatalf("unheld dictionary: err %v, KMS called %v", err, f.lastDecr != nil)
	}
	assertNoLeak(t, err, m)

	// The same id, other bytes: only possible by editing the set. The
	// stream does not inflate to the message, and that is unauthentic
	// content (quarantined), not a dictionary to wait for.
	e.Dict = envelope.DictionaryID([]byte("another template"))
	stored, _ = e.MarshalStored()
	_, err = (&envelope.Opener{KMS: f, KeyARN: fakeARN, Dictionaries: other}).Open(context.Background(), keyA, stored)
	if !errors.Is(err, ledger.ErrContentUnavailable) {
		t.Fatalf("content sealed against one dictionary, opened with another: %v, want ErrContentUnavailable", err)
	}
}
