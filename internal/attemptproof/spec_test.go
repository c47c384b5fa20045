package attemptproof_test

import (
	"context"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// specDoc is the specification whose part 3 defines the attempt proof.
const specDoc = "../../docs/intent-v2.md"

// specVector reads the test vector of specDoc §3.2: the first fenced block
// under its heading, one field per line ("name value [comment]"), a line
// that starts with a space continuing the field above it. A field's value
// is the first word of each of its lines, joined.
func specVector(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(specDoc)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n### 3.2 Test vector\n")
	if !ok {
		t.Fatalf("%s has no §3.2 Test vector", specDoc)
	}
	_, block, ok := strings.Cut(section, "\n```\n")
	if block, _, ok = strings.Cut(block, "\n```\n"); !ok {
		t.Fatalf("%s §3.2 has no fenced block", specDoc)
	}
	fields, name := map[string]string{}, ""
	for _, line := range strings.Split(block, "\n") {
		words := strings.Fields(line)
		switch {
		case len(words) == 0:
		case !strings.HasPrefix(line, " "):
			if len(words) < 2 {
				t.Fatalf("%s §3.2: %q has a name and no value", specDoc, line)
			}
			name = words[0]
			if _, dup := fields[name]; dup {
				t.Fatalf("%s §3.2: %s twice", specDoc, name)
			}
			fields[name] = words[1]
		case name == "":
			t.Fatalf("%s §3.2: %q continues no field", specDoc, line)
		default:
			fields[name] += words[0]
		}
	}
	for _, name := range []string{"key", "channel", "dedupe_key", "attempt", "message", "mac", "proof"} {
		if fields[name] == "" {
			t.Fatalf("%s §3.2 has no %s", specDoc, name)
		}
	}
	return fields
}

// TestSpecVector: the proof the specification's vector gives is the one
// this package computes from the vector's inputs, through the message, the
// MAC and its encoding, and it verifies; so the text and the code agree.
func TestSpecVector(t *testing.T) {
	v := specVector(t)
	key, err := hex.DecodeString(v["key"])
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	n, err := strconv.Atoi(v["attempt"])
	if err != nil {
		t.Fatalf("attempt: %v", err)
	}
	a := ledger.AttemptRef{Key: v["dedupe_key"], Channel: ledger.Channel(v["channel"]), Attempt: n}
	if got := hex.EncodeToString(attemptproof.Message(a)); got != v["message"] {
		t.Errorf("message = %s, the specification says %s", got, v["message"])
	}
	p := &attemptproof.Local{Key: key}
	proof, err := p.Sign(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if proof != v["proof"] {
		t.Errorf("proof = %s, the specification says %s", proof, v["proof"])
	}
	if mac, _ := hex.DecodeString(v["mac"]); attemptproof.Encode(mac) != v["proof"] {
		t.Errorf("the specification's mac %s does not encode to its proof %s", v["mac"], v["proof"])
	}
	if err := p.Verify(context.Background(), a, v["proof"]); err != nil {
		t.Errorf("the specification's proof does not verify: %v", err)
	}
}
