// Package intent is the wire format of a notification intent: the SQS
// message body the account service publishes and the claim function reads.
// schema/intent-v3.schema.json describes the same document (and
// schema/intent-v2.schema.json and schema/intent-v1.schema.json the
// versions before it).
//
// Decode is strict. It accepts one JSON object of at most MaxBodySize bytes
// with exactly the known fields of its schema_version (exact spelling, no
// duplicates, no unknown ones, no trailing data; all required but the
// optional subject_ref), then runs ledger.Intent.Validate. Every rejection
// is a *ledger.FieldError naming the JSON field (so errors.Is(err,
// ledger.ErrInvalidIntent) holds); an unknown schema_version also wraps
// ErrUnsupportedVersion. No error message contains an input value: the body
// may carry secrets in the wrong field.
//
// Version 2 adds issued_at (when the account service issued the
// challenge) and intent_mac: the producer's seal (package intentseal) over
// Binding, every field the claim decides on. Version 3 has the same members
// and binds the envelope too (its Digest), so that a copy whose
// sealed_content was changed fails the seal before any row exists, rather
// than being claimed and then quarantined, blocking the genuine intent.
// Decode does not check the seal (it needs the key); it returns the binding
// for the caller to verify before anything is written.
package intent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/envelope/wireform"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// SchemaVersion is the version Encode writes: 3, its seal over the
// fields and the envelope.
const SchemaVersion = 3

// SchemaVersionV2 is the version before it: the same members, its seal
// over the fields but not the envelope, so a copy with a changed envelope
// is claimed (and then quarantined at dispatch), blocking the genuine
// intent. Decode reads it; the claim function accepts it only where the
// stage allows (ACCEPT_INTENT_V2), during a migration.
const SchemaVersionV2 = 2

// SchemaVersionV1 is the version before it: no issued_at and nothing
// sealed but the content. Decode reads it; the claim function accepts it
// only where the stage allows (ACCEPT_INTENT_V1), during a migration.
const SchemaVersionV1 = 1

// MaxBodySize is the largest body Decode accepts, in bytes (64 KiB).
const MaxBodySize = 64 << 10

// maxDepth bounds JSON nesting; a valid intent nests three deep.
const maxDepth = 8

// ErrUnsupportedVersion reports a schema_version this build does not know.
// It comes wrapped together with a *ledger.FieldError for schema_version.
var ErrUnsupportedVersion = errors.New("intent: unsupported schema_version")

// wire is the JSON document. Field order is the encoding order.
type wire struct {
	SchemaVersion   int               `json:"schema_version"`
	Purpose         string            `json:"purpose"`
	ChallengeID     string            `json:"challenge_id"`
	Channel         string            `json:"channel"`
	Workflow        wireWorkflow      `json:"workflow"`
	DestinationRef  string            `json:"destination_ref"`
	SubjectRef      string            `json:"subject_ref,omitempty"`
	IssuedAt        string            `json:"issued_at,omitempty"`
	ExpiresAt       string            `json:"expires_at"`
	TemplateID      string            `json:"template_id"`
	TemplateVersion string            `json:"template_version"`
	PolicyVersion   string            `json:"policy_version"`
	ContentHash     string            `json:"content_hash"`
	SealedContent   wireform.Envelope `json:"sealed_content"`
	IntentMAC       string            `json:"intent_mac,omitempty"`
}

type wireWorkflow struct {
	Kind  string   `json:"kind"`
	Order []string `json:"order,omitempty"`
}

// shape lists the fields of each object Decode checks by name; a nil shape
// admits any keys (the envelope checks its own).
type shape map[string]shape

var rootShapeV1 = shape{
	"schema_version": nil, "purpose": nil, "challenge_id": nil, "channel": nil,
	"workflow":        {"kind": nil, "order": nil},
	"destination_ref": nil, "subject_ref": nil, "expires_at": nil, "template_id": nil,
	"template_version": nil, "policy_version": nil, "content_hash": nil,
	"sealed_content": nil,
}

var rootShape = func() shape {
	sh := shape{"issued_at": nil, "intent_mac": nil}
	for k, v := range rootShapeV1 {
		sh[k] = v
	}
	return sh
}()

// RequiredFields returns the top-level fields every version 3 (and
// version 2) intent must carry, in wire order.
func RequiredFields() []string {
	return []string{"schema_version", "purpose", "challenge_id", "channel", "workflow",
		"destination_ref", "issued_at", "expires_at", "template_id", "template_version",
		"policy_version", "content_hash", "sealed_content", "intent_mac"}
}

// RequiredFieldsV1 returns the top-level fields a version 1 intent must
// carry, in wire order.
func RequiredFieldsV1() []string {
	return []string{"schema_version", "purpose", "challenge_id", "channel", "workflow",
		"destination_ref", "expires_at", "template_id", "template_version",
		"policy_version", "content_hash", "sealed_content"}
}

// OptionalFields returns the top-level fields an intent may leave out, in
// wire order: subject_ref, which producers omit when there is no subject.
func OptionalFields() []string { return []string{"subject_ref"} }

// Decoded is an intent as Decode read it.
type Decoded struct {
	// Intent is the validated intent; IssuedAt is zero for version 1.
	Intent ledger.Intent
	// Sealed is the sealed content in its compact stored form
	// (wireform.Envelope.MarshalStored), ready for a ledger.ContentStore and
	// an envelope.Opener; about three quarters of the JSON form's size.
	Sealed []byte
	// Dict is the envelope's dictionary id (envelope version 3), empty
	// when it names none: the claim function refuses one its stage lacks.
	Dict string
	// Version is the intent's schema_version: SchemaVersion,
	// SchemaVersionV2 or SchemaVersionV1.
	Version int
	// Binding is what intent_mac must seal (see Binding; for version 2,
	// the version 2 layout, without the envelope); Seal is intent_mac.
	// Both are empty for version 1, which seals nothing.
	Binding []byte
	Seal    string
}

// Decode parses and validates an intent of any of the three versions. It does not
// verify the seal: the caller verifies Decoded.Seal over Decoded.Binding
// (intentseal.Verifier) before acting on the intent.
func Decode(body []byte) (Decoded, error) {
	raw, version, err := decodeObject(body)
	if err != nil {
		return Decoded{}, err
	}
	w, err := decodeFields(raw, version)
	if err != nil {
		return Decoded{}, err
	}
	expires, err := parseTime("expires_at", w.ExpiresAt)
	if err != nil {
		return Decoded{}, err
	}
	var issued time.Time
	if version != SchemaVersionV1 {
		if issued, err = parseTime("issued_at", w.IssuedAt); err != nil {
			return Decoded{}, err
		}
	}
	sealedRaw, ok := raw["sealed_content"]
	if !ok {
		return Decoded{}, bad("sealed_content", "missing")
	}
	env, err := wireform.Parse(sealedRaw)
	if err != nil {
		return Decoded{}, prefix("sealed_content", err)
	}
	if version != SchemaVersionV1 {
		if err := field(raw, "intent_mac", &w.IntentMAC, "want a string"); err != nil {
			return Decoded{}, err
		}
		if w.IntentMAC == "" {
			return Decoded{}, bad("intent_mac", "empty")
		}
	}
	in := w.intent(issued, expires)
	if err := validate(in); err != nil {
		return Decoded{}, err
	}
	sealed, err := env.MarshalStored()
	if err != nil {
		return Decoded{}, fmt.Errorf("intent: store sealed content: %w", err)
	}
	d := Decoded{Intent: in, Sealed: sealed, Dict: env.Dict, Version: version}
	if version != SchemaVersionV1 {
		w.SchemaVersion = version
		d.Binding, d.Seal = w.binding(in.Key(), env), w.IntentMAC
	}
	return d, nil
}

// parseTime reads an RFC 3339 timestamp field.
func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, bad(name, "not an RFC 3339 timestamp")
	}
	return t, nil
}

// BindingDomain opens every version 3 binding: it separates intent seals
// from any other use of the key, and names the layout's version.
const BindingDomain = "resetledger-intent-binding/v3"

// BindingDomainV2 opens a version 2 binding, which binds no envelope.
const BindingDomainV2 = "resetledger-intent-binding/v2"

// bindingFieldsV2 names the fields a version 2 binding binds, in order;
// version 3 binds them and then envelope, the envelope's Digest.
var bindingFieldsV2 = []string{"schema_version", "purpose", "challenge_id", "channel", "dedupe_key",
	"workflow.kind", "workflow.order", "destination_ref", "subject_ref", "issued_at", "expires_at",
	"template_id", "template_version", "policy_version", "content_hash"}

// BindingFields returns the names of the fields a version 3 binding
// binds, in order: the version 2 fields, then envelope.
func BindingFields() []string { return append(slices.Clone(bindingFieldsV2), "envelope") }

// binding is the byte string intent_mac seals: the version's domain line
// (BindingDomain, or BindingDomainV2 for version 2) and a line feed, then
// for each bound field "<name>:<length>:<value>\n", the length in bytes in
// decimal, the value as it is on the wire (timestamps included, exactly as
// written; workflow.order its channels joined by commas; subject_ref and
// workflow.order empty when absent; dedupe_key the key the intent's
// identity gives) and, for version 3, last, envelope: the envelope's
// Digest. The lengths make it unambiguous whatever a value holds.
func (w wire) binding(dedupeKey string, env wireform.Envelope) []byte {
	values := []string{strconv.Itoa(w.SchemaVersion), w.Purpose, w.ChallengeID, w.Channel, dedupeKey,
		w.Workflow.Kind, strings.Join(w.Workflow.Order, ","), w.DestinationRef, w.SubjectRef, w.IssuedAt, w.ExpiresAt,
		w.TemplateID, w.TemplateVersion, w.PolicyVersion, w.ContentHash}
	names, domain := bindingFieldsV2, BindingDomainV2
	if w.SchemaVersion != SchemaVersionV2 {
		names, domain = BindingFields(), BindingDomain
		values = append(values, env.Digest())
	}
	var b bytes.Buffer
	b.WriteString(domain + "\n")
	for i, name := range names {
		fmt.Fprintf(&b, "%s:%d:%s\n", name, len(values[i]), values[i])
	}
	return b.Bytes()
}

// Binding returns what intent_mac must seal for in with its sealed
// content sealed, as Encode will write it: the producer seals the content
// first, then this (intentseal.Signer), and passes both to Encode. It
// validates in and sealed first.
func Binding(in ledger.Intent, sealed wireform.Envelope) ([]byte, error) {
	if err := Check(in); err != nil {
		return nil, err
	}
	if err := sealed.Validate(); err != nil {
		return nil, prefix("sealed_content", err)
	}
	return toWire(in).binding(in.Key(), sealed), nil
}

// decodeObject checks the body's size and structure (see checkStructure)
// and its schema version, and returns its top-level fields undecoded.
func decodeObject(body []byte) (map[string]json.RawMessage, int, error) {
	if len(body) > MaxBodySize {
		return nil, 0, bad("body", fmt.Sprintf("larger than %d bytes", MaxBodySize))
	}
	// The version first, from a lenient read, so that the structure is
	// checked against its own version's fields.
	var probe struct {
		V json.RawMessage `json:"schema_version"`
	}
	_ = json.Unmarshal(body, &probe)
	sh := rootShape
	if string(bytes.TrimSpace(probe.V)) == "1" {
		sh = rootShapeV1
	}
	if err := checkStructure(body, sh); err != nil {
		return nil, 0, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, 0, bad("body", "malformed JSON")
	}
	var version json.Number
	if err := field(raw, "schema_version", &version, "want an integer"); err != nil {
		return nil, 0, err
	}
	switch version.String() {
	case "3":
		return raw, SchemaVersion, nil
	case "2":
		return raw, SchemaVersionV2, nil
	case "1":
		return raw, SchemaVersionV1, nil
	}
	return nil, 0, fmt.Errorf("%w: %w", ErrUnsupportedVersion,
		bad("schema_version", "unsupported version (want 3, or 2 or 1 where the stage accepts it)"))
}

// decodeFields decodes the string fields and the workflow, in wire order,
// so that the first bad field is the one reported.
func decodeFields(raw map[string]json.RawMessage, version int) (wire, error) {
	w := wire{SchemaVersion: version}
	if err := decodeStrings(raw, stringField{"purpose", &w.Purpose},
		stringField{"challenge_id", &w.ChallengeID}, stringField{"channel", &w.Channel}); err != nil {
		return w, err
	}
	if err := decodeWorkflow(raw, &w.Workflow); err != nil {
		return w, err
	}
	if err := decodeStrings(raw, stringField{"destination_ref", &w.DestinationRef}); err != nil {
		return w, err
	}
	if err := decodeSubjectRef(raw, &w.SubjectRef); err != nil {
		return w, err
	}
	if version != SchemaVersionV1 {
		if err := decodeStrings(raw, stringField{"issued_at", &w.IssuedAt}); err != nil {
			return w, err
		}
	}
	err := decodeStrings(raw, stringField{"expires_at", &w.ExpiresAt},
		stringField{"template_id", &w.TemplateID}, stringField{"template_version", &w.TemplateVersion},
		stringField{"policy_version", &w.PolicyVersion}, stringField{"content_hash", &w.ContentHash})
	return w, err
}

// decodeSubjectRef decodes the optional subject_ref: absent is none, but a
// member that is present must be a non-empty string (a producer with no
// subject leaves it out; "" or null is refused, not read as none).
func decodeSubjectRef(raw map[string]json.RawMessage, dst *string) error {
	if _, ok := raw["subject_ref"]; !ok {
		return nil
	}
	if err := field(raw, "subject_ref", dst, "want a string"); err != nil {
		return err
	}
	if *dst == "" {
		return bad("subject_ref", "empty (leave the member out when there is no subject)")
	}
	return nil
}

// stringField is a top-level string field and where it decodes to.
type stringField struct {
	name string
	dst  *string
}

// decodeStrings decodes fields in order and returns the first error.
func decodeStrings(raw map[string]json.RawMessage, fields ...stringField) error {
	for _, f := range fields {
		if err := field(raw, f.name, f.dst, "want a string"); err != nil {
			return err
		}
	}
	return nil
}

// intent converts the decoded wire fields to a ledger.Intent (not yet
// validated) with the parsed times.
func (w wire) intent(issued, expires time.Time) ledger.Intent {
	in := ledger.Intent{
		Identity: ledger.Identity{
			Purpose:     ledger.Purpose(w.Purpose),
			ChallengeID: w.ChallengeID,
			Channel:     ledger.Channel(w.Channel),
		},
		Workflow:        ledger.Workflow{Kind: ledger.WorkflowKind(w.Workflow.Kind)},
		DestinationRef:  w.DestinationRef,
		SubjectRef:      w.SubjectRef,
		IssuedAt:        issued.UTC(),
		ExpiresAt:       expires.UTC(),
		TemplateID:      w.TemplateID,
		TemplateVersion: w.TemplateVersion,
		PolicyVersion:   w.PolicyVersion,
		ContentHash:     w.ContentHash,
	}
	for _, c := range w.Workflow.Order {
		in.Workflow.Order = append(in.Workflow.Order, ledger.Channel(c))
	}
	return in
}

// Encode returns the version 3 wire form of in with its sealed content
// and seal (the intentseal seal of Binding(in, sealed)). It validates all three
// first, so whatever Encode returns, Decode accepts; it cannot check that
// the seal is Binding(in)'s: only the key can.
func Encode(in ledger.Intent, sealed wireform.Envelope, seal string) ([]byte, error) {
	if err := Check(in); err != nil {
		return nil, err
	}
	if err := sealed.Validate(); err != nil {
		return nil, prefix("sealed_content", err)
	}
	if seal == "" {
		return nil, bad("intent_mac", "empty")
	}
	w := toWire(in)
	w.SealedContent, w.IntentMAC = sealed, seal
	return json.Marshal(w)
}

// toWire is in's wire fields, without the sealed content and the seal.
func toWire(in ledger.Intent) wire {
	w := wire{
		SchemaVersion:   SchemaVersion,
		Purpose:         string(in.Purpose),
		ChallengeID:     in.ChallengeID,
		Channel:         string(in.Channel),
		Workflow:        wireWorkflow{Kind: string(in.Workflow.Kind)},
		DestinationRef:  in.DestinationRef,
		SubjectRef:      in.SubjectRef,
		IssuedAt:        in.IssuedAt.UTC().Format(time.RFC3339Nano),
		ExpiresAt:       in.ExpiresAt.UTC().Format(time.RFC3339Nano),
		TemplateID:      in.TemplateID,
		TemplateVersion: in.TemplateVersion,
		PolicyVersion:   in.PolicyVersion,
		ContentHash:     in.ContentHash,
	}
	for _, c := range in.Workflow.Order {
		w.Workflow.Order = append(w.Workflow.Order, string(c))
	}
	return w
}

// validate is ledger.Intent.Validate (which also checks that every
// workflow.order entry is a known channel, listed once, whatever the kind)
// plus the check only the wire needs: the times are ones RFC 3339 can
// carry.
func validate(in ledger.Intent) error {
	if err := in.Identity.Validate(); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"issued_at", in.IssuedAt}, {"expires_at", in.ExpiresAt}} {
		if f.t.IsZero() {
			continue
		}
		if y := f.t.UTC().Year(); y < 1 || y > 9999 {
			return bad(f.name, "year outside 0001..9999")
		}
	}
	return in.Validate()
}

// Check validates in as Encode and Binding will: ledger.Intent.Validate,
// times RFC 3339 can carry, and an issued_at (required since version 2).
// A producer calls it before any AWS call.
func Check(in ledger.Intent) error {
	if err := validate(in); err != nil {
		return err
	}
	if in.IssuedAt.IsZero() {
		return bad("issued_at", "missing")
	}
	return nil
}

func decodeWorkflow(raw map[string]json.RawMessage, dst *wireWorkflow) error {
	v, ok := raw["workflow"]
	if !ok {
		return bad("workflow", "missing")
	}
	var obj map[string]json.RawMessage
	if isNull(v) || json.Unmarshal(v, &obj) != nil {
		return bad("workflow", "want an object")
	}
	if err := field(obj, "kind", &dst.Kind, "want a string"); err != nil {
		return prefix("workflow", err)
	}
	if o, ok := obj["order"]; ok {
		if isNull(o) || json.Unmarshal(o, &dst.Order) != nil {
			return bad("workflow.order", "want an array of strings")
		}
		if len(dst.Order) == 0 {
			dst.Order = nil
		}
	}
	return nil
}

// field decodes raw[name] into dst. A missing field, null or a wrong type is
// a *ledger.FieldError; the decoder's own message is dropped because it can
// quote the input.
func field(raw map[string]json.RawMessage, name string, dst any, want string) error {
	v, ok := raw[name]
	if !ok {
		return bad(name, "missing")
	}
	if isNull(v) {
		return bad(name, want)
	}
	if n, isNum := dst.(*json.Number); isNum {
		// Only a JSON number literal fits; json.Number alone would also
		// take a string.
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if dec.Decode(&x) != nil {
			return bad(name, want)
		}
		num, ok := x.(json.Number)
		if !ok {
			return bad(name, want)
		}
		*n = num
		return nil
	}
	if json.Unmarshal(v, dst) != nil {
		return bad(name, want)
	}
	return nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// checkStructure walks the document's tokens: one JSON object, nothing after
// it, no duplicate keys anywhere, and only the known keys, spelled exactly,
// in the objects rootShape names. encoding/json alone would match keys case
// insensitively and let a duplicate key override the first.
func checkStructure(body []byte, root shape) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return malformed(dec)
	}
	if tok != json.Delim('{') {
		return bad("body", "not a JSON object")
	}
	if err := walkObject(dec, root, "body", 1); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad("body", "trailing data after the JSON object")
	}
	return nil
}

// walkObject consumes an object's members after its '{'.
func walkObject(dec *json.Decoder, sh shape, path string, depth int) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return malformed(dec)
		}
		k, _ := tok.(string)
		if seen[k] {
			return bad(path, "duplicate field")
		}
		seen[k] = true
		var child shape
		if sh != nil {
			c, ok := sh[k]
			if !ok {
				return bad(path, "unknown field")
			}
			child = c
		}
		childPath := k
		if path != "body" {
			childPath = path + "." + k
		}
		if err := walkValue(dec, child, childPath, depth); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return malformed(dec)
	}
	return nil
}

func walkValue(dec *json.Decoder, sh shape, path string, depth int) error {
	tok, err := dec.Token()
	if err != nil {
		return malformed(dec)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= maxDepth {
		return bad(path, "nested too deeply")
	}
	switch d {
	case '{':
		return walkObject(dec, sh, path, depth+1)
	case '[':
		for dec.More() {
			if err := walkValue(dec, nil, path, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil { // ']'
			return malformed(dec)
		}
	}
	return nil
}

func malformed(dec *json.Decoder) error {
	return bad("body", fmt.Sprintf("malformed JSON near byte %d", dec.InputOffset()))
}

func bad(field, reason string) error { return &ledger.FieldError{Field: field, Reason: reason} }

// prefix renames a *ledger.FieldError's field into the parent object.
func prefix(parent string, err error) error {
	var fe *ledger.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	name := parent
	if fe.Field != "" {
		name = parent + "." + fe.Field
	}
	return &ledger.FieldError{Field: name, Reason: fe.Reason}
}
