package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// publisher is what differs between the producers' end-to-end tests: how to
// run a producer's publish example, and the JSON names it reads and prints.
// testProducer does the rest, the same for every producer.
type publisher struct {
	// name is the producer as messages name it ("Node.js"); tag names its
	// runs and destination refs ("node").
	name, tag string
	// command returns the publish example's command line and the
	// environment it needs beyond the stack's queue, keys, endpoint, region
	// and credentials, or an error that says how to build the producer.
	command func(e *env) (argv, extraEnv []string, err error)
	// form is the producer's JSON form of what the example reads and prints.
	form wire
	// precision is that of the producer's clock: expiresAt is truncated to it.
	precision time.Duration
	// subjectRefs: the email and the fallback pair carry a subject_ref, and
	// each row must record the one published.
	subjectRefs bool
}

// producerInput is a notification as a publish example reads it (each
// producer under its own JSON names: nodeInput, pythonInput), expiresAt as
// RFC 3339.
type producerInput struct {
	ChallengeID     string
	Channel         string
	Workflow        any
	DestinationRef  string
	SubjectRef      string
	ExpiresAt       string
	TemplateID      string
	TemplateVersion string
	PolicyVersion   string
	Message         producerMessage
}

type producerMessage struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body"`
}

// producerResult is what a publish example prints for each notification
// (each producer under its own JSON names: nodeResult, pythonResult).
type producerResult struct {
	ChallengeID string
	Channel     string
	DedupeKey   string
	ContentHash string
	MessageID   string
	Attempts    int
	Error       any
}

// producerCase is one notification a producer's test publishes, with what
// the Go code computes for it and how its row must end.
type producerCase struct {
	producerInput
	want          ledger.State
	sends         int
	goKey, goHash string
}

// testProducer publishes intents with the producer p runs (run as an account service
// would) to the deployed stack: an email, an SMS and a fallback pair (email
// then SMS). The dedupe keys and content hashes it reports must be the ones
// the Go code computes; the claim function must take each intent on its
// first receive; the email and the SMS must be accepted and sent once with
// the published content (captured by the emulator's SES and the local
// webhook provider); the fallback's SMS must end suppressed without a send
// when the fallback wait ends, its email having been accepted and never
// bounced; and `ledgerctl explain` must tell each challenge's story with a
// verified hash chain (checkPublished). With p.subjectRefs, each row records
// the subject_ref published.
func testProducer(t *testing.T, p publisher) {
	e := setup(t)
	argv, extraEnv, err := p.command(e)
	if err != nil {
		if os.Getenv("E2E_REQUIRED") == "1" {
			t.Fatal(err.Error() + " (E2E_REQUIRED=1)")
		}
		t.Skip(err.Error())
	}
	emulatorLog := e.markEmulatorLog(t)
	run := emulator.UniqueName(t, p.tag)
	start := time.Now()
	cs := producerCases(t, p, run)

	results := publish(t, p, argv, extraEnv, e, cs)
	if len(results) != len(cs) {
		t.Fatalf("the %s producer reported %d results for %d notifications", p.name, len(results), len(cs))
	}
	for i, r := range results {
		c := cs[i]
		if r.Error != nil {
			t.Fatalf("%s/%s: the %s producer refused it: %v", c.ChallengeID, c.Channel, p.name, r.Error)
		}
		if r.ChallengeID != c.ChallengeID || r.Channel != c.Channel {
			t.Fatalf("result %d is for %s/%s, want %s/%s", i, r.ChallengeID, r.Channel, c.ChallengeID, c.Channel)
		}
		if r.DedupeKey != c.goKey || r.ContentHash != c.goHash || r.MessageID == "" || r.Attempts < 1 {
			t.Errorf("%s/%s: %s reports dedupe key %s, content hash %s; Go computes %s, %s",
				c.ChallengeID, c.Channel, p.name, r.DedupeKey, r.ContentHash, c.goKey, c.goHash)
		}
	}

	checkPublished(t, e, cs, results, start, emulatorLog)
	if p.subjectRefs {
		// The subject_ref the producer wrote (and the one it left out) is what the row records.
		for _, c := range cs {
			if row := e.terminal(t, c.goKey, sendTimeout); row.SubjectRef != c.SubjectRef {
				t.Errorf("%s/%s: row subject_ref %q, published %q", c.ChallengeID, c.Channel, row.SubjectRef, c.SubjectRef)
			}
		}
	}
	t.Logf("%s producer e2e: %d intents published by %s, dedupe keys equal to Go's, in %v", p.tag, len(cs), p.name, time.Since(start).Round(time.Second))
}

// producerCases are what testProducer publishes with p in run: an email, an
// SMS and a fallback pair (email then SMS), each with the dedupe key and
// content hash the Go code computes and how its row must end.
func producerCases(t *testing.T, p publisher, run string) []producerCase {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	phone := number(t, "US")
	fallback := map[string]any{"kind": "fallback", "order": []string{"email", "sms"}}
	mk := func(challenge, ch string, wf any, subject, to string, want ledger.State, sends int) producerCase {
		c := producerCase{producerInput: producerInput{
			ChallengeID: challenge, Channel: ch, Workflow: wf, DestinationRef: p.tag + "-e2e:" + ch, SubjectRef: subject,
			ExpiresAt:  time.Now().Add(10 * time.Minute).UTC().Truncate(p.precision).Format(time.RFC3339Nano),
			TemplateID: "reset-" + ch, TemplateVersion: "1", PolicyVersion: ledger.DefaultPolicy().Version,
			Message: producerMessage{To: to, Subject: "Reset your password <now> & soon",
				Body: "Réinitialisez: https://reset.invalid/r?token=" + hex.EncodeToString(tok[:]) + "&c=" + challenge},
		}, want: want, sends: sends}
		if ch == "sms" {
			c.Message.Subject = ""
		}
		c.goKey = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: challenge, Channel: ledger.Channel(ch)}.Key()
		m := ledger.Message{To: c.Message.To, Subject: c.Message.Subject, Body: c.Message.Body}
		c.goHash = ledger.ContentHash(c.TemplateID, c.TemplateVersion, m)
		return c
	}
	// The fallback pair is another account's: with the first one's subject,
	// the fallback challenge, issued later, would supersede the email
	// challenge on its email step whenever that one had not yet been sent.
	var subject, otherSubject string
	if p.subjectRefs {
		subject = p.tag + "-e2e:" + run
		otherSubject = subject + "-2"
	}
	single := map[string]any{"kind": "single"}
	cs := []producerCase{
		mk(run+"-email", "email", single, subject, "success+"+run+"-email@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-sms", "sms", single, "", phone, ledger.Accepted, 1),
		mk(run+"-fallback", "email", fallback, otherSubject, "success+"+run+"-fallback@"+simulatorDomain, ledger.Accepted, 1),
		mk(run+"-fallback", "sms", fallback, otherSubject, phone, ledger.Suppressed, 0),
	}
	return cs
}

// publish runs producer p's publish example (argv) with the stack's queue
// and keys, the notifications (addresses and links included) on its
// standard input, and returns what it reported for each.
func publish(t *testing.T, p publisher, argv, extraEnv []string, e *env, cs []producerCase) []producerResult {
	t.Helper()
	ins := make([]producerInput, len(cs))
	for i, c := range cs {
		ins[i] = c.producerInput
	}
	stdin, err := json.Marshal(p.form.encode(ins))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(),
		"INTENT_QUEUE_URL="+e.out.IntentQueueURL, "CONTENT_KEY_ARN="+e.out.ContentKeyARN, "INTENT_KEY_ARN="+e.out.IntentKeyARN,
		"AWS_ENDPOINT_URL="+e.endpoint, "AWS_REGION="+e.cfg.Region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(argv, " "), err, stdout.String(), stderr.String())
	}
	for _, c := range cs {
		for _, secret := range []string{c.Message.To, c.Message.Body} {
			if strings.Contains(stdout.String(), secret) || strings.Contains(stderr.String(), secret) {
				t.Errorf("the %s producer printed an address or a reset link", p.name)
			}
		}
	}
	results, err := p.form.decode(stdout.Bytes())
	if err != nil {
		t.Fatalf("%s printed %q: %v", strings.Join(argv, " "), stdout.String(), err)
	}
	return results
}

// checkPublished checks what a producer's end-to-end test published (cs, in
// the order of results, which the producer reported): every row ends as it
// should with the hash the Go code computes and a verified chain, the claim
// function took each intent on its first receive, the transports captured the
// published content the expected number of times, and `ledgerctl explain`
// tells each challenge's story.
func checkPublished(t *testing.T, e *env, cs []producerCase, results []producerResult, start time.Time, emulatorLog *EmulatorLog) {
	t.Helper()
	ctx := context.Background()
	// Each row ends as it should, with the hash the Go code computes.
	for _, c := range cs {
		timeout := sendTimeout
		if c.want == ledger.Suppressed {
			timeout = e.heldTimeout(t) // held until the fallback wait ends
		}
		row := e.terminal(t, c.goKey, timeout)
		if row.State != c.want || row.ContentHash != c.goHash || row.Workflow.Kind != ledger.WorkflowKind(workflowKind(c.Workflow)) {
			t.Errorf("%s/%s: row %s (%s), hash %s, workflow %s; want %s, hash %s", c.ChallengeID, c.Channel,
				row.State, row.Reason, row.ContentHash, row.Workflow.Kind, c.want, c.goHash)
		}
		if err := row.Verify(); err != nil {
			t.Errorf("%s/%s: %v", c.ChallengeID, c.Channel, err)
		}
		t.Logf("%s/%s: %s (%s)", c.ChallengeID, c.Channel, row.State, row.Reason)
	}
	// The claim function took each intent on its first receive. Its log lines reach the emulator's
	// log store after the rows are written, later still after the limits test's few hundred
	// intents: the wait is longer than a send's.
	for i, r := range results {
		e.claimLog(t, r.MessageID, "intent handled", map[string]any{"receive_count": 1, "dedupe_key": cs[i].goKey}, 3*sendTimeout, start)
	}
	checkCapturedSends(t, ctx, e, cs)
	checkExplained(t, e, cs)
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

// checkExplained: ledgerctl explain tells each challenge's story, a verified
// row per case with its dedupe key and end state.
func checkExplained(t *testing.T, e *env, cs []producerCase) {
	t.Helper()
	// ledgerctl explain tells each challenge's story.
	ledgerctl := filepath.Join(t.TempDir(), "ledgerctl")
	if out, err := exec.Command("go", "build", "-o", ledgerctl, "../cmd/ledgerctl").CombinedOutput(); err != nil {
		t.Fatalf("build ledgerctl: %v\n%s", err, out)
	}
	for _, challenge := range challengeIDs(cs) {
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
			var want *producerCase
			for i := range cs {
				if cs[i].ChallengeID == challenge && cs[i].Channel == r.Channel {
					want = &cs[i]
				}
			}
			if want == nil || r.DedupeKey != want.goKey || r.State != string(want.want) || !r.Chain.Verified || r.Reason == "" {
				t.Errorf("ledgerctl explain %s: row %s/%s %s (%s), chain verified %v", challenge, r.Channel, r.DedupeKey, r.State, r.Reason, r.Chain.Verified)
			}
		}
		want := 0
		for _, c := range cs {
			if c.ChallengeID == challenge {
				want++
			}
		}
		if len(explained.Rows) != want {
			t.Errorf("ledgerctl explain %s: %d rows, want %d", challenge, len(explained.Rows), want)
		}
	}
}

// checkCapturedSends: the transports captured the published content of each
// case, as many times as it wants (SES's captured emails, the webhook
// provider's messages).
func checkCapturedSends(t *testing.T, ctx context.Context, e *env, cs []producerCase) {
	t.Helper()
	// What the transports captured: the published content, sent once.
	emails, msgs := e.captured(t, ctx)
	for _, c := range cs {
		switch c.Channel {
		case "email":
			got := EmailsTo(emails, c.Message.To)
			if len(got) != c.sends {
				t.Errorf("%s/email: SES captured %d messages, want %d", c.ChallengeID, len(got), c.sends)
			}
			for _, m := range got {
				if m.Subject != c.Message.Subject || strings.TrimSpace(m.BodyText) != c.Message.Body {
					t.Errorf("%s/email: SES captured subject %q and a body that differs from the published one", c.ChallengeID, m.Subject)
				}
			}
		case "sms":
			sent := 0
			for _, m := range msgs {
				if m.IdempotencyKey != c.goKey {
					continue
				}
				sent++
				if m.To != c.Message.To || m.Body != c.Message.Body || m.ContentHash != c.goHash {
					t.Errorf("%s/sms: provider got another address, body or hash than published", c.ChallengeID)
				}
			}
			if sent != c.sends {
				t.Errorf("%s/sms: webhook provider recorded %d messages, want %d", c.ChallengeID, sent, c.sends)
			}
		}
	}
}

// challengeIDs lists the challenges of cs once each, in order.
func challengeIDs(cs []producerCase) []string {
	var ids []string
	seen := map[string]bool{}
	for _, c := range cs {
		if !seen[c.ChallengeID] {
			seen[c.ChallengeID] = true
			ids = append(ids, c.ChallengeID)
		}
	}
	return ids
}

func workflowKind(wf any) string {
	m, _ := wf.(map[string]any)
	s, _ := m["kind"].(string)
	return s
}

// wire is a producer's JSON form of producerInput and producerResult.
type wire interface {
	encode(ins []producerInput) any
	decode(stdout []byte) ([]producerResult, error)
}

// names is the wire of a producer that reads I and prints R: the fields of
// producerInput and producerResult under the producer's own JSON names (Go
// converts between struct types that differ only in their tags).
type names[I, R any] struct{}

func (names[I, R]) encode(ins []producerInput) any {
	out := make([]I, len(ins))
	for i, in := range ins {
		out[i] = reflect.ValueOf(in).Convert(reflect.TypeFor[I]()).Interface().(I)
	}
	return out
}

func (names[I, R]) decode(stdout []byte) ([]producerResult, error) {
	var rs []R
	err := json.Unmarshal(stdout, &rs)
	out := make([]producerResult, len(rs))
	for i, r := range rs {
		out[i] = reflect.ValueOf(r).Convert(reflect.TypeFor[producerResult]()).Interface().(producerResult)
	}
	return out, err
}
