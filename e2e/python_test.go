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

// pythonProducer is the Python producer package; make python-producer
// installs its pinned dependencies into pythonVenv.
var (
	pythonProducer = filepath.Join("..", "producers", "python")
	pythonVenv     = filepath.Join("..", ".venv", "python-producer")
)

// pythonNotification is a notification as producers/python/examples/publish_json.py
// reads it: the intent's member names, expires_at as RFC 3339.
type pythonNotification struct {
	ChallengeID     string  `json:"challenge_id"`
	Channel         string  `json:"channel"`
	Workflow        any     `json:"workflow"`
	DestinationRef  string  `json:"destination_ref"`
	SubjectRef      string  `json:"subject_ref,omitempty"`
	ExpiresAt       string  `json:"expires_at"`
	TemplateID      string  `json:"template_id"`
	TemplateVersion string  `json:"template_version"`
	PolicyVersion   string  `json:"policy_version"`
	Message         nodeMsg `json:"message"`
}

// pythonResult is what the script prints for each notification.
type pythonResult struct {
	ChallengeID string `json:"challenge_id"`
	Channel     string `json:"channel"`
	DedupeKey   string `json:"dedupe_key"`
	ContentHash string `json:"content_hash"`
	MessageID   string `json:"message_id"`
	Attempts    int    `json:"attempts"`
	Error       any    `json:"error"`
}

// TestPythonProducerEndToEnd publishes intents with the Python producer
// (producers/python, run with the venv's python as an account service would)
// to the deployed stack: an email, an SMS and a fallback pair (email then
// SMS), the email and the pair with a subject_ref. It checks what the
// Node.js producer's test checks (checkPublished): the dedupe keys and
// content hashes it reports are the ones the Go code computes; the claim
// function takes each intent on its first receive; the email and the SMS are
// accepted and sent once with the published content; the fallback's SMS ends
// suppressed without a send; `ledgerctl explain` tells each challenge's story
// with a verified hash chain. Each row records the subject_ref published.
func TestPythonProducerEndToEnd(t *testing.T) {
	e := setup(t)
	required := os.Getenv("E2E_REQUIRED") == "1"
	python := filepath.Join(pythonVenv, "bin", "python")
	script := filepath.Join(pythonProducer, "examples", "publish_json.py")
	_, err := os.Stat(python)
	if err == nil {
		err = exec.Command(python, "-c", "import boto3, cryptography").Run()
	}
	if err != nil {
		msg := fmt.Sprintf("the Python producer's venv is not installed (%v); run make python-producer", err)
		if required {
			t.Fatal(msg + " (E2E_REQUIRED=1)")
		}
		t.Skip(msg)
	}
	emulatorLog := e.markEmulatorLog(t)
	run := emulator.UniqueName(t, "python")
	start := time.Now()

	var tok [16]byte
	_, _ = rand.Read(tok[:])
	phone := number(t, "US")
	fallback := map[string]any{"kind": "fallback", "order": []string{"email", "sms"}}
	mk := func(challenge, ch string, wf any, subject, to string, want ledger.State, sends int) nodeNotification {
		n := nodeNotification{
			ChallengeID: challenge, Channel: ch, Workflow: wf, DestinationRef: "python-e2e:" + ch, SubjectRef: subject,
			ExpiresAt:  time.Now().Add(10 * time.Minute).UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano),
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
	subject := "python-e2e:" + run
	ns := []nodeNotification{
		mk(run+"-email", "email", single, subject, "success+"+run+"-email@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-sms", "sms", single, "", phone, ledger.Accepted, 1),
		// Another account: with the first one's subject, the fallback
		// challenge, issued later, would supersede the email challenge on
		// its email step whenever that one had not yet been sent.
		mk(run+"-fallback", "email", fallback, subject+"-2", "success+"+run+"-fallback@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-fallback", "sms", fallback, subject+"-2", phone, ledger.Suppressed, 0),
	}

	pyResults := publishWithPython(t, python, script, e, ns)
	if len(pyResults) != len(ns) {
		t.Fatalf("the Python producer reported %d results for %d notifications", len(pyResults), len(ns))
	}
	results := make([]nodeResult, len(pyResults))
	for i, r := range pyResults {
		n := ns[i]
		if r.Error != nil {
			t.Fatalf("%s/%s: the Python producer refused it: %v", n.ChallengeID, n.Channel, r.Error)
		}
		if r.ChallengeID != n.ChallengeID || r.Channel != n.Channel {
			t.Fatalf("result %d is for %s/%s, want %s/%s", i, r.ChallengeID, r.Channel, n.ChallengeID, n.Channel)
		}
		if r.DedupeKey != n.goKey || r.ContentHash != n.goHash || r.MessageID == "" || r.Attempts < 1 {
			t.Errorf("%s/%s: Python reports dedupe key %s, content hash %s; Go computes %s, %s",
				n.ChallengeID, n.Channel, r.DedupeKey, r.ContentHash, n.goKey, n.goHash)
		}
		results[i] = nodeResult{ChallengeID: r.ChallengeID, Channel: r.Channel, DedupeKey: r.DedupeKey,
			ContentHash: r.ContentHash, MessageID: r.MessageID, Attempts: r.Attempts}
	}

	checkPublished(t, e, ns, results, start, emulatorLog)
	// The subject_ref Python wrote (and the one it left out) is what the row records.
	for _, n := range ns {
		if row := e.terminal(t, n.goKey, sendTimeout); row.SubjectRef != n.SubjectRef {
			t.Errorf("%s/%s: row subject_ref %q, published %q", n.ChallengeID, n.Channel, row.SubjectRef, n.SubjectRef)
		}
	}
	t.Logf("python producer e2e: %d intents published by Python, dedupe keys equal to Go's, in %v", len(ns), time.Since(start).Round(time.Second))
}

// publishWithPython runs the Python producer's publish_json example with the
// stack's queue and key, the notifications (addresses and links included) on
// its standard input.
func publishWithPython(t *testing.T, python, script string, e *env, ns []nodeNotification) []pythonResult {
	t.Helper()
	in := make([]pythonNotification, len(ns))
	for i, n := range ns {
		in[i] = pythonNotification{ChallengeID: n.ChallengeID, Channel: n.Channel, Workflow: n.Workflow,
			DestinationRef: n.DestinationRef, SubjectRef: n.SubjectRef, ExpiresAt: n.ExpiresAt, TemplateID: n.TemplateID,
			TemplateVersion: n.TemplateVersion, PolicyVersion: n.PolicyVersion, Message: n.Message}
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script)
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src, err := filepath.Abs(filepath.Join(pythonProducer, "src"))
	if err != nil {
		t.Fatal(err)
	}
	// boto3 reads the region from AWS_DEFAULT_REGION (not AWS_REGION).
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src,
		"INTENT_QUEUE_URL="+e.out.IntentQueueURL, "CONTENT_KEY_ARN="+e.out.ContentKeyARN, "INTENT_KEY_ARN="+e.out.IntentKeyARN,
		"AWS_ENDPOINT_URL="+e.endpoint, "AWS_REGION="+e.cfg.Region, "AWS_DEFAULT_REGION="+e.cfg.Region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout: %s\nstderr: %s", python, script, err, stdout.String(), stderr.String())
	}
	for _, n := range ns {
		for _, secret := range []string{n.Message.To, n.Message.Body} {
			if strings.Contains(stdout.String(), secret) || strings.Contains(stderr.String(), secret) {
				t.Errorf("the Python producer printed an address or a reset link")
			}
		}
	}
	var results []pythonResult
	if err := json.Unmarshal(stdout.Bytes(), &results); err != nil {
		t.Fatalf("%s printed %q: %v", script, stdout.String(), err)
	}
	return results
}
