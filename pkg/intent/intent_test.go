package intent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// testSeal stands for an intent_mac: Decode checks its presence, not the
// MAC (that takes the key; see intentseal and the claim handler).
var testSeal = strings.Repeat("s", 43)

// secret marks values a test plants in bad fields; no error may repeat it.
const secret = "S3CR3T"

var testEnvelope = envelope.Envelope{
	V:        envelope.Version,
	Alg:      envelope.Algorithm,
	KMSKeyID: "arn:aws:kms:eu-west-1:000000000000:key/1234abcd-12ab-34cd-56ef-1234567890ab",
	EDK:      bytes.Repeat([]byte{0xe1}, 184),
	Nonce:    bytes.Repeat([]byte{0x0c}, 12),
	CT:       bytes.Repeat([]byte{0xc7}, 80),
}

func testIntent(t testing.TB) ledger.Intent {
	t.Helper()
	in, _ := ledgertest.Intent(7, ledger.Email, ledgertest.Epoch, 10*time.Minute)
	return in
}

// validDoc returns a valid intent document as a generic map to mutate.
func validDoc(t testing.TB) map[string]any {
	t.Helper()
	b, err := intent.Encode(testIntent(t), testEnvelope, testSeal)
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func marshal(t testing.TB, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sub(m map[string]any, k string) map[string]any { return m[k].(map[string]any) }

func TestDecodeValid(t *testing.T) {
	want := testIntent(t)
	body, err := intent.Encode(want, testEnvelope, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := intent.Decode(body)
	got, sealed := dec.Intent, dec.Sealed
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode = %+v, want %+v", got, want)
	}
	env, err := envelope.ParseStored(sealed)
	if err != nil {
		t.Fatalf("sealed content does not parse: %v", err)
	}
	if !reflect.DeepEqual(env, testEnvelope) {
		t.Fatalf("sealed content = %+v, want %+v", env, testEnvelope)
	}
	stored, _ := testEnvelope.MarshalStored()
	if !bytes.Equal(sealed, stored) {
		t.Fatalf("sealed content is not the envelope's compact stored form:\n%x\n%x", sealed, stored)
	}
}

// TestDecodeSubjectRef: subject_ref is optional; present, it reaches the
// intent and Encode writes it back after destination_ref; absent, the body
// is byte for byte what it was before the member existed.
func TestDecodeSubjectRef(t *testing.T) {
	without := testIntent(t)
	bodyWithout, err := intent.Encode(without, testEnvelope, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(bodyWithout, []byte("subject_ref")) {
		t.Errorf("an intent without a subject is encoded with subject_ref: %s", bodyWithout)
	}
	dec, err := intent.Decode(bodyWithout)
	got := dec.Intent
	if err != nil || got.SubjectRef != "" {
		t.Fatalf("Decode(no subject_ref) = %q, %v", got.SubjectRef, err)
	}

	with := testIntent(t)
	with.SubjectRef = "tenant-7:acct_1001.eu"
	body, err := intent.Encode(with, testEnvelope, testSeal)
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(`"destination_ref":"` + with.DestinationRef + `","subject_ref":"tenant-7:acct_1001.eu","issued_at":`)
	if !bytes.Contains(body, want) {
		t.Errorf("subject_ref is not written right after destination_ref: %s", body)
	}
	dec, err = intent.Decode(body)
	got = dec.Intent
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !reflect.DeepEqual(got, with) {
		t.Errorf("Decode = %+v, want %+v", got, with)
	}
	// The member takes no part in the identity.
	if got.Key() != without.Key() {
		t.Errorf("subject_ref changed the dedupe key")
	}
}

func TestDecodeNormalizes(t *testing.T) {
	doc := validDoc(t)
	doc["expires_at"] = "2026-11-30T11:10:00.5+02:00"
	sub(doc, "workflow")["order"] = []any{}
	// Insignificant whitespace and key order do not matter.
	body := append([]byte("\n  "), marshal(t, doc)...)
	body = append(body, " \n"...)
	dec, err := intent.Decode(body)
	got := dec.Intent
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if want := time.Date(2026, 11, 30, 9, 10, 0, 5e8, time.UTC); got.ExpiresAt != want {
		t.Errorf("ExpiresAt = %v, want %v in UTC", got.ExpiresAt, want)
	}
	if got.Workflow.Order != nil {
		t.Errorf("empty order decoded as %#v, want nil", got.Workflow.Order)
	}
}

func TestDecodeFallback(t *testing.T) {
	doc := validDoc(t)
	doc["workflow"] = map[string]any{"kind": "fallback", "order": []any{"sms", "email"}}
	dec, err := intent.Decode(marshal(t, doc))
	got := dec.Intent
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.SMS, ledger.Email}}
	if !reflect.DeepEqual(got.Workflow, want) {
		t.Fatalf("Workflow = %+v, want %+v", got.Workflow, want)
	}
}

// badCase is one rejected document. decodeOnly, when set, says why the JSON
// schema cannot reject it (the schema test skips those).
type badCase struct {
	name       string
	body       func(t testing.TB) []byte
	field      string
	version    bool // also wraps ErrUnsupportedVersion
	decodeOnly string
}

func mutate(f func(m map[string]any)) func(t testing.TB) []byte {
	return func(t testing.TB) []byte {
		m := validDoc(t)
		f(m)
		return marshal(t, m)
	}
}

func raw(f func(valid string) string) func(t testing.TB) []byte {
	return func(t testing.TB) []byte { return []byte(f(string(marshal(t, validDoc(t))))) }
}

// badCases is every malformed intent the decoder must refuse, with the field
// it must name. It is long because it is one table of cases, grouped by field.
func badCases() []badCase {
	cases := []badCase{
		{name: "empty body", body: raw(func(string) string { return "" }), field: "body", decodeOnly: "not JSON"},
		{name: "truncated JSON", body: raw(func(v string) string { return v[:len(v)/2] }), field: "body", decodeOnly: "not JSON"},
		{name: "truncated by one byte", body: raw(func(v string) string { return v[:len(v)-1] }), field: "body", decodeOnly: "not JSON"},
		{name: "array instead of object", body: raw(func(v string) string { return "[" + v + "]" }), field: "body"},
		{name: "string instead of object", body: raw(func(string) string { return `"` + secret + `"` }), field: "body"},
		{name: "null", body: raw(func(string) string { return "null" }), field: "body"},
		{name: "trailing object", body: raw(func(v string) string { return v + "{}" }), field: "body", decodeOnly: "two JSON values"},
		{name: "trailing garbage", body: raw(func(v string) string { return v + secret }), field: "body", decodeOnly: "not JSON"},
		{name: "oversized payload", body: raw(func(v string) string {
			return v[:len(v)-1] + `,"padding":"` + strings.Repeat(secret, intent.MaxBodySize/len(secret)) + `"}`
		}), field: "body"},
		{name: "oversized whitespace", body: raw(func(v string) string { return v + strings.Repeat(" ", intent.MaxBodySize) }), field: "body", decodeOnly: "the schema does not bound size"},
		{name: "unknown top-level field", body: mutate(func(m map[string]any) { m["token_"+secret] = secret }), field: "body"},
		{name: "field name in another case", body: mutate(func(m map[string]any) { m["Purpose"] = m["purpose"]; delete(m, "purpose") }), field: "body"},
		{name: "duplicate field", body: raw(func(v string) string {
			return strings.Replace(v, `"channel":"email"`, `"channel":"email","channel":"sms"`, 1)
		}), field: "body", decodeOnly: "JSON parsers keep the last duplicate"},
		{name: "duplicate field in envelope", body: raw(func(v string) string {
			return strings.Replace(v, `"v":2`, `"v":2,"v":2`, 1)
		}), field: "sealed_content", decodeOnly: "JSON parsers keep the last duplicate"},
		{name: "unknown workflow field", body: mutate(func(m map[string]any) { sub(m, "workflow")["priority"] = secret }), field: "workflow"},
		{name: "unknown envelope field", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["plaintext"] = secret }), field: "sealed_content"},
		{name: "deeply nested value", body: mutate(func(m map[string]any) {
			var v any = secret
			for range 20 {
				v = []any{v}
			}
			sub(m, "workflow")["order"] = v
		}), field: "workflow.order"},

		{name: "unknown schema_version", body: mutate(func(m map[string]any) { m["schema_version"] = 4 }), field: "schema_version", version: true},
		{name: "schema_version zero", body: mutate(func(m map[string]any) { m["schema_version"] = 0 }), field: "schema_version", version: true},
		{name: "schema_version as string", body: mutate(func(m map[string]any) { m["schema_version"] = "1" }), field: "schema_version"},
		{name: "schema_version fractional", body: mutate(func(m map[string]any) { m["schema_version"] = 1.5 }), field: "schema_version", version: true},
		{name: "schema_version null", body: mutate(func(m map[string]any) { m["schema_version"] = nil }), field: "schema_version"},

		{name: "unknown purpose", body: mutate(func(m map[string]any) { m["purpose"] = "marketing-" + secret }), field: "purpose"},
		{name: "purpose wrong type", body: mutate(func(m map[string]any) { m["purpose"] = true }), field: "purpose"},
		{name: "unknown channel", body: mutate(func(m map[string]any) { m["channel"] = "push" }), field: "channel"},
		{name: "channel in upper case", body: mutate(func(m map[string]any) { m["channel"] = "EMAIL" }), field: "channel"},
		{name: "channel wrong type", body: mutate(func(m map[string]any) { m["channel"] = []any{"email"} }), field: "channel"},
		{name: "challenge_id too long", body: mutate(func(m map[string]any) { m["challenge_id"] = strings.Repeat("c", 129) }), field: "challenge_id"},
		{name: "challenge_id control character", body: mutate(func(m map[string]any) { m["challenge_id"] = "chal\x07" + secret }), field: "challenge_id"},
		{name: "challenge_id newline", body: mutate(func(m map[string]any) { m["challenge_id"] = "chal\n" + secret }), field: "challenge_id"},
		{name: "challenge_id NUL", body: mutate(func(m map[string]any) { m["challenge_id"] = "chal\x00" }), field: "challenge_id"},
		{name: "challenge_id non-ASCII", body: mutate(func(m map[string]any) { m["challenge_id"] = "chal-é" }), field: "challenge_id"},
		{name: "challenge_id empty", body: mutate(func(m map[string]any) { m["challenge_id"] = "" }), field: "challenge_id"},
		{name: "challenge_id number", body: mutate(func(m map[string]any) { m["challenge_id"] = 42 }), field: "challenge_id"},
		{name: "challenge_id null", body: mutate(func(m map[string]any) { m["challenge_id"] = nil }), field: "challenge_id"},
		{name: "destination_ref is a raw email address", body: mutate(func(m map[string]any) { m["destination_ref"] = "player+" + secret + "@example.test" }), field: "destination_ref"},
		{name: "destination_ref is a raw phone number", body: mutate(func(m map[string]any) { m["destination_ref"] = "+15550001234" }), field: "destination_ref"},
		{name: "destination_ref too long", body: mutate(func(m map[string]any) { m["destination_ref"] = strings.Repeat("d", 257) }), field: "destination_ref"},
		{name: "subject_ref is a raw email address", body: mutate(func(m map[string]any) { m["subject_ref"] = "player+" + secret + "@example.test" }), field: "subject_ref"},
		{name: "subject_ref is a raw phone number", body: mutate(func(m map[string]any) { m["subject_ref"] = "+15550001234" }), field: "subject_ref"},
		{name: "subject_ref too long", body: mutate(func(m map[string]any) { m["subject_ref"] = strings.Repeat("s", 257) }), field: "subject_ref"},
		{name: "subject_ref empty", body: mutate(func(m map[string]any) { m["subject_ref"] = "" }), field: "subject_ref"},
		{name: "subject_ref null", body: mutate(func(m map[string]any) { m["subject_ref"] = nil }), field: "subject_ref"},
		{name: "subject_ref number", body: mutate(func(m map[string]any) { m["subject_ref"] = 1001 }), field: "subject_ref"},
		{name: "subject_ref newline", body: mutate(func(m map[string]any) { m["subject_ref"] = "acct\n" + secret }), field: "subject_ref"},
		{name: "subject_ref in capitals", body: mutate(func(m map[string]any) { m["Subject_Ref"] = "acct-1001" }), field: "body"},
		{name: "template_id too long", body: mutate(func(m map[string]any) { m["template_id"] = strings.Repeat("t", 65) }), field: "template_id"},
		{name: "template_version too long", body: mutate(func(m map[string]any) { m["template_version"] = strings.Repeat("9", 33) }), field: "template_version"},
		{name: "template_version number", body: mutate(func(m map[string]any) { m["template_version"] = 3 }), field: "template_version"},
		{name: "policy_version empty", body: mutate(func(m map[string]any) { m["policy_version"] = "" }), field: "policy_version"},
		{name: "content_hash upper case", body: mutate(func(m map[string]any) { m["content_hash"] = strings.ToUpper(m["content_hash"].(string)) }), field: "content_hash"},
		{name: "content_hash short", body: mutate(func(m map[string]any) { m["content_hash"] = "abc123" }), field: "content_hash"},

		{name: "workflow wrong type", body: mutate(func(m map[string]any) { m["workflow"] = "single" }), field: "workflow"},
		{name: "workflow null", body: mutate(func(m map[string]any) { m["workflow"] = nil }), field: "workflow"},
		{name: "workflow kind missing", body: mutate(func(m map[string]any) { m["workflow"] = map[string]any{} }), field: "workflow.kind"},
		{name: "unknown workflow kind", body: mutate(func(m map[string]any) { sub(m, "workflow")["kind"] = "broadcast" }), field: "workflow.kind"},
		{name: "workflow kind wrong type", body: mutate(func(m map[string]any) { sub(m, "workflow")["kind"] = 1 }), field: "workflow.kind"},
		{name: "workflow order wrong type", body: mutate(func(m map[string]any) { sub(m, "workflow")["order"] = "email,sms" }), field: "workflow.order"},
		{name: "workflow order number items", body: mutate(func(m map[string]any) { sub(m, "workflow")["order"] = []any{1, 2} }), field: "workflow.order"},
		{name: "workflow order unknown channel", body: mutate(func(m map[string]any) { sub(m, "workflow")["order"] = []any{"email", "push"} }), field: "workflow.order"},
		{name: "fallback with one channel", body: mutate(func(m map[string]any) {
			m["workflow"] = map[string]any{"kind": "fallback", "order": []any{"email"}}
		}), field: "workflow.order"},
		{name: "fallback without order", body: mutate(func(m map[string]any) { m["workflow"] = map[string]any{"kind": "fallback"} }), field: "workflow.order"},
		{name: "fallback with a repeated channel", body: mutate(func(m map[string]any) {
			m["workflow"] = map[string]any{"kind": "fallback", "order": []any{"email", "email"}}
		}), field: "workflow.order"},

		{name: "expiry unparsable", body: mutate(func(m map[string]any) { m["expires_at"] = "in ten minutes " + secret }), field: "expires_at"},
		{name: "expiry without offset", body: mutate(func(m map[string]any) { m["expires_at"] = "2026-11-30T09:10:00" }), field: "expires_at"},
		{name: "expiry date only", body: mutate(func(m map[string]any) { m["expires_at"] = "2026-11-30" }), field: "expires_at"},
		{name: "expiry month 13", body: mutate(func(m map[string]any) { m["expires_at"] = "2026-13-30T09:10:00Z" }), field: "expires_at"},
		{name: "expiry as epoch seconds", body: mutate(func(m map[string]any) { m["expires_at"] = 1795000000 }), field: "expires_at"},
		{name: "expiry year zero", body: mutate(func(m map[string]any) { m["expires_at"] = "0000-01-01T00:00:00Z" }), field: "expires_at", decodeOnly: "the schema does not bound the year"},

		{name: "sealed_content wrong type", body: mutate(func(m map[string]any) { m["sealed_content"] = secret }), field: "sealed_content"},
		{name: "sealed_content null", body: mutate(func(m map[string]any) { m["sealed_content"] = nil }), field: "sealed_content"},
		{name: "envelope version", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["v"] = 4 }), field: "sealed_content.v"},
		{name: "envelope version 3 without dict", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["v"] = 3 }), field: "sealed_content.dict"},
		{name: "envelope version 2 with dict", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["dict"] = strings.Repeat("ab", 32) }), field: "sealed_content.dict"},
		{name: "envelope algorithm", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["alg"] = "AES-128-CBC" }), field: "sealed_content.alg"},
		{name: "envelope key id with spaces", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["kms_key_id"] = "my key" }), field: "sealed_content.kms_key_id"},
		{name: "envelope edk missing", body: mutate(func(m map[string]any) { delete(sub(m, "sealed_content"), "edk") }), field: "sealed_content.edk"},
		{name: "envelope nonce wrong size", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["nonce"] = "AAAA" }), field: "sealed_content.nonce"},
		{name: "envelope ct not base64", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["ct"] = secret + "!!!!!!!!!!!!!!!!!!!!!!!!!" }), field: "sealed_content.ct"},
		{name: "envelope ct unpadded base64", body: mutate(func(m map[string]any) {
			sub(m, "sealed_content")["ct"] = strings.TrimRight(sub(m, "sealed_content")["ct"].(string)+"AA", "=")
		}), field: "sealed_content.ct"},
		{name: "envelope ct too short", body: mutate(func(m map[string]any) { sub(m, "sealed_content")["ct"] = "AAAA" }), field: "sealed_content.ct"},
	}
	for _, f := range intent.RequiredFields() {
		cases = append(cases, badCase{name: "missing " + f, body: mutate(func(m map[string]any) { delete(m, f) }), field: f})
	}
	return cases
}

func TestDecodeRejects(t *testing.T) {
	for _, tc := range badCases() {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body(t)
			dec, err := intent.Decode(body)
			in, sealed := dec.Intent, dec.Sealed
			if err == nil {
				t.Fatalf("Decode accepted %s", body)
			}
			if !reflect.DeepEqual(in, ledger.Intent{}) || sealed != nil {
				t.Errorf("Decode returned data with an error")
			}
			if !errors.Is(err, ledger.ErrInvalidIntent) {
				t.Errorf("error %q does not wrap ledger.ErrInvalidIntent", err)
			}
			var fe *ledger.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a *ledger.FieldError", err)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q (%v), want %q", fe.Field, err, tc.field)
			}
			if got := errors.Is(err, intent.ErrUnsupportedVersion); got != tc.version {
				t.Errorf("errors.Is(ErrUnsupportedVersion) = %v, want %v", got, tc.version)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "@") {
				t.Errorf("error echoes input: %q", err)
			}
		})
	}
}

func TestEncodeRejectsInvalid(t *testing.T) {
	in := testIntent(t)
	in.DestinationRef = "player@example.test"
	if _, err := intent.Encode(in, testEnvelope, testSeal); !errors.Is(err, ledger.ErrInvalidIntent) {
		t.Errorf("Encode(bad destination_ref) = %v, want ErrInvalidIntent", err)
	}
	env := testEnvelope
	env.Nonce = nil
	var fe *ledger.FieldError
	if _, err := intent.Encode(testIntent(t), env, testSeal); !errors.As(err, &fe) || fe.Field != "sealed_content.nonce" {
		t.Errorf("Encode(no nonce) = %v, want a field error on sealed_content.nonce", err)
	}
	in = testIntent(t)
	in.SubjectRef = "player@example.test"
	if _, err := intent.Encode(in, testEnvelope, testSeal); !errors.As(err, &fe) || fe.Field != "subject_ref" {
		t.Errorf("Encode(bad subject_ref) = %v, want a field error on subject_ref", err)
	}
	in = testIntent(t)
	in.ExpiresAt = time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -2*3600))
	if _, err := intent.Encode(in, testEnvelope, testSeal); !errors.As(err, &fe) || fe.Field != "expires_at" {
		t.Errorf("Encode(expiry past year 9999) = %v, want a field error on expires_at", err)
	}
}

func FuzzDecode(f *testing.F) {
	valid := marshal(f, validDoc(f))
	f.Add(valid)
	doc := validDoc(f)
	doc["workflow"] = map[string]any{"kind": "fallback", "order": []any{"email", "sms"}}
	doc["expires_at"] = "2026-11-30T09:10:00.123456789-07:30"
	f.Add(marshal(f, doc))
	doc = validDoc(f)
	doc["subject_ref"] = "tenant-7:acct_1001.eu"
	f.Add(marshal(f, doc))
	for _, tc := range badCases() {
		if tc.name != "oversized payload" && tc.name != "oversized whitespace" {
			f.Add(tc.body(f))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		dec, err := intent.Decode(body)
		in, sealed := dec.Intent, dec.Sealed
		if err != nil {
			if !errors.Is(err, ledger.ErrInvalidIntent) {
				t.Fatalf("rejection %q does not wrap ErrInvalidIntent", err)
			}
			return
		}
		env, err := envelope.ParseStored(sealed)
		if err != nil {
			t.Fatalf("accepted sealed content does not parse: %v", err)
		}
		if dec.Version != intent.SchemaVersion {
			return // Encode writes version 3 only
		}
		again, err := intent.Encode(in, env, dec.Seal)
		if err != nil {
			t.Fatalf("accepted intent does not encode: %v", err)
		}
		dec2, err := intent.Decode(again)
		in2, sealed2 := dec2.Intent, dec2.Sealed
		if err != nil {
			t.Fatalf("re-encoded intent does not decode: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(in, in2) {
			t.Fatalf("round trip changed the intent:\n%+v\n%+v", in, in2)
		}
		if !bytes.Equal(sealed, sealed2) {
			t.Fatalf("round trip changed the sealed content:\n%s\n%s", sealed, sealed2)
		}
	})
}

// TestBindingCoversTheEnvelope: the version 3 binding ends with the
// envelope's digest, so a copy whose sealed_content differs in any member
// (one bit of ct, edk or the nonce, another key id, the other envelope
// version) decodes to another binding, which the seal does not verify;
// the same body relabelled version 2 decodes to the version 2 binding,
// which binds no envelope.
func TestBindingCoversTheEnvelope(t *testing.T) {
	in := testIntent(t)
	genuine, err := intent.Binding(in, testEnvelope)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := intent.Encode(in, testEnvelope, testSeal)
	dec, err := intent.Decode(body)
	if err != nil || !bytes.Equal(dec.Binding, genuine) || dec.Version != intent.SchemaVersion {
		t.Fatalf("Decode: version %d, binding %q (%v), want Binding's", dec.Version, dec.Binding, err)
	}
	wantTail := "\nenvelope:64:" + testEnvelope.Digest() + "\n"
	if !bytes.HasPrefix(genuine, []byte(intent.BindingDomain+"\nschema_version:1:3\n")) || !bytes.HasSuffix(genuine, []byte(wantTail)) {
		t.Fatalf("binding does not open with the version 3 domain or end with the envelope digest:\n%s", genuine)
	}
	flip := func(b []byte) []byte { c := bytes.Clone(b); c[len(c)/2] ^= 0x01; return c }
	for name, edit := range map[string]func(e *envelope.Envelope){
		"one bit of ct":      func(e *envelope.Envelope) { e.CT = flip(e.CT) },
		"one bit of edk":     func(e *envelope.Envelope) { e.EDK = flip(e.EDK) },
		"one bit of nonce":   func(e *envelope.Envelope) { e.Nonce = flip(e.Nonce) },
		"another key id":     func(e *envelope.Envelope) { e.KMSKeyID += "0" },
		"envelope version 1": func(e *envelope.Envelope) { e.V = envelope.VersionUncompressed },
		"ct one byte longer": func(e *envelope.Envelope) { e.CT = append(bytes.Clone(e.CT), 0) },
	} {
		t.Run(name, func(t *testing.T) {
			env := testEnvelope
			edit(&env)
			// The copy keeps the genuine fields and intent_mac; only its
			// sealed_content differs.
			doc := validDoc(t)
			raw, _ := env.Marshal()
			var sc map[string]any
			_ = json.Unmarshal(raw, &sc)
			doc["sealed_content"] = sc
			dec, err := intent.Decode(marshal(t, doc))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if bytes.Equal(dec.Binding, genuine) || dec.Seal != testSeal {
				t.Fatalf("a copy with %s decodes to the genuine binding", name)
			}
			if b, _ := intent.Binding(in, env); !bytes.Equal(b, dec.Binding) {
				t.Fatalf("Decode's binding is not Binding's for the changed envelope")
			}
		})
	}
	doc := validDoc(t)
	doc["schema_version"] = 2
	dec, err = intent.Decode(marshal(t, doc))
	if err != nil || dec.Version != intent.SchemaVersionV2 {
		t.Fatalf("version 2: %d %v", dec.Version, err)
	}
	if !bytes.HasPrefix(dec.Binding, []byte(intent.BindingDomainV2+"\nschema_version:1:2\n")) || bytes.Contains(dec.Binding, []byte("\nenvelope:")) ||
		!bytes.HasSuffix(dec.Binding, []byte("\ncontent_hash:64:"+in.ContentHash+"\n")) {
		t.Fatalf("version 2 binding:\n%s", dec.Binding)
	}
}
