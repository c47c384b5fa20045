package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

const (
	// sendTimeout bounds publish -> terminal row for an intent that is sent.
	sendTimeout = 60 * time.Second
	pollEvery   = 500 * time.Millisecond
	// maxRedrive is the longest dead-letter path the test waits for
	// (visibility timeout x maxReceiveCount); the production queue (3m x 5)
	// would take 15 minutes.
	maxRedrive = 150 * time.Second
	// redriveSlack is added to the dead-letter path before the test decides
	// that a good intent was not dead-lettered: the event source moves a
	// message on its first poll after the last allowed receive expired.
	redriveSlack = 10 * time.Second
	// simulatorDomain is SES's mailbox simulator: any address there counts as
	// verified even in the SES sandbox, and a label keeps it unique per run.
	simulatorDomain = "simulator.amazonses.com"
)

// env is one deployed local stack and the clients to drive and observe it.
type env struct {
	out        Outputs
	cfg        aws.Config
	endpoint   string
	web        *http.Client
	queue      *sqs.Client
	store      *dynamostore.Store
	content    *dynamostore.Content
	producer   *producer.Producer
	provider   string // webhook provider base URL
	visibility time.Duration
	maxReceive int
}

// setup finds the deployed stack, or skips the test (fails it when
// E2E_REQUIRED=1) when there is none.
func setup(t *testing.T) *env {
	t.Helper()
	required := os.Getenv("E2E_REQUIRED") == "1"
	unavailable := func(format string, a ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, a...) + "; deploy the local stack with localstack/deploy-local.sh (make run)"
		if required {
			t.Fatal(msg + " (E2E_REQUIRED=1)")
		}
		t.Skip(msg)
	}
	path := os.Getenv("E2E_OUTPUTS")
	if path == "" {
		path = filepath.Join("..", ".run", "outputs.json")
	}
	if _, err := os.Stat(path); err != nil {
		unavailable("no stack outputs at %s", path)
	}
	out, err := ReadOutputs(path)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, ok := emulator.Endpoint()
	if !ok {
		unavailable("no emulator (AWS_ENDPOINT_URL unset, nothing on 127.0.0.1:4566) for stack %s", out.Stack)
	}
	e := &env{out: out, cfg: emulator.Config(t), endpoint: endpoint, web: &http.Client{Timeout: 10 * time.Second}}
	e.queue = sqs.NewFromConfig(e.cfg)
	db := dynamodb.NewFromConfig(e.cfg)
	e.store = dynamostore.New(db, out.LedgerTable, dynamostore.DefaultShards)
	e.content = dynamostore.NewContent(db, out.ContentTable)
	e.producer = &producer.Producer{
		Queue: e.queue, QueueURL: out.IntentQueueURL,
		// Envelope version 3, against the dictionary the deployed claim
		// and dispatch hold (internal/dictionaries); the Node.js and
		// Python producers' intents (producer_test.go) are version 2.
		Sealer: &envelope.Sealer{KMS: kms.NewFromConfig(e.cfg), KeyID: out.ContentKeyARN, Dictionary: shapes.Dictionary()},
		Seals:  &kmsseal.KMS{Client: kms.NewFromConfig(e.cfg), KeyARN: out.IntentKeyARN},
		Clock:  time.Now,
	}

	ctx := context.Background()
	// The emulator keeps state in memory: outputs outlive a restart.
	attrs, err := e.queue.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(out.IntentQueueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout, sqstypes.QueueAttributeNameRedrivePolicy},
	})
	if err != nil {
		unavailable("stack %s (outputs %s) is not in the emulator at %s, was it restarted? (%v)", out.Stack, path, endpoint, err)
	}
	vis, err := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameVisibilityTimeout)])
	if err != nil {
		t.Fatalf("intent queue VisibilityTimeout %q: %v", attrs.Attributes["VisibilityTimeout"], err)
	}
	var redrive struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(attrs.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]), &redrive); err != nil {
		t.Fatalf("intent queue RedrivePolicy %q: %v", attrs.Attributes["RedrivePolicy"], err)
	}
	n, err := strconv.Atoi(strings.Trim(string(redrive.MaxReceiveCount), `"`))
	if err != nil || n < 1 {
		t.Fatalf("intent queue maxReceiveCount %q", redrive.MaxReceiveCount)
	}
	e.visibility, e.maxReceive = time.Duration(vis)*time.Second, n
	if redriveTime := e.visibility * time.Duration(e.maxReceive); redriveTime > maxRedrive {
		t.Fatalf("stack %s dead-letters after %d receives %v apart (%v): too slow for this test; deploy the local stage "+
			"with -c intentVisibilityTimeout=30s -c maxReceiveCount=2 (localstack/deploy-local.sh does)", out.Stack, e.maxReceive, e.visibility, redriveTime)
	}

	findProvider(t, ctx, e)
	return e
}

// findProvider sets e.provider to the webhook provider the deployed dispatch
// function sends to, and fails when that provider does not answer.
func findProvider(t *testing.T, ctx context.Context, e *env) {
	t.Helper()
	out, endpoint := e.out, e.endpoint
	// The provider is the one the deployed dispatch function sends to. A
	// provider named by E2E_WEBHOOK_PROVIDER or WEBHOOK_PROVIDER_PORT (as
	// localstack/deploy-local.sh reads it) must be that one: counting
	// another stack's provider would find no sends, or someone else's.
	vars, err := FunctionEnvironment(ctx, e.cfg, endpoint, out.DispatchFunction)
	if err != nil {
		t.Fatalf("dispatch function of stack %s: %v", out.Stack, err)
	}
	deployed := ""
	if u, err := url.Parse(vars["WEBHOOK_URL"]); err == nil && u.Host != "" {
		deployed = u.Scheme + "://" + u.Host
	}
	e.provider = os.Getenv("E2E_WEBHOOK_PROVIDER")
	if port := os.Getenv("WEBHOOK_PROVIDER_PORT"); e.provider == "" && port != "" {
		e.provider = "http://127.0.0.1:" + port
	}
	switch {
	case e.provider == "" && deployed == "":
		e.provider = "http://127.0.0.1:4599"
	case e.provider == "":
		e.provider = deployed
	case deployed != "" && strings.TrimRight(e.provider, "/") != deployed:
		t.Fatalf("stack %s sends webhooks to %s, but E2E_WEBHOOK_PROVIDER/WEBHOOK_PROVIDER_PORT name %s; "+
			"set them as for localstack/deploy-local.sh, or unset them", out.Stack, deployed, e.provider)
	}
	if _, err := ProviderMessages(ctx, e.web, e.provider); err != nil {
		t.Fatalf("the local webhook provider does not answer (%v); localstack/deploy-local.sh starts it (log in .run/)", err)
	}
}

// expectation is how many sends one logical message may cause.
type expectation struct {
	name    string
	emailTo string // email: the unique recipient
	smsKey  string // sms: the idempotency key
	want    int
}

// sentIntent is one intent the scenarios sent to the intent queue.
type sentIntent struct {
	name, id string
}

// results collects what the scenarios established.
type results struct {
	mu                            sync.Mutex
	expect                        []expectation
	expired, deadLettered, redone int
	// good are the intents the claim function must accept on their first
	// receive (delete from the queue): new, redelivered, expired, mismatched.
	good     []sentIntent
	lastGood time.Time
	// poison are the malformed intents: id and body.
	poison map[string]string
	// mismatched are the keys of rows offered other content exactly once.
	mismatched []string
}

func (r *results) add(f func(r *results)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

// TestEndToEnd publishes intents to the deployed stack and checks every
// outcome: sent exactly once, redelivery harmless, other content blocked and
// recorded once, expiry recorded without a send, poison input dead-lettered
// with its reason logged. After the run it checks what the event source did
// with the good intents: each claimed once on its first receive and deleted
// (none in the DLQ), and that the emulator logged no error of its own.
func TestEndToEnd(t *testing.T) {
	e := setup(t)
	emulatorLog := e.markEmulatorLog(t)
	run := emulator.UniqueName(t, "e2e")
	start := time.Now()
	t.Logf("stack %s, run %s, redrive %d x %v", e.out.Stack, run, e.maxReceive, e.visibility)

	res := &results{poison: map[string]string{}}
	t.Run("scenarios", func(t *testing.T) {
		t.Run("email", func(t *testing.T) { t.Parallel(); e.sendOnce(t, run, ledger.Email, res) })
		t.Run("sms", func(t *testing.T) { t.Parallel(); e.sendOnce(t, run, ledger.SMS, res) })
		t.Run("expired", func(t *testing.T) { t.Parallel(); e.expired(t, run, res) })
		t.Run("poison", func(t *testing.T) { t.Parallel(); e.poison(t, run, res) })
		t.Run("replayed-with-other-fields", func(t *testing.T) { t.Parallel(); e.replayed(t, run, res) })
		t.Run("far-future-challenge", func(t *testing.T) { t.Parallel(); e.farFuture(t, run, res) })
	})

	// A good intent the event source failed to delete is received again
	// after the visibility timeout and dead-lettered after the redrive
	// count: wait until the last one published would have been.
	if wait := time.Until(res.lastGood.Add(e.visibility*time.Duration(e.maxReceive) + redriveSlack)); wait > 0 {
		t.Logf("waiting %v: a good intent that is not deleted would reach the DLQ by then", wait.Round(time.Second))
		time.Sleep(wait)
	}
	claimedOnce := e.claimedOnce(t, res, start)
	dlqGood := e.deadLetters(t, run, res)
	e.mismatchedOnce(t, res)
	if emulatorLog != nil {
		problems, err := emulatorLog.Problems()
		if err != nil {
			t.Errorf("emulator log: %v", err)
		}
		if len(problems) > 0 {
			// The first in full; the rest are usually the same one again.
			t.Errorf("the emulator logged %d errors of its own (tracebacks, NoneType) during the run (%s); the first:\n%s",
				len(problems), emulatorLog.Path, problems[0])
		}
		t.Logf("emulator log %s: %d tracebacks or NoneType errors during the run", emulatorLog.Path, len(problems))
	}

	// Count sends last, after the slowest scenario: a late duplicate has had
	// all that time to show up.
	ctx := context.Background()
	emails, msgs := e.captured(t, ctx)
	sent, duplicates := 0, 0
	for _, x := range res.expect {
		got := 0
		if x.emailTo != "" {
			got = len(EmailsTo(emails, x.emailTo))
		} else {
			for _, m := range msgs {
				if m.IdempotencyKey == x.smsKey {
					got++
				}
			}
		}
		sent += got
		switch {
		case got > x.want:
			duplicates += got - x.want
			t.Errorf("%s: %d sends, want %d (duplicate)", x.name, got, x.want)
		case got < x.want:
			t.Errorf("%s: %d sends, want %d (lost)", x.name, got, x.want)
		}
	}
	summary := fmt.Sprintf("e2e: sent=%d duplicates=%d expired=%d dead-lettered=%d claimed-once=%d/%d good-dead-lettered=%d",
		sent, duplicates, res.expired, res.deadLettered, claimedOnce, len(res.good), dlqGood)
	fmt.Println(summary)
	t.Logf("%s (redeliveries absorbed=%d, %v)", summary, res.redone, time.Since(start).Round(time.Second))
}

// notification is a single-channel reset notification with a fresh secret link.
func notification(challenge string, ch ledger.Channel, to string, expires time.Time) producer.Notification {
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	n := producer.Notification{
		ChallengeID: challenge, Channel: ch, Workflow: ledger.Workflow{Kind: ledger.Single},
		DestinationRef: "e2e:" + challenge, ExpiresAt: expires.UTC().Truncate(time.Millisecond),
		// One subject per challenge: claim notes it as the subject's newest and dispatch reads that
		// back (supersession), so the recorded calls include both (TestEndToEndAWSCalls).
		SubjectRef: "e2e-subject:" + challenge,
		TemplateID: "reset-" + string(ch), TemplateVersion: "1", PolicyVersion: ledger.DefaultPolicy().Version,
		Message: ledger.Message{
			To: to, Subject: "Reset your password",
			Body: "Reset your password: https://reset.invalid/r?token=" + hex.EncodeToString(tok[:]),
		},
	}
	if ch == ledger.SMS {
		n.Message.Subject = ""
	}
	return n
}

func key(n producer.Notification) string {
	return ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: n.Channel}.Key()
}

// publish sends n to the intent queue and records it as a good intent
// (one the claim function must accept on its first receive) named name.
func (e *env) publish(t *testing.T, n producer.Notification, name string, res *results) string {
	t.Helper()
	id, err := e.producer.Publish(context.Background(), n)
	if err != nil {
		t.Fatalf("publish %s/%s: %v", n.ChallengeID, n.Channel, err)
	}
	res.add(func(r *results) {
		r.good = append(r.good, sentIntent{name: name, id: id})
		r.lastGood = time.Now()
	})
	return id
}

// outputs returns the values of the stack outputs want, in order, and fails
// the test naming those the stack lacks (a stack deployed before they
// existed).
func (e *env) outputs(t *testing.T, want ...outputs.Output) []string {
	t.Helper()
	values := make([]string, len(want))
	var missing []string
	for i, o := range want {
		if values[i] = e.out.All[o.Name]; values[i] == "" {
			missing = append(missing, o.Name)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("stack %s has no %s output: redeploy it (localstack/deploy-local.sh)", e.out.Stack, strings.Join(missing, " or "))
	}
	return values
}

// terminal waits until the row of key is terminal; a row that is not is a loss.
func (e *env) terminal(t *testing.T, key string, timeout time.Duration) ledger.Entry {
	t.Helper()
	row, err := WaitTerminal(context.Background(), e.store, key, timeout, pollEvery)
	if err != nil {
		t.Fatalf("row %s: %v (lost)", key, err)
	}
	return row
}

// claimLog waits for the claim function's log line msg about SQS message id
// with the given fields, and returns every log line about that message.
func (e *env) claimLog(t *testing.T, id, msg string, fields map[string]any, timeout time.Duration, since time.Time) []map[string]any {
	t.Helper()
	var lines []map[string]any
	err := Poll(context.Background(), timeout, pollEvery, func(ctx context.Context) (bool, string, error) {
		events, err := FilterLogEvents(ctx, e.cfg, e.endpoint, LogGroup(e.out.ClaimFunction), `"`+id+`"`, since.Add(-time.Minute))
		if err != nil {
			return false, "", err
		}
		lines = lines[:0]
		found := false
		for _, ev := range events {
			m := jsonLine(ev.Message)
			if m == nil || m["sqs_message_id"] != id {
				continue
			}
			lines = append(lines, m)
			if m["msg"] == msg && matches(m, fields) {
				found = true
			}
		}
		return found, fmt.Sprintf("%d claim log lines about message %s, none %q %v", len(lines), id, msg, fields), nil
	})
	if err != nil {
		t.Fatalf("claim function log (%s): %v", LogGroup(e.out.ClaimFunction), err)
	}
	return lines
}

// jsonLine decodes the JSON object in a log line (the runtime may prefix it).
func jsonLine(s string) map[string]any {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		return nil
	}
	var m map[string]any
	if json.Unmarshal([]byte(s[i:]), &m) != nil {
		return nil
	}
	return m
}

func matches(m map[string]any, fields map[string]any) bool {
	for k, v := range fields {
		if fmt.Sprint(m[k]) != fmt.Sprint(v) {
			return false
		}
	}
	return true
}

// sendOnce: (a)/(b) an intent is sent exactly once through the channel's
// transport and its row is accepted with the transport's id; (c) the same
// notification published again is a no-op.
func (e *env) sendOnce(t *testing.T, run string, ch ledger.Channel, res *results) {
	ctx := context.Background()
	challenge := run + "-" + string(ch)
	to := "success+" + challenge + "@" + simulatorDomain
	if ch == ledger.SMS {
		to = number(t, "US")
	}
	n := notification(challenge, ch, to, time.Now().Add(10*time.Minute))
	k := key(n)
	x := expectation{name: string(ch) + " " + challenge, want: 1}
	if ch == ledger.Email {
		x.emailTo = to
	} else {
		x.smsKey = k
	}
	res.add(func(r *results) { r.expect = append(r.expect, x) })

	published := time.Now()
	first := e.publish(t, n, x.name+" (first)", res)
	row := e.terminal(t, k, sendTimeout)
	t.Logf("%s: %s in %v (ack %s)", k[:12], row.State, time.Since(published).Round(time.Millisecond), row.AckID)
	if row.State != ledger.Accepted {
		t.Fatalf("row %s is %s (%s), want accepted", k, row.State, row.Reason)
	}
	if row.Attempts != 1 || row.AckID == "" || row.ContentHash != ledger.ContentHash(n.TemplateID, n.TemplateVersion, n.Message) {
		t.Errorf("row: attempts %d, ack %q, hash %s; want 1 attempt, an ack id, the published content hash", row.Attempts, row.AckID, row.ContentHash)
	}
	if err := row.Verify(); err != nil {
		t.Errorf("row history: %v", err)
	}
	if _, err := e.content.Get(ctx, k); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("sealed content of an accepted row: got %v, want it purged (not found)", err)
	}

	checkTransportRecord(t, ctx, e, ch, to, k, n, row)
	// (c) Redelivery: the same notification again is a new SQS message, and
	// the claim function reports it a duplicate of the existing row.
	second := e.publish(t, n, x.name+" (redelivery)", res)
	if second == first {
		t.Fatalf("republished intent has the same SQS message id %s", first)
	}
	e.claimLog(t, second, "intent handled", map[string]any{"outcome": "duplicate"}, sendTimeout, published)
	after, err := e.store.Get(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != row.Version || after.State != ledger.Accepted {
		t.Errorf("redelivery changed the row: version %d -> %d, state %s", row.Version, after.Version, after.State)
	}
	res.add(func(r *results) { r.redone++ })

	// (f) The same identity with other content is blocked and recorded
	// once: no send, no overwrite (the send count above still wants 1).
	other := n
	other.Message.Body += " (re-rendered)"
	third := e.publish(t, other, x.name+" (other content)", res)
	e.claimLog(t, third, "intent handled", map[string]any{"outcome": "mismatch"}, sendTimeout, published)
	res.add(func(r *results) { r.mismatched = append(r.mismatched, k) })
}

// checkTransportRecord: the channel's transport recorded the send once (SES's
// captured email, or the webhook provider's message), as published and under
// the row's ack id.
func checkTransportRecord(t *testing.T, ctx context.Context, e *env, ch ledger.Channel, to, k string, n producer.Notification, row ledger.Entry) {
	t.Helper()
	// The transport's own record of the send.
	switch ch {
	case ledger.Email:
		all, err := CapturedEmails(ctx, e.web, e.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		got := EmailsTo(all, to)
		if len(got) != 1 {
			t.Fatalf("SES captured %d messages to %s, want 1", len(got), to)
		}
		m := got[0]
		if m.MessageID != row.AckID || m.Subject != n.Message.Subject || strings.TrimSpace(m.BodyText) != n.Message.Body {
			t.Errorf("SES message %s %q %q; want ack %s, the published subject and body", m.MessageID, m.Subject, m.BodyText, row.AckID)
		}
	case ledger.SMS:
		all, err := ProviderMessages(ctx, e.web, e.provider)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range all {
			if m.IdempotencyKey != k {
				continue
			}
			got = append(got, m.ID)
			if m.ID != row.AckID || m.To != to || m.Body != n.Message.Body || m.ContentHash != row.ContentHash || m.Channel != "sms" {
				t.Errorf("provider message %s to %s hash %s channel %s; want ack %s, the published address, body and hash", m.ID, m.To, m.ContentHash, m.Channel, row.AckID)
			}
		}
		if len(got) != 1 {
			t.Fatalf("webhook provider recorded %d messages under %s, want 1: %v", len(got), k, got)
		}
	}
}

// expired: (d) an intent that arrives within the expiry margin of its
// challenge is recorded expired, keeps no content and sends nothing.
func (e *env) expired(t *testing.T, run string, res *results) {
	challenge := run + "-expired"
	to := "success+" + challenge + "@" + simulatorDomain
	// Two seconds ahead: the producer still publishes it, and the claim sees
	// it inside the expiry margin (30 s by default).
	n := notification(challenge, ledger.Email, to, time.Now().Add(2*time.Second))
	k := key(n)
	res.add(func(r *results) {
		r.expect = append(r.expect, expectation{name: "expired " + challenge, emailTo: to, want: 0})
	})
	e.publish(t, n, "expired "+challenge, res)
	row := e.terminal(t, k, sendTimeout)
	if row.State != ledger.Expired || row.Reason == "" || row.Attempts != 0 {
		t.Fatalf("row %s: %s (%q), %d attempts; want expired with a reason, no attempt", k, row.State, row.Reason, row.Attempts)
	}
	t.Logf("%s: expired: %s", k[:12], row.Reason)
	if _, err := e.content.Get(context.Background(), k); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("sealed content of an expired row: got %v, want none", err)
	}
	res.add(func(r *results) { r.expired++ })
}

// poison: (e) a malformed intent is reported failed on every receive and
// ends in the DLQ after maxReceiveCount receives, its reason logged.
func (e *env) poison(t *testing.T, run string, res *results) {
	body := fmt.Sprintf(`{"e2e_run":%q,"note":"deliberately malformed intent"}`, run)
	e.refusedToDLQ(t, run, res, body, "body")
}

// sealedBody is the body the producer publishes for n, captured instead of
// sent: sealed by the deployed stack's keys.
func (e *env) sealedBody(t *testing.T, n producer.Notification) string {
	t.Helper()
	q := &captureQueue{}
	p := *e.producer
	p.Queue = q
	if _, err := p.Publish(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	return q.body
}

type captureQueue struct{ body string }

func (q *captureQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.body = aws.ToString(in.MessageBody)
	return &sqs.SendMessageOutput{MessageId: aws.String("captured")}, nil
}

// replayed: a sealed intent replayed with a later expires_at and another
// subject_ref is refused by claim (reason intent_mac), dead-lettered, and
// leaves no row; nothing of it is sent.
func (e *env) replayed(t *testing.T, run string, res *results) {
	n := notification(run+"-replayed", ledger.Email, "success+"+run+"-replayed@"+simulatorDomain, time.Now().Add(10*time.Minute))
	var doc map[string]any
	if err := json.Unmarshal([]byte(e.sealedBody(t, n)), &doc); err != nil {
		t.Fatal(err)
	}
	doc["expires_at"] = time.Now().Add(50 * time.Minute).UTC().Format(time.RFC3339)
	doc["subject_ref"] = "acct-victim"
	b, _ := json.Marshal(doc)
	e.refusedToDLQ(t, run, res, string(b), "intent_mac")
	e.noRow(t, n)
}

// farFuture: a properly sealed intent whose challenge expires in 2099 is
// refused by claim (reason expires_at: past MAX_CHALLENGE_LIFETIME),
// dead-lettered, and leaves no row.
func (e *env) farFuture(t *testing.T, run string, res *results) {
	n := notification(run+"-2099", ledger.Email, "success+"+run+"-2099@"+simulatorDomain, time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))
	e.refusedToDLQ(t, run, res, e.sealedBody(t, n), "expires_at")
	e.noRow(t, n)
}

func (e *env) noRow(t *testing.T, n producer.Notification) {
	t.Helper()
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: n.Channel}.Key()
	if row, err := e.store.Get(context.Background(), key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("a refused intent left a row: %s (%v)", row.State, err)
	}
}

// refusedToDLQ sends body to the intent queue and checks that claim refuses
// it on every receive, naming field, until the queue dead-letters it.
func (e *env) refusedToDLQ(t *testing.T, run string, res *results, body, field string) {
	ctx := context.Background()
	published := time.Now()
	out, err := e.queue.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.out.IntentQueueURL), MessageBody: aws.String(body)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.MessageId)
	res.add(func(r *results) { r.poison[id] = body })

	// Find it in the DLQ (shared with concurrent runs: match by id, leave the rest).
	// Each receive's visibility timeout, twice over (the emulator's poller falls behind on a
	// busy machine: a poison intent was seen reaching the DLQ 2m20s after it was published), and
	// a minute.
	timeout := 2*e.visibility*time.Duration(e.maxReceive) + 60*time.Second
	err = Poll(ctx, timeout, pollEvery, func(ctx context.Context) (bool, string, error) {
		got, err := e.queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.out.IntentDLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: 2, WaitTimeSeconds: 1,
		})
		if err != nil {
			return false, "", err
		}
		found := false
		for _, m := range got.Messages {
			if !found && (aws.ToString(m.MessageId) == id || aws.ToString(m.Body) == body) {
				if _, err := e.queue.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(e.out.IntentDLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
					return false, "", err
				}
				found = true
				continue
			}
			// Another scenario's (or run's) message: visible again at once, so that
			// the scenarios polling this DLQ side by side do not keep hiding each
			// other's messages for the whole wait.
			_, _ = e.queue.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
				QueueUrl: aws.String(e.out.IntentDLQURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
			})
		}
		if found {
			return true, "", nil
		}
		return false, "message " + id + " not in the DLQ", nil
	})
	if err != nil {
		t.Fatalf("poison intent: %v (lost)", err)
	}
	t.Logf("poison intent %s dead-lettered after %v", id, time.Since(published).Round(time.Second))

	lines := e.claimLog(t, id, "intent rejected", map[string]any{"receive_count": e.maxReceive}, 30*time.Second, published)
	receives := map[int]bool{}
	for _, l := range lines {
		if l["msg"] != "intent rejected" {
			t.Errorf("claim logged %q for the poison intent, want only rejections: %v", l["msg"], l)
			continue
		}
		reason, _ := l["reason"].(string)
		if !strings.Contains(reason, field) || l["will_dead_letter"] != true {
			t.Errorf("rejection without a reason naming %s or will_dead_letter: %v", field, l)
		}
		if strings.Contains(reason, run) {
			t.Errorf("rejection reason quotes the input: %q", reason)
		}
		c, _ := l["receive_count"].(float64)
		receives[int(c)] = true
	}
	for i := 1; i <= e.maxReceive; i++ {
		if !receives[i] {
			t.Errorf("no rejection logged for receive %d of %d", i, e.maxReceive)
		}
	}
	t.Logf("poison intent rejected %d times: %v", len(lines), lines[len(lines)-1]["reason"])
	res.add(func(r *results) { r.deadLettered++ })
}

// markEmulatorLog records the size of the log of the ministack serving the
// stack (localstack/ministack.sh writes .run/ministack-<port>.log; set
// E2E_EMULATOR_LOG for another path), so the test can read what the run
// appended. It returns nil when there is no such log to read: the endpoint
// is not a ministack this checkout started (LocalStack logs in its
// container). Under E2E_REQUIRED=1 a ministack without its log fails.
func (e *env) markEmulatorLog(t *testing.T) *EmulatorLog {
	t.Helper()
	path, explicit := os.Getenv("E2E_EMULATOR_LOG"), true
	if path == "" {
		explicit = false
		p, err := EmulatorLogPath("..", e.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		path = p
	}
	mark, err := MarkEmulatorLog(path)
	if err == nil {
		return &mark
	}
	isMinistack := getJSON(context.Background(), e.web, strings.TrimRight(e.endpoint, "/")+"/_ministack/health", &map[string]any{}) == nil
	if explicit || (isMinistack && os.Getenv("E2E_REQUIRED") == "1") {
		t.Fatalf("emulator log: %v; the test reads what ministack logs during the run (started by localstack/ministack.sh "+
			"with MINISTACK_PORT set to the endpoint's port, or name its log with E2E_EMULATOR_LOG)", err)
	}
	t.Logf("emulator log not checked: %v", err)
	return nil
}

// claimedOnce checks that the claim function handled every good intent
// exactly once, on its first receive: one "intent handled" line with
// receive_count 1 and no other line about its message id. A second line
// means the event source did not delete the message after the claim
// function succeeded. It returns how many were claimed once.
func (e *env) claimedOnce(t *testing.T, res *results, since time.Time) int {
	t.Helper()
	ctx := context.Background()
	group := LogGroup(e.out.ClaimFunction)
	lines := map[string][]map[string]any{}
	// Every good intent's line was waited for by its scenario; the poll only
	// covers the log's ingestion lag for the last ones.
	err := Poll(ctx, 30*time.Second, pollEvery, func(ctx context.Context) (bool, string, error) {
		missing := 0
		for _, g := range res.good {
			evs, err := FilterLogEvents(ctx, e.cfg, e.endpoint, group, `"`+g.id+`"`, since.Add(-time.Minute))
			if err != nil {
				return false, "", err
			}
			lines[g.id] = nil
			for _, ev := range evs {
				if m := jsonLine(ev.Message); m != nil && m["sqs_message_id"] == g.id {
					lines[g.id] = append(lines[g.id], m)
				}
			}
			if len(lines[g.id]) == 0 {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d good intents have no claim log line", missing, len(res.good)), nil
	})
	if err != nil {
		t.Errorf("claim function log (%s): %v", group, err)
	}
	once := 0
	for _, g := range res.good {
		got := lines[g.id]
		if len(got) == 1 && got[0]["msg"] == "intent handled" && matches(got[0], map[string]any{"receive_count": 1}) {
			once++
			continue
		}
		var seen []string
		for _, l := range got {
			seen = append(seen, fmt.Sprintf("%v (receive %v, outcome %v)", l["msg"], l["receive_count"], l["outcome"]))
		}
		t.Errorf("%s (message %s): claim logged %v; want exactly one \"intent handled\" on receive 1", g.name, g.id, seen)
	}
	return once
}

// deadLetters checks the intent DLQ after the run: the poison scenario took
// out the one poison intent it sent, so no message of this run may be left,
// and above all no good intent. Messages of other runs are only counted. It
// returns how many good intents it found there.
func (e *env) deadLetters(t *testing.T, run string, res *results) int {
	t.Helper()
	msgs, err := e.drainView(e.out.IntentDLQURL)
	if err != nil {
		t.Errorf("intent DLQ: %v", err)
	}
	goodIDs := map[string]string{}
	for _, g := range res.good {
		goodIDs[g.id] = g.name
	}
	good, others := 0, 0
	for _, m := range msgs {
		id, body := aws.ToString(m.MessageId), aws.ToString(m.Body)
		poisonBody, isPoison := res.poison[id]
		for pid, b := range res.poison {
			if b == body {
				poisonBody, isPoison, id = b, true, pid
			}
		}
		switch {
		case isPoison:
			t.Errorf("poison intent %s is in the intent DLQ again after the scenario took it out (%d bytes)", id, len(poisonBody))
		case goodIDs[id] != "":
			good++
			t.Errorf("%s (message %s) was dead-lettered: the claim function handled it, the event source did not delete it", goodIDs[id], id)
		case strings.Contains(body, run):
			good++
			t.Errorf("a good intent of this run (message %s) was dead-lettered", id)
		default:
			others++
		}
	}
	if len(res.poison) != res.deadLettered {
		t.Errorf("%d poison intents sent, %d found in the intent DLQ", len(res.poison), res.deadLettered)
	}
	t.Logf("intent DLQ after the run: %d good intents of this run, %d messages of other runs", good, others)
	return good
}

// drainView lists every message on queue without removing any: it counts
// first, then receives with a short visibility until every message was seen
// (a receive whose response the emulator dropped leaves its messages in
// flight until they reappear).
func (e *env) drainView(queue string) ([]sqstypes.Message, error) {
	ctx := context.Background()
	attrs, err := e.queue.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queue), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return nil, err
	}
	visible, _ := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	seen := map[string]sqstypes.Message{}
	deadline := time.Now().Add(15 * time.Second)
	for len(seen) < visible+inFlight && time.Now().Before(deadline) {
		got, err := e.queue.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queue), MaxNumberOfMessages: 10, VisibilityTimeout: 2, WaitTimeSeconds: 1,
		})
		if err != nil {
			return nil, err
		}
		for _, m := range got.Messages {
			seen[aws.ToString(m.MessageId)] = m
		}
	}
	out := make([]sqstypes.Message, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	if len(out) < visible+inFlight {
		return out, fmt.Errorf("saw %d of the %d messages it holds within 15s", len(out), visible+inFlight)
	}
	return out, nil
}

// mismatchedOnce checks that every row offered other content once recorded
// exactly one content_mismatch event: a second one means the mismatching
// intent was received and handled again.
func (e *env) mismatchedOnce(t *testing.T, res *results) {
	t.Helper()
	for _, k := range res.mismatched {
		row, err := e.store.Get(context.Background(), k)
		if err != nil {
			t.Errorf("row %s: %v", k, err)
			continue
		}
		events := 0
		for _, ev := range row.History {
			if ev.Kind == ledger.KindContentMismatch {
				events++
			}
		}
		if events != 1 || row.Mismatches != 1 || row.State != ledger.Accepted {
			t.Errorf("row %s offered other content once: %d content_mismatch events, mismatch count %d, state %s; want 1, 1, accepted",
				k, events, row.Mismatches, row.State)
		}
	}
}

// captured returns what the transports captured: SES's emails and the
// webhook provider's messages.
func (e *env) captured(t *testing.T, ctx context.Context) ([]Email, []webhooktest.RecordedMessage) {
	t.Helper()
	emails, err := CapturedEmails(ctx, e.web, e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := ProviderMessages(ctx, e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	return emails, msgs
}
