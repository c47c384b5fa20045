package wireform

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/pkg/ledger"
)

func dictEnvelope() Envelope {
	e := envelopeOf(80, 184, 300)
	e.V, e.Dict = VersionDictionary, DictionaryID([]byte("a template"))
	return e
}

// TestVersion3RoundTrips: a version 3 envelope keeps its dictionary id
// through the wire form and the stored form, which spends 32 bytes on it.
func TestVersion3RoundTrips(t *testing.T) {
	e := dictEnvelope()
	wire, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(wire, []byte(`"kms_key_id":"`+e.KMSKeyID+`","dict":"`+e.Dict+`","edk"`)) {
		t.Fatalf("wire form %s does not carry dict after kms_key_id", wire)
	}
	back, err := Parse(wire)
	if err != nil || back.Dict != e.Dict || back.Digest() != e.Digest() {
		t.Fatalf("wire round trip: %v, dict %q", err, back.Dict)
	}
	stored, err := e.MarshalStored()
	if err != nil {
		t.Fatal(err)
	}
	if want := StoredOverhead + 32 + len(e.KMSKeyID) + len(e.EDK) + len(e.Nonce) + len(e.CT); len(stored) != want {
		t.Fatalf("stored form is %d bytes, want %d", len(stored), want)
	}
	back, err = ParseStored(stored)
	if err != nil || back.Dict != e.Dict || back.Digest() != e.Digest() {
		t.Fatalf("stored round trip: %v, dict %q", err, back.Dict)
	}
	v2 := envelopeOf(80, 184, 300)
	if strings.Contains(string(v2.DigestPreimage()), "dict:") {
		t.Fatal("a version 2 digest preimage names dict: version 2 digests would change")
	}
	if !strings.Contains(string(e.DigestPreimage()), "\nkms_key_id:80:"+e.KMSKeyID+"\ndict:64:"+e.Dict+"\nedk:") {
		t.Fatalf("version 3 preimage does not carry dict after kms_key_id:\n%s", e.DigestPreimage())
	}
	other := e
	other.Dict = DictionaryID([]byte("another template"))
	if other.Digest() == e.Digest() {
		t.Fatal("the digest does not bind the dictionary")
	}
}

// TestDictOnlyInVersion3: version 3 requires a well-formed id, and no
// other version admits one.
func TestDictOnlyInVersion3(t *testing.T) {
	e := dictEnvelope()
	wire, _ := e.Marshal()
	for name, tc := range map[string]struct{ from, to, reason string }{
		"missing":      {`"dict":"` + e.Dict + `",`, ``, "missing"},
		"null":         {`"dict":"` + e.Dict + `"`, `"dict":null`, "want a string"},
		"upper case":   {e.Dict, strings.ToUpper(e.Dict), "64 lowercase hex"},
		"short":        {e.Dict, e.Dict[:63], "64 lowercase hex"},
		"in version 2": {`"v":3`, `"v":2`, "only version 3"},
		"in version 1": {`"v":3`, `"v":1`, "only version 3"},
		"version 4":    {`"v":3`, `"v":4`, "want 1, 2 or 3"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(string(wire), tc.from, tc.to, 1)))
			var fe *ledger.FieldError
			if !errors.As(err, &fe) || !strings.Contains(fe.Reason, tc.reason) {
				t.Fatalf("got %v, want a field error saying %q", err, tc.reason)
			}
		})
	}
}

// TestDictionariesAdmit: a stage's set admits the envelopes whose
// dictionary it holds and those of other versions, and refuses the rest;
// a dictionary DEFLATE cannot use whole is refused when the set is made.
func TestDictionariesAdmit(t *testing.T) {
	set, err := NewDictionaries([]byte("a template"))
	if err != nil {
		t.Fatal(err)
	}
	if !set.Admits(dictEnvelope().Dict) || !set.Admits(envelopeOf(80, 184, 300).Dict) {
		t.Fatal("the held dictionary, or version 2, refused")
	}
	if set.Admits(DictionaryID([]byte("another"))) || Dictionaries(nil).Admits(dictEnvelope().Dict) {
		t.Fatal("a dictionary the set does not hold admitted")
	}
	for _, d := range [][]byte{nil, make([]byte, MaxDictionary+1)} {
		if _, err := NewDictionaries(d); err == nil {
			t.Fatalf("a %d-byte dictionary was admitted", len(d))
		}
	}
}
