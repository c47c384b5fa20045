package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// nodeProducer is the Node.js producer package, built by make node-producer.
var nodeProducer = filepath.Join("..", "producers", "node")

// nodeNotification is a notification as producers/node/examples/publish-json.mjs
// reads it: the package's Notification with expiresAt as RFC 3339.
type nodeNotification struct {
	ChallengeID     string  `json:"challengeId"`
	Channel         string  `json:"channel"`
	Workflow        any     `json:"workflow"`
	DestinationRef  string  `json:"destinationRef"`
	SubjectRef      string  `json:"subjectRef,omitempty"` // set by the Python producer's test only
	ExpiresAt       string  `json:"expiresAt"`
	TemplateID      string  `json:"templateId"`
	TemplateVersion string  `json:"templateVersion"`
	PolicyVersion   string  `json:"policyVersion"`
	Message         nodeMsg `json:"message"`
	want            ledger.State
	sends           int
	goKey, goHash   string
}

type nodeMsg struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body"`
}

// nodeResult is what the script prints for each notification.
type nodeResult struct {
	ChallengeID string `json:"challengeId"`
	Channel     string `json:"channel"`
	DedupeKey   string `json:"dedupeKey"`
	ContentHash string `json:"contentHash"`
	MessageID   string `json:"messageId"`
	Attempts    int    `json:"attempts"`
	Error       any    `json:"error"`
}

// TestNodeProducerEndToEnd publishes intents with the Node.js producer
// (producers/node, run with node as an account service would) to the
// deployed stack: an email, an SMS and a fallback pair (email then SMS).
// The dedupe keys and content hashes it reports must be the ones the Go code
// computes; the claim function must take each intent on its first receive;
// the email and the SMS must be accepted and sent once with the published
// content (captured by the emulator's SES and the local webhook provider);
// the fallback's SMS must end suppressed without a send when the fallback
// wait ends, its email having been accepted and never bounced; and
// `ledgerctl explain` must tell each challenge's story with a verified hash
// chain.
func TestNodeProducerEndToEnd(t *testing.T) {
	e := setup(t)
	required := os.Getenv("E2E_REQUIRED") == "1"
	node, err := exec.LookPath("node")
	script := filepath.Join(nodeProducer, "examples", "publish-json.mjs")
	if err == nil {
		_, err = os.Stat(filepath.Join(nodeProducer, "dist", "index.js"))
	}
	if err != nil {
		msg := fmt.Sprintf("the Node.js producer is not built (%v); run make node-producer", err)
		if required {
			t.Fatal(msg + " (E2E_REQUIRED=1)")
		}
		t.Skip(msg)
	}
	emulatorLog := e.markEmulatorLog(t)
	run := emulator.UniqueName(t, "node")
	start := time.Now()

	var tok [16]byte
	_, _ = rand.Read(tok[:])
	phone := number(t, "US")
	fallback := map[string]any{"kind": "fallback", "order": []string{"email", "sms"}}
	mk := func(challenge, ch string, wf any, to string, want ledger.State, sends int) nodeNotification {
		n := nodeNotification{
			ChallengeID: challenge, Channel: ch, Workflow: wf, DestinationRef: "node-e2e:" + ch,
			ExpiresAt:  time.Now().Add(10 * time.Minute).UTC().Truncate(time.Millisecond).Format(time.RFC3339Nano),
			TemplateID: "reset-" + ch, TemplateVersion: "1", PolicyVersion: ledger.DefaultPolicy().Version,
			Message: nodeMsg{To: to, Subject: "Reset your password <now> & soon",
				Body: "Réinitialisez: https://reset.invalid/r?token=" + hex.EncodeToString(tok[:]) + "&c=" + challenge},
			want: want, sends: sends,
		}
		if ch == "sms" {
			n.Message.Subject = ""
		}
		n.goKey = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: challenge, Channel: ledger.Channel(ch)}.Key()
		m := ledger.Message{To: n.Message.To, Subject: n.Message.Subject, Body: n.Message.Body}
		n.goHash = ledger.ContentHash(n.TemplateID, n.TemplateVersion, m)
		return n
	}
	single := map[string]any{"kind": "single"}
	ns := []nodeNotification{
		mk(run+"-email", "email", single, "success+"+run+"-email@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-sms", "sms", single, phone, ledger.Accepted, 1),
		mk(run+"-fallback", "email", fallback, "success+"+run+"-fallback@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-fallback", "sms", fallback, phone, ledger.Suppressed, 0),
	}

	results := publishWithNode(t, node, script, e, ns)
	if len(results) != len(ns) {
		t.Fatalf("the Node.js producer reported %d results for %d notifications", len(results), len(ns))
	}
	for i, r := range results {
		n := ns[i]
		if r.Error != nil {
			t.Fatalf("%s/%s: the Node.js producer refused it: %v", n.ChallengeID, n.Channel, r.Error)
		}
		if r.DedupeKey != n.goKey || r.ContentHash != n.goHash || r.MessageID == "" {
			t.Errorf("%s/%s: Node.js reports dedupe key %s, content hash %s; Go computes %s, %s",
				n.ChallengeID, n.Channel, r.DedupeKey, r.ContentHash, n.goKey, n.goHash)
		}
	}

	checkPublished(t, e, ns, results, start, emulatorLog)
	t.Logf("node producer e2e: %d intents published by Node.js, dedupe keys equal to Go's, in %v", len(ns), time.Since(start).Round(time.Second))
}

// checkPublished checks what a producer's end-to-end test published (ns, in
// the order of results, which the producer reported): every row ends as it
// should with the hash the Go code computes and a verified chain, the claim
// function took each intent on its first receive, the transports captured the
// published content the expected number of times, and `ledgerctl explain`
// tells each challenge's story. The Node.js and Python tests share it.
func checkPublished(t *testing.T, e *env, ns []nodeNotification, results []nodeResult, start time.Time, emulatorLog *EmulatorLog) {
	t.Helper()
	ctx := context.Background()
	// Each row ends as it should, with the hash the Go code computes.
	for _, n := range ns {
		timeout := sendTimeout
		if n.want == ledger.Suppressed {
			timeout = e.heldTimeout(t) // held until the fallback wait ends
		}
		row := e.terminal(t, n.goKey, timeout)
		if row.State != n.want || row.ContentHash != n.goHash || row.Workflow.Kind != ledger.WorkflowKind(workflowKind(n.Workflow)) {
			t.Errorf("%s/%s: row %s (%s), hash %s, workflow %s; want %s, hash %s", n.ChallengeID, n.Channel,
				row.State, row.Reason, row.ContentHash, row.Workflow.Kind, n.want, n.goHash)
		}
		if err := row.Verify(); err != nil {
			t.Errorf("%s/%s: %v", n.ChallengeID, n.Channel, err)
		}
		t.Logf("%s/%s: %s (%s)", n.ChallengeID, n.Channel, row.State, row.Reason)
	}
	// The claim function took each intent on its first receive. Its log lines reach the emulator's
	// log store after the rows are written, later still after the limits test's few hundred
	// intents: the wait is longer than a send's.
	for i, r := range results {
		e.claimLog(t, r.MessageID, "intent handled", map[string]any{"receive_count": 1, "dedupe_key": ns[i].goKey}, 3*sendTimeout, start)
	}

	// What the transports captured: the published content, sent once.
	emails, err := CapturedEmails(ctx, e.web, e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ProviderMessages(ctx, e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		switch n.Channel {
		case "email":
			got := EmailsTo(emails, n.Message.To)
			if len(got) != n.sends {
				t.Errorf("%s/email: SES captured %d messages, want %d", n.ChallengeID, len(got), n.sends)
			}
			for _, m := range got {
				if m.Subject != n.Message.Subject || strings.TrimSpace(m.BodyText) != n.Message.Body {
					t.Errorf("%s/email: SES captured subject %q and a body that differs from the published one", n.ChallengeID, m.Subject)
				}
			}
		case "sms":
			sent := 0
			for _, m := range msgs {
				if m.IdempotencyKey != n.goKey {
					continue
				}
				sent++
				if m.To != n.Message.To || m.Body != n.Message.Body || m.ContentHash != n.goHash {
					t.Errorf("%s/sms: provider got another address, body or hash than published", n.ChallengeID)
				}
			}
			if sent != n.sends {
				t.Errorf("%s/sms: webhook provider recorded %d messages, want %d", n.ChallengeID, sent, n.sends)
			}
		}
	}

	// ledgerctl explain tells each challenge's story.
	ledgerctl := filepath.Join(t.TempDir(), "ledgerctl")
	if out, err := exec.Command("go", "build", "-o", ledgerctl, "../cmd/ledgerctl").CombinedOutput(); err != nil {
		t.Fatalf("build ledgerctl: %v\n%s", err, out)
	}
	for _, challenge := range challengeIDs(ns) {
		cmd := exec.Command(ledgerctl, "explain", challenge, "--json")
		cmd.Env = append(os.Environ(), "LEDGER_TABLE="+e.out.LedgerTable, "AWS_ENDPOINT_URL="+e.endpoint, "AWS_REGION="+e.cfg.Region)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ledgerctl explain %s: %v", challenge, err)
		}
		var explained struct {
			Rows []struct {
				DedupeKey string `json:"dedupe_key"`
				Channel   string `json:"channel"`
				State     string `json:"state"`
				Reason    string `json:"reason"`
				Chain     struct {
					Verified bool `json:"verified"`
				} `json:"chain"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(out, &explained); err != nil {
			t.Fatalf("ledgerctl explain %s --json: %v", challenge, err)
		}
		for _, r := range explained.Rows {
			var want *nodeNotification
			for i := range ns {
				if ns[i].ChallengeID == challenge && ns[i].Channel == r.Channel {
					want = &ns[i]
				}
			}
			if want == nil || r.DedupeKey != want.goKey || r.State != string(want.want) || !r.Chain.Verified || r.Reason == "" {
				t.Errorf("ledgerctl explain %s: row %s/%s %s (%s), chain verified %v", challenge, r.Channel, r.DedupeKey, r.State, r.Reason, r.Chain.Verified)
			}
		}
		want := 0
		for _, n := range ns {
			if n.ChallengeID == challenge {
				want++
			}
		}
		if len(explained.Rows) != want {
			t.Errorf("ledgerctl explain %s: %d rows, want %d", challenge, len(explained.Rows), want)
		}
	}
	if emulatorLog != nil {
		problems, err := emulatorLog.Problems()
		if err != nil {
			t.Errorf("emulator log: %v", err)
		}
		if len(problems) > 0 {
			t.Errorf("the emulator logged %d errors of its own during the run (%s); the first:\n%s", len(problems), emulatorLog.Path, problems[0])
		}
	}
}

// challengeIDs lists the challenges of ns once each, in order.
func challengeIDs(ns []nodeNotification) []string {
	var ids []string
	seen := map[string]bool{}
	for _, n := range ns {
		if !seen[n.ChallengeID] {
			seen[n.ChallengeID] = true
			ids = append(ids, n.ChallengeID)
		}
	}
	return ids
}

func workflowKind(wf any) string {
	m, _ := wf.(map[string]any)
	s, _ := m["kind"].(string)
	return s
}

// publishWithNode runs the Node.js producer's publish-json example with the
// stack's queue and key, the notifications (addresses and links included)
// on its standard input.
func publishWithNode(t *testing.T, node, script string, e *env, ns []nodeNotification) []nodeResult {
	t.Helper()
	in, err := json.Marshal(ns)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(),
		"INTENT_QUEUE_URL="+e.out.IntentQueueURL, "CONTENT_KEY_ARN="+e.out.ContentKeyARN, "INTENT_KEY_ARN="+e.out.IntentKeyARN,
		"AWS_ENDPOINT_URL="+e.endpoint, "AWS_REGION="+e.cfg.Region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\nstdout: %s\nstderr: %s", script, err, stdout.String(), stderr.String())
	}
	for _, n := range ns {
		for _, secret := range []string{n.Message.To, n.Message.Body} {
			if strings.Contains(stdout.String(), secret) || strings.Contains(stderr.String(), secret) {
				t.Errorf("the Node.js producer printed an address or a reset link")
			}
		}
	}
	var results []nodeResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil {
		t.Fatalf("node %s printed %q: %v", script, stdout.String(), err)
	}
	return results
}
