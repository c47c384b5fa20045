// Package wireform is the wire form of sealed content (package envelope):
//
//	{"v":2,"alg":"AES-256-GCM","kms_key_id":"arn:...","edk":"<base64>","nonce":"<base64>","ct":"<base64>"}
//
// its strict parsing and its shape validation, with no cryptography and no
// KMS: what the claim function checks an intent's sealed content against
// without linking the KMS client. Package envelope seals and opens it, and
// re-exports these names (envelope.Envelope, envelope.Parse, ...).
package wireform

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"strconv"

	"github.com/resetledger/resetledger/pkg/charclass"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Version is the envelope format version Seal writes without a dictionary:
// the plaintext is compressed with raw DEFLATE (RFC 1951) before
// AES-256-GCM.
const Version = 2

// VersionDictionary is the version Seal writes with a preset dictionary:
// raw DEFLATE against the dictionary that Dict names, then AES-256-GCM.
const VersionDictionary = 3

// VersionUncompressed is the first envelope format version: AES-256-GCM over
// the plaintext itself. Producers no longer write it; Open still opens it.
const VersionUncompressed = 1

// Algorithm is the only content cipher.
const Algorithm = "AES-256-GCM"

// NonceSize is the length of the GCM nonce.
const NonceSize = 12

const (
	tagSize     = 16
	maxEDK      = 6144 // the largest KMS ciphertext blob
	maxKeyIDLen = 2048 // the longest KMS key identifier
	// MaxCiphertext bounds ct; a message never comes close (the whole SQS
	// body is limited to 64 KiB).
	MaxCiphertext = 64 << 10
	// MaxPlaintext bounds the plaintext a message may have, compressed or
	// not: the largest version 1 could carry (MaxCiphertext less the tag).
	// Seal refuses a longer one and Open stops inflating past it.
	MaxPlaintext = MaxCiphertext - tagSize
)

// Envelope is sealed content: everything needed to open it given access to
// the KMS key, and nothing readable without it.
type Envelope struct {
	V        int    `json:"v"`
	Alg      string `json:"alg"`
	KMSKeyID string `json:"kms_key_id"`     // the key ARN KMS reported when sealing
	Dict     string `json:"dict,omitempty"` // version 3: the dictionary's DictionaryID
	EDK      []byte `json:"edk"`            // KMS-encrypted data key
	Nonce    []byte `json:"nonce"`
	CT       []byte `json:"ct"` // ciphertext || GCM tag
}

// Validate checks the envelope's shape (not its authenticity) and returns a
// *ledger.FieldError naming the first bad field, relative to the envelope.
func (e Envelope) Validate() error {
	switch {
	case e.V != Version && e.V != VersionUncompressed && e.V != VersionDictionary:
		return bad("v", "unsupported envelope version (want 1, 2 or 3)")
	case e.Alg != Algorithm:
		return bad("alg", "unsupported algorithm (want AES-256-GCM)")
	}
	if err := checkKeyID(e.KMSKeyID); err != nil {
		return err
	}
	if err := checkDict(e.V, e.Dict); err != nil {
		return err
	}
	switch {
	case len(e.EDK) == 0:
		return bad("edk", "missing")
	case len(e.EDK) > maxEDK:
		return bad("edk", "too long")
	case len(e.Nonce) != NonceSize:
		return bad("nonce", "want 12 bytes")
	case len(e.CT) < tagSize:
		return bad("ct", "shorter than the GCM tag")
	case len(e.CT) > MaxCiphertext:
		return bad("ct", "too long")
	}
	return nil
}

// checkKeyID accepts key ids, key ARNs, alias names and alias ARNs.
func checkKeyID(s string) error {
	if s == "" {
		return bad("kms_key_id", "missing")
	}
	if len(s) > maxKeyIDLen {
		return bad("kms_key_id", "too long")
	}
	if !keyIDChars.All(s) {
		return bad("kms_key_id", "contains a character outside "+keyIDChars.String())
	}
	return nil
}

// keyIDChars is the alphabet of key ids, key ARNs, alias names and alias ARNs.
var keyIDChars = charclass.AlnumPlus(":/_.-")

// checkDict requires a dictionary id in version 3 and none before it.
func checkDict(v int, dict string) error {
	switch {
	case v != VersionDictionary && dict != "":
		return bad("dict", "only version 3 names a dictionary")
	case v == VersionDictionary && dict == "":
		return bad("dict", "missing")
	case v == VersionDictionary && !isDictionaryID(dict):
		return bad("dict", "want 64 lowercase hex digits")
	}
	return nil
}

// fields lists the envelope's JSON fields in wire order; "dict" is in
// version 3 only.
var fields = []string{"v", "alg", "kms_key_id", "dict", "edk", "nonce", "ct"}

// Fields returns the names of the envelope's JSON fields in wire order. All
// are required, except "dict", which version 3 requires and no other admits.
func Fields() []string { return append([]string(nil), fields...) }

// Parse decodes an envelope strictly from its JSON form: exactly the known
// fields with their exact names, each of the right type, no trailing data,
// then Validate. Errors are *ledger.FieldError values naming the field
// relative to the envelope; they never contain the input.
func Parse(b []byte) (Envelope, error) {
	var raw map[string]json.RawMessage
	if err := decodeOne(b, &raw); err != nil || raw == nil {
		return Envelope{}, bad("", "not a JSON object")
	}
	for k := range raw {
		if !known(k) {
			return Envelope{}, bad("", "unknown field")
		}
	}
	var e Envelope
	if err := field(raw, "v", &e.V, "want the integer 1, 2 or 3"); err != nil {
		return Envelope{}, err
	}
	if err := field(raw, "alg", &e.Alg, "want a string"); err != nil {
		return Envelope{}, err
	}
	if err := field(raw, "kms_key_id", &e.KMSKeyID, "want a string"); err != nil {
		return Envelope{}, err
	}
	if _, ok := raw["dict"]; ok || e.V == VersionDictionary {
		if err := field(raw, "dict", &e.Dict, "want a string"); err != nil {
			return Envelope{}, err
		}
	}
	for _, f := range []struct {
		name string
		dst  *[]byte
	}{{"edk", &e.EDK}, {"nonce", &e.Nonce}, {"ct", &e.CT}} {
		var s string
		if err := field(raw, f.name, &s, "want a base64 string"); err != nil {
			return Envelope{}, err
		}
		v, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || bytes.ContainsAny([]byte(s), "\r\n") {
			return Envelope{}, bad(f.name, "not standard padded base64")
		}
		*f.dst = v
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// Marshal returns the canonical JSON form of e after validating it.
func (e Envelope) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(e)
}

func known(k string) bool {
	for _, f := range fields {
		if f == k {
			return true
		}
	}
	return false
}

// field decodes raw[name] into dst; null, a missing field or a wrong type is
// a *ledger.FieldError.
func field(raw map[string]json.RawMessage, name string, dst any, want string) error {
	v, ok := raw[name]
	if !ok {
		return bad(name, "missing")
	}
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) || json.Unmarshal(v, dst) != nil {
		return bad(name, want)
	}
	return nil
}

// decodeOne decodes exactly one JSON value from b.
func decodeOne(b []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data")
	}
	return nil
}

func bad(field, reason string) error { return &ledger.FieldError{Field: field, Reason: reason} }

// DigestDomain opens an envelope's digest preimage: it separates the
// envelope digest from any other hash and names the layout's version.
const DigestDomain = "resetledger-intent-envelope/v1"

// DigestPreimage is the canonical encoding of e that Digest hashes: the
// line DigestDomain, then one line per field in wire order,
// "<name>:<length>:<value>\n" ("dict" in version 3 only), each value as
// the wire carries it (v in
// decimal, kms_key_id and alg as they are, edk, nonce and ct in standard
// padded base64) and its length in bytes in decimal. Parse admits exactly
// one text per value (strict base64, no line breaks), so two envelopes with
// the same preimage are the same envelope, whatever JSON escapes or member
// order their wire forms used.
func (e Envelope) DigestPreimage() []byte {
	values := []string{strconv.Itoa(e.V), e.Alg, e.KMSKeyID, e.Dict,
		base64.StdEncoding.EncodeToString(e.EDK), base64.StdEncoding.EncodeToString(e.Nonce),
		base64.StdEncoding.EncodeToString(e.CT)}
	var b bytes.Buffer
	b.WriteString(DigestDomain + "\n")
	for i, name := range fields {
		if name == "dict" && e.V != VersionDictionary {
			continue
		}
		b.WriteString(name + ":" + strconv.Itoa(len(values[i])) + ":" + values[i] + "\n")
	}
	return b.Bytes()
}

// Digest is the lowercase hex SHA-256 of DigestPreimage: what a version 3
// intent's seal binds as its envelope field, so that an envelope changed
// after sealing (one bit of ct) fails the seal like any other field.
func (e Envelope) Digest() string {
	sum := sha256.Sum256(e.DigestPreimage())
	return hex.EncodeToString(sum[:])
}
