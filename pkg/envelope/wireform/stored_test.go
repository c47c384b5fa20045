package wireform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// jsonFixed is the JSON form's size beyond kms_key_id and the base64 of
// edk, nonce and ct, with a one-digit v: {"v":1,"alg":"AES-256-GCM","kms_key_id":"",
// "edk":"","nonce":"","ct":""}.
const jsonFixed = 71

func b64(n int) int { return (n + 2) / 3 * 4 }

// envelopeOf returns a valid envelope with the given lengths; its bytes
// are not all alike, so nothing about them is special.
func envelopeOf(keyID, edk, ct int) Envelope {
	fill := func(n int, seed byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = seed + byte(i*7)
		}
		return b
	}
	arn := "arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/"
	id := arn + strings.Repeat("a", max(keyID-len(arn), 0))
	return Envelope{V: Version, Alg: Algorithm, KMSKeyID: id[:keyID], EDK: fill(edk, 1), Nonce: fill(NonceSize, 2), CT: fill(ct, 3)}
}

// TestStoredFormSize: the stored form is the fields' bytes plus
// StoredOverhead (12) bytes, at every length up to the largest the
// envelope admits (the longest key id, the largest KMS ciphertext blob,
// the largest ciphertext). It is therefore smaller than the JSON form by
// base64's third of edk, nonce and ct, plus the JSON form's 71 bytes of
// names and the algorithm, less those 12: what docs/design.md claims.
func TestStoredFormSize(t *testing.T) {
	longestARN := len("arn:aws-us-gov:kms:us-gov-west-1:111122223333:key/mrk-1234abcd12ab34cd56ef1234567890ab")
	for _, tc := range []struct {
		name           string
		keyID, edk, ct int
		// ratio bounds stored/JSON at these lengths.
		ratio float64
	}{
		{"worst case: longest key id, largest edk, largest ct", maxKeyIDLen, maxEDK, MaxCiphertext, 0.76},
		{"longest key id and largest edk, a 160-character SMS", maxKeyIDLen, maxEDK, 208, 0.80},
		{"longest real key ARN, KMS's edk, the 8 KB HTML email", longestARN, 184, 9964, 0.75},
		{"longest real key ARN, KMS's edk, a 160-character SMS", longestARN, 184, 208, 0.72},
		{"shortest", 1, 1, tagSize, 0.37},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := envelopeOf(tc.keyID, tc.edk, tc.ct)
			stored, err := e.MarshalStored()
			if err != nil {
				t.Fatal(err)
			}
			wire, err := e.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			raw := len(e.KMSKeyID) + len(e.EDK) + len(e.Nonce) + len(e.CT)
			if want := StoredOverhead + raw; len(stored) != want {
				t.Fatalf("stored form is %d B, want %d (fields %d + %d)", len(stored), want, raw, StoredOverhead)
			}
			saving := jsonFixed - StoredOverhead + b64(len(e.EDK)) - len(e.EDK) + b64(len(e.Nonce)) - len(e.Nonce) + b64(len(e.CT)) - len(e.CT)
			if got := len(wire) - len(stored); got != saving {
				t.Fatalf("stored form is %d B smaller than the JSON form (%d B), want %d", got, len(wire), saving)
			}
			if r := float64(len(stored)) / float64(len(wire)); r > tc.ratio {
				t.Fatalf("stored/JSON = %.3f, want ≤ %.2f", r, tc.ratio)
			}
			t.Logf("JSON %d B, stored %d B (%.1f%%)", len(wire), len(stored), 100*float64(len(stored))/float64(len(wire)))
			got, err := ParseStored(stored)
			if err != nil || !reflect.DeepEqual(got, e) {
				t.Fatalf("round trip: %v", err)
			}
		})
	}
	if _, err := envelopeOf(maxKeyIDLen+1, 1, tagSize).MarshalStored(); err == nil {
		t.Fatal("a key id longer than the envelope admits has a stored form")
	}
}

// TestParseStoredReadsBothForms: content written before the compact form
// (the JSON form, first byte '{') and after it decode to the same envelope.
func TestParseStoredReadsBothForms(t *testing.T) {
	e := envelopeOf(80, 184, 300)
	wire, _ := e.Marshal()
	stored, _ := e.MarshalStored()
	if stored[0] != FormCompact || wire[0] != '{' {
		t.Fatalf("first bytes %#x and %q", stored[0], wire[0])
	}
	for name, b := range map[string][]byte{"JSON form": wire, "stored form": stored} {
		got, err := ParseStored(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("%s: decoded %+v", name, got)
		}
	}
	// The decoded slices are the envelope's own: clearing the stored bytes
	// (as a caller may) does not change them.
	got, _ := ParseStored(stored)
	clear(stored)
	if !reflect.DeepEqual(got, e) {
		t.Fatal("decoded envelope shares memory with the stored bytes")
	}
}

// TestParseStoredRefusesCorruption: every corruption of a stored form is a
// *ledger.FieldError that says what is wrong and quotes nothing of the
// input; none decodes.
func TestParseStoredRefusesCorruption(t *testing.T) {
	e := envelopeOf(80, 184, 300)
	good, _ := e.MarshalStored()
	keyAt := 3                 // the key id's length
	edkAt := keyAt + 2 + 80    // edk's length
	nonceAt := edkAt + 2 + 184 // nonce's length
	ctAt := nonceAt + 1 + 12   // ct's length
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	put16 := func(at int, v uint16) []byte {
		return edit(func(b []byte) []byte { binary.BigEndian.PutUint16(b[at:], v); return b })
	}
	cases := []struct {
		name   string
		b      []byte
		reason string
	}{
		{"empty", nil, "empty stored form"},
		{"unknown form tag", edit(func(b []byte) []byte { b[0] = 0x02; return b }), "unknown stored form"},
		{"base64 text", []byte("AQEB"), "unknown stored form"},
		{"trailing byte", append(bytes.Clone(good), 0), "trailing data"},
		{"unsupported version", edit(func(b []byte) []byte { b[1] = 9; return b }), "unsupported envelope version"},
		{"unknown algorithm code", edit(func(b []byte) []byte { b[2] = 7; return b }), "unknown algorithm code"},
		{"algorithm code zero", edit(func(b []byte) []byte { b[2] = 0; return b }), "unknown algorithm code"},
		{"key id length past the end", put16(keyAt, 0xffff), "truncated"},
		{"empty key id", edit(func(b []byte) []byte {
			return append(append(b[:keyAt:keyAt], 0, 0), b[keyAt+2+80:]...)
		}), "kms_key_id: missing"},
		{"key id with a control character", edit(func(b []byte) []byte { b[keyAt+2] = '\n'; return b }), "kms_key_id"},
		{"edk length past the end", put16(edkAt, 0xffff), "truncated"},
		{"nonce of 11 bytes", edit(func(b []byte) []byte {
			b[nonceAt] = 11
			return append(b[:nonceAt+1+11:nonceAt+1+11], b[nonceAt+1+12:]...)
		}), "nonce: want 12 bytes"},
		{"ct length one short", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[ctAt:], 299); return b }), "trailing data"},
		{"ct length one long", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[ctAt:], 301); return b }), "truncated"},
		{"ct length huge", edit(func(b []byte) []byte { binary.BigEndian.PutUint32(b[ctAt:], 0xffffffff); return b }), "truncated"},
	}
	for n := 1; n < len(good); n++ {
		cases = append(cases, struct {
			name   string
			b      []byte
			reason string
		}{"truncated to " + strconv.Itoa(n), good[:n], "truncated"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseStored(tc.b)
			var fe *ledger.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseStored = %v, want a *ledger.FieldError", err)
			}
			if tc.reason != "" && !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %q does not say %q", err, tc.reason)
			}
			if len(tc.b) > 8 && strings.Contains(err.Error(), e.KMSKeyID) {
				t.Fatalf("error %q quotes the input", err)
			}
		})
	}
}

// TestStoredFormCarriesEveryField: the stored form writes exactly these
// fields of Envelope. A field added to Envelope (a new envelope version's
// parameter, say) would be dropped from the content table and the content
// would no longer open: this test fails until MarshalStored and
// parseCompact carry it and the list below names it.
func TestStoredFormCarriesEveryField(t *testing.T) {
	carried := []string{"V", "Alg", "KMSKeyID", "Dict", "EDK", "Nonce", "CT"}
	var got []string
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Envelope{})) {
		got = append(got, f.Name)
	}
	if !reflect.DeepEqual(got, carried) {
		t.Fatalf("Envelope has fields %v; the stored form carries %v", got, carried)
	}
}
