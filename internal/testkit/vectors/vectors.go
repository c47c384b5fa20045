// Package vectors reads and writes the cross-language test vectors in
// testdata/vectors: JSON files that pin the byte layouts of
// docs/intent-v2.md (dedupe key, content hash, sealed plaintext, envelope, its digest, the binding,
// intent body, history hash chain) so that a producer or verifier written in
// another language can be checked against the Go implementation.
//
// The Go tests that own a file generate its vectors from the real code and
// check the file against them, vector by vector, so a change to a layout
// fails them. After a deliberate change, rewrite the files with
//
//	VECTORS_UPDATE=1 go test ./pkg/envelope ./pkg/producer ./cmd/ledgerctl -run Vectors
//
// (make vectors) and review the diff: every other implementation must
// change with it.
package vectors

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// Dir is the vectors folder, found from the test's working directory (its
// package folder) by walking up to go.mod.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "testdata", "vectors")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("vectors: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Updating reports whether the tests should rewrite the files
// (VECTORS_UPDATE=1).
func Updating() bool { return os.Getenv("VECTORS_UPDATE") == "1" }

// Encode is the files' JSON form: two-space indentation, no HTML escaping
// (so the files show <, > and & as they are), a final newline.
func Encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Sync writes generated to the file name under Dir when Updating, and
// otherwise fails the test unless the file holds exactly generated. The
// caller checks the file's vectors one by one first, which names what
// differs; Sync also catches vectors added, removed or reordered.
func Sync(t testing.TB, name string, generated any) {
	t.Helper()
	want, err := Encode(generated)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(Dir(t), name)
	if Updating() {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it with VECTORS_UPDATE=1)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the Go implementation generates; if the change is deliberate, "+
			"rewrite it with VECTORS_UPDATE=1 (make vectors) and change every other implementation with it", path)
	}
}

// Load decodes the file name under Dir into v. While Updating, a missing
// file is not an error (v is left as is).
func Load(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), name))
	if err != nil {
		if Updating() && os.IsNotExist(err) {
			return
		}
		t.Fatalf("%v (generate it with VECTORS_UPDATE=1)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// Text is a string in a vector file: a JSON string, or {"repeat": s,
// "count": n} for s repeated n times (for the oversized inputs).
type Text struct {
	S string
	// Repeat and Count keep the short form when the file is written again.
	Repeat string
	Count  int
}

// Repeated returns s repeated n times, written in the short form.
func Repeated(s string, n int) Text {
	return Text{S: strings.Repeat(s, n), Repeat: s, Count: n}
}

// Plain returns s, written as a JSON string.
func Plain(s string) Text { return Text{S: s} }

// MarshalJSON implements json.Marshaler.
func (x Text) MarshalJSON() ([]byte, error) {
	if x.Count > 0 {
		return json.Marshal(struct {
			Repeat string `json:"repeat"`
			Count  int    `json:"count"`
		}{x.Repeat, x.Count})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x.S); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (x *Text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var r struct {
			Repeat string `json:"repeat"`
			Count  int    `json:"count"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		*x = Repeated(r.Repeat, r.Count)
		return nil
	}
	*x = Text{}
	return json.Unmarshal(b, &x.S)
}

// Message is a ledger.Message in a vector file.
type Message struct {
	To      Text `json:"to"`
	Subject Text `json:"subject"`
	Body    Text `json:"body"`
}

// Workflow is a ledger.Workflow in a vector file.
type Workflow struct {
	Kind  string   `json:"kind"`
	Order []string `json:"order,omitempty"`
}

// Notification is a producer.Notification in a vector file, in the intent's
// field names. IssuedAt and ExpiresAt are RFC 3339; empty means none (an
// empty issued_at means the producer's clock).
type Notification struct {
	ChallengeID     string   `json:"challenge_id"`
	Channel         string   `json:"channel"`
	Workflow        Workflow `json:"workflow"`
	DestinationRef  string   `json:"destination_ref"`
	SubjectRef      string   `json:"subject_ref,omitempty"`
	IssuedAt        string   `json:"issued_at,omitempty"`
	ExpiresAt       string   `json:"expires_at"`
	TemplateID      string   `json:"template_id"`
	TemplateVersion string   `json:"template_version"`
	PolicyVersion   string   `json:"policy_version"`
	Message         Message  `json:"message"`
}

// Producer returns n as the Go producer takes it.
func (n Notification) Producer() (producer.Notification, error) {
	p := producer.Notification{
		ChallengeID: n.ChallengeID, Channel: ledger.Channel(n.Channel),
		Workflow:       ledger.Workflow{Kind: ledger.WorkflowKind(n.Workflow.Kind)},
		DestinationRef: n.DestinationRef, SubjectRef: n.SubjectRef, TemplateID: n.TemplateID,
		TemplateVersion: n.TemplateVersion, PolicyVersion: n.PolicyVersion,
		Message: ledger.Message{To: n.Message.To.S, Subject: n.Message.Subject.S, Body: n.Message.Body.S},
	}
	for _, c := range n.Workflow.Order {
		p.Workflow.Order = append(p.Workflow.Order, ledger.Channel(c))
	}
	for _, f := range []struct {
		name, v string
		dst     *time.Time
	}{{"issued_at", n.IssuedAt, &p.IssuedAt}, {"expires_at", n.ExpiresAt, &p.ExpiresAt}} {
		if f.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, f.v)
		if err != nil {
			return p, fmt.Errorf("%s: %w", f.name, err)
		}
		*f.dst = t.UTC()
	}
	return p, nil
}

// Identity is the dedupe identity of n.
func (n Notification) Identity() ledger.Identity {
	return ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: ledger.Channel(n.Channel)}
}

// Noise returns n printable ASCII characters drawn from SHA-256 of seed and
// a counter: text that no DEFLATE implementation compresses much (about 6.5
// bits a character), with none of the characters JSON or the canonical
// plaintext escape (", \, <, >, &). The vectors use it where a size must
// hold whichever codec compressed the message.
func Noise(seed string, n int) string {
	const alphabet = "!#$%'()*+,-./0123456789:;=?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~"
	b := make([]byte, 0, n+32)
	for i := 0; len(b) < n; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s:%d", seed, i)))
		for _, c := range sum {
			b = append(b, alphabet[int(c)%len(alphabet)])
		}
	}
	return string(b[:n])
}
