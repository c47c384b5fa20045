package envelope_test

import (
	"context"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestOpenReadsBothStoredForms: the opener opens content in the compact
// stored form the claim function writes and in the JSON form that content
// items written before it hold (a deploy happens with rows in flight).
func TestOpenReadsBothStoredForms(t *testing.T) {
	f := newFakeKMS(t)
	o := &envelope.Opener{KMS: f, KeyARN: fakeARN}
	m := ledgertest.Message(21, ledger.Email)
	e, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN}).Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	wire, _ := e.Marshal()
	stored, err := e.MarshalStored()
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) >= len(wire) {
		t.Fatalf("stored form %d B is not smaller than the JSON form %d B", len(stored), len(wire))
	}
	for name, b := range map[string][]byte{"JSON form (written before)": wire, "compact stored form": stored} {
		got, err := o.Open(context.Background(), keyA, b)
		if err != nil {
			t.Fatalf("%s: Open: %v", name, err)
		}
		if got != m {
			t.Fatalf("%s: Open = %+v, want %+v", name, got, m)
		}
	}
}

// TestOpenRefusesCorruptStoredForm: a stored form that does not decode is
// content that cannot be authenticated (ErrContentUnavailable: dispatch
// quarantines the row and sends nothing), with an error that names the
// fault and leaks nothing; KMS is never asked.
func TestOpenRefusesCorruptStoredForm(t *testing.T) {
	f := newFakeKMS(t)
	m := ledgertest.Message(22, ledger.Email)
	e, err := (&envelope.Sealer{KMS: f, KeyID: fakeARN}).Seal(context.Background(), keyA, m)
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := e.MarshalStored()
	for name, b := range map[string][]byte{
		"truncated":     stored[:len(stored)-1],
		"trailing byte": append(append([]byte(nil), stored...), 0),
		"unknown tag":   append([]byte{0x7f}, stored[1:]...),
	} {
		t.Run(name, func(t *testing.T) {
			f.lastDecr = nil
			_, err := (&envelope.Opener{KMS: f, KeyARN: fakeARN}).Open(context.Background(), keyA, b)
			assertUnavailable(t, err, m)
			if !strings.Contains(err.Error(), "stored envelope: ") {
				t.Fatalf("error %q does not say the stored envelope is at fault", err)
			}
			if f.lastDecr != nil {
				t.Fatal("KMS was asked to decrypt the data key of a corrupt stored form")
			}
		})
	}
}
