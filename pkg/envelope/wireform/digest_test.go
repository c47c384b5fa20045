package wireform

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestDigestIsOfTheEnvelopeNotItsJSON: the digest is of the envelope's
// values, so the same envelope written with its members in another order
// and with JSON escapes has the same digest, while any member changed, one
// bit of ct included, has another. And Parse admits one text per value: a
// base64 text with non-zero padding bits (another text for the same bytes)
// is refused, so no second text of an envelope reaches the digest.
func TestDigestIsOfTheEnvelopeNotItsJSON(t *testing.T) {
	e := envelopeOf(80, 184, 300)
	wire, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(wire)
	if err != nil || again.Digest() != e.Digest() {
		t.Fatalf("round trip: %v", err)
	}
	// Members reversed, "/" in the key id written as \u002f.
	var b strings.Builder
	b.WriteString(`{"ct":"` + b64s(e.CT) + `","nonce":"` + b64s(e.Nonce) + `","edk":"` + b64s(e.EDK) + `",`)
	b.WriteString(`"kms_key_id":"` + strings.ReplaceAll(e.KMSKeyID, "/", `\u002f`) + `","alg":"AES-256-GCM","v":2}`)
	other, err := Parse([]byte(b.String()))
	if err != nil || other.Digest() != e.Digest() {
		t.Fatalf("the same envelope in another JSON form: %v, digest %s want %s", err, other.Digest(), e.Digest())
	}
	if len(e.Digest()) != 64 || strings.ToLower(e.Digest()) != e.Digest() {
		t.Fatalf("digest %q is not lowercase hex SHA-256", e.Digest())
	}
	for name, edit := range map[string]func(x *Envelope){
		"one bit of ct":      func(x *Envelope) { x.CT = flipped(x.CT) },
		"one bit of edk":     func(x *Envelope) { x.EDK = flipped(x.EDK) },
		"one bit of nonce":   func(x *Envelope) { x.Nonce = flipped(x.Nonce) },
		"ct one byte longer": func(x *Envelope) { x.CT = append(append([]byte(nil), x.CT...), 0) },
		"another key id":     func(x *Envelope) { x.KMSKeyID += "a" },
		"version 1":          func(x *Envelope) { x.V = VersionUncompressed },
	} {
		x := e
		edit(&x)
		if x.Digest() == e.Digest() {
			t.Errorf("%s: same digest", name)
		}
	}
	// "AQ==" is the byte 0x01; "AR==" decodes to it too in a lenient decoder.
	lenient := strings.Replace(string(wire), `"edk":"`+b64s(e.EDK)+`"`, `"edk":"AR=="`, 1)
	if _, err := Parse([]byte(lenient)); err == nil {
		t.Fatal("Parse admits base64 with non-zero padding bits: a second text for the same bytes")
	}
}

func flipped(b []byte) []byte {
	c := append([]byte(nil), b...)
	c[len(c)/2] ^= 0x01
	return c
}

func b64s(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
