// Package operatorapi is the wire format of the operator function
// (functions/operate): the JSON request ledgerctl posts to its function URL,
// signed with the caller's AWS credentials, and the JSON answer.
//
// The request names the action and its arguments only. It carries no
// identity: the function takes the caller from the request context AWS
// builds after authenticating the SigV4 signature (the function URL's
// AWS_IAM auth), and a body that names one is refused as an unknown field.
package operatorapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Actions.
const (
	// ActionResolve records an operator's decision on an unknown or
	// quarantined row (resolve.Resolver.Resolve).
	ActionResolve = "resolve"
)

// MaxBody is the largest request body the function reads, in bytes: a
// resolve with every field at its longest fits in well under half of it.
const MaxBody = 4096

// MaxNote is the longest note, in bytes. The ledger refuses a recorded
// reason (the reason and the note together) longer than 500 bytes.
const MaxNote = 200

// WorkerPrefix starts the worker of every entry the operator function
// records; the caller's principal ARN, as AWS authenticated it, follows.
const WorkerPrefix = "operator:"

// Request is one operator action.
type Request struct {
	Action    string `json:"action"`
	DedupeKey string `json:"dedupe_key"`
	// Decision is accepted, rejected or abandoned.
	Decision string `json:"decision"`
	// Reason is why, in the operator's words.
	Reason string `json:"reason"`
	// Evidence is the transport's acknowledgement or reference (required
	// for accepted and rejected, refused for abandoned).
	Evidence string `json:"evidence,omitempty"`
	// Note is free text (a ticket, who asked) appended to the recorded
	// reason; it never names the operator.
	Note string `json:"note,omitempty"`
}

// ErrRequest reports a request the function refuses as malformed; the
// wrapping error says which field and why, never quoting its value.
var ErrRequest = errors.New("operatorapi: bad request")

func bad(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRequest}, args...)...)
}

// Decode reads one request from body: at most MaxBody bytes, one JSON
// object, known fields only, then Validate. It trims the text fields.
func Decode(body []byte) (Request, error) {
	if len(body) > MaxBody {
		return Request{}, bad("body larger than %d bytes", MaxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ):
			return Request{}, bad("field %q: want a string", typ.Field)
		case errors.As(err, &syntax), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return Request{}, bad("body is not one JSON object")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			// The only error DisallowUnknownFields returns; its text
			// names the field, which the client chose.
			return Request{}, bad("%s (the caller's identity is never taken from the body)", strings.TrimPrefix(err.Error(), "json: "))
		default:
			return Request{}, bad("body is not one JSON object")
		}
	}
	if dec.More() {
		return Request{}, bad("body holds more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Request{}, bad("body holds more than one JSON value")
	}
	r.Action, r.DedupeKey, r.Decision = strings.TrimSpace(r.Action), strings.TrimSpace(r.DedupeKey), strings.TrimSpace(r.Decision)
	r.Reason, r.Evidence, r.Note = strings.TrimSpace(r.Reason), strings.TrimSpace(r.Evidence), strings.TrimSpace(r.Note)
	return r, r.Validate()
}

// Validate applies the rules ledgerctl resolve has always applied before
// writing: a known action, a dedupe key, a decision with evidence where it
// needs one, a reason, and free text without control characters. The
// ledger checks the recorded reason again (addresses, phone numbers, 500
// bytes).
func (r Request) Validate() error {
	if r.Action != ActionResolve {
		if r.Action == "" {
			return bad("action is required (%s)", ActionResolve)
		}
		return bad("unknown action (want %s)", ActionResolve)
	}
	if !ledger.IsDedupeKey(r.DedupeKey) {
		return bad("dedupe_key: want 64 lowercase hex characters")
	}
	switch ledger.Decision(r.Decision) {
	case ledger.DecideAccepted, ledger.DecideRejected:
		if r.Evidence == "" {
			return bad("decision %s needs evidence: the transport's acknowledgement or reference (without evidence, decide abandoned)", r.Decision)
		}
	case ledger.DecideAbandoned:
		if r.Evidence != "" {
			return bad("decision abandoned takes no evidence: with transport evidence, decide accepted or rejected")
		}
	case "":
		return bad("decision is required (accepted, rejected or abandoned)")
	default:
		return bad("decision: want accepted, rejected or abandoned")
	}
	if r.Reason == "" {
		return bad("reason is required: it is recorded as the decision's reason")
	}
	if err := CheckText(r.Reason, 0); err != nil {
		return bad("reason: %v", err)
	}
	if err := CheckText(r.Evidence, 0); err != nil {
		return bad("evidence: %v", err)
	}
	if err := CheckText(r.Note, MaxNote); err != nil {
		return bad("note: %v", err)
	}
	return nil
}

// RecordedReason is the reason the ledger records: the reason, then the
// note if there is one ("<reason>; note: <note>").
func (r Request) RecordedReason() string {
	if r.Note == "" {
		return r.Reason
	}
	return r.Reason + "; note: " + r.Note
}

// CheckText refuses operator free text that is not valid UTF-8, holds a
// control or format character (line breaks, escapes, bidirectional
// overrides: anything that could forge or hide text in a log line or a
// terminal), or is longer than max bytes (0: no limit here).
func CheckText(s string, max int) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if max > 0 && len(s) > max {
		return fmt.Errorf("too long (%d bytes at most)", max)
	}
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("contains a control character (%U)", r)
		}
	}
	return nil
}

// Error codes of a refused request (Response.Code).
const (
	CodeUnauthenticated = "unauthenticated" // no IAM identity in the request context (403)
	CodeBadRequest      = "bad_request"     // malformed or invalid request (400)
	CodeInvalidField    = "invalid_field"   // the ledger refused a field (400)
	CodeNotFound        = "not_found"       // no row with the key (404)
	CodeNotResolvable   = "not_resolvable"  // the row is in no state to be resolved (409)
	CodeConflict        = "conflict"        // the row changed while resolving it (409)
	CodeInternal        = "internal"        // anything else (500)
)

// Response is the function's answer. A refusal has Code and Error (and,
// for CodeNotResolvable, State: the row's state); a success the row and
// the entry recorded.
type Response struct {
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
	// Field is the field the ledger refused (CodeInvalidField).
	Field string `json:"field,omitempty"`

	DedupeKey   string `json:"dedupe_key,omitempty"`
	ChallengeID string `json:"challenge_id,omitempty"`
	Channel     string `json:"channel,omitempty"`
	State       string `json:"state,omitempty"`
	// Entry is the history entry recorded; Index is its place in the history.
	Entry *Entry `json:"entry,omitempty"`
}

// Entry is a recorded history entry.
type Entry struct {
	Index         int       `json:"index"`
	ID            string    `json:"id"`
	Kind          string    `json:"kind"`
	From          string    `json:"from"`
	To            string    `json:"to"`
	At            time.Time `json:"at"`
	Worker        string    `json:"worker"`
	Reason        string    `json:"reason,omitempty"`
	PolicyVersion string    `json:"policy_version"`
	Attempt       int       `json:"attempt"`
	AckID         string    `json:"ack_id,omitempty"`
}

// NewEntry is the wire form of the i-th entry ev.
func NewEntry(i int, ev ledger.Event) *Entry {
	return &Entry{
		Index: i, ID: ev.ID, Kind: string(ev.Kind), From: ev.From.String(), To: ev.To.String(), At: ev.At.UTC(),
		Worker: ev.Worker, Reason: ev.Reason, PolicyVersion: ev.PolicyVersion, Attempt: ev.Attempt, AckID: ev.AckID,
	}
}
