package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

type intentCase struct {
	Name         string         `json:"name"`
	Raw          *string        `json:"raw"`
	Set          map[string]any `json:"set"`
	Delete       []string       `json:"delete"`
	Truncate     int            `json:"truncate"`
	Append       string         `json:"append"`
	AppendInside string         `json:"append_inside"`
	Special      string         `json:"special"`
	// Unsealed keeps the producer's seal as it was: the edit is a change
	// after sealing (a replayed copy with other metadata). Otherwise an
	// edited body that still decodes is sealed again, as a producer would
	// have sealed it, so that the case tests the field, not the seal.
	Unsealed bool `json:"unsealed"`
	Expect   struct {
		Outcome, Field, Reason string
	} `json:"expect"`
}

type streamCase struct {
	Name   string          `json:"name"`
	Record json.RawMessage `json:"record"`
	Expect string          `json:"expect"`
	Reason string          `json:"reason"`
}

func loadCases[T any](t *testing.T, path string) []T {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Cases []T }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(doc.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return doc.Cases
}

// expand replaces ${repeat:c:n} in s.
func expand(s string, vars map[string]string) string {
	for k, v := range vars {
		s = strings.ReplaceAll(s, "${"+k+"}", v)
	}
	for {
		i := strings.Index(s, "${repeat:")
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], "}")
		parts := strings.SplitN(s[i+len("${repeat:"):i+j], ":", 2)
		n, _ := strconv.Atoi(parts[1])
		s = s[:i] + strings.Repeat(parts[0], n) + s[i+j+1:]
	}
}

func expandAny(v any, vars map[string]string) any {
	if s, ok := v.(string); ok {
		return expand(s, vars)
	}
	return v
}

// setPath sets a dotted path in a decoded JSON document.
func setPath(doc map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	m := doc
	for _, p := range parts[:len(parts)-1] {
		m = m[p].(map[string]any)
	}
	m[parts[len(parts)-1]] = v
}

// TestBadInput feeds every case of testdata/bad through the real handlers
// (intents through SQS into claim, stream records into dispatch) and checks
// that each gets a clear reason and none is dropped or half-applied.
func TestBadInput(t *testing.T) {
	b := &badRun{t: t, p: pipelinetest.NewWithOptions(t, pipelinetest.Options{MaxReceives: 2})}
	b.store = dynamostore.New(b.p.DB, b.p.LedgerTable, dynamostore.DefaultShards)
	all := b.sendIntentCases(loadCases[intentCase](t, "testdata/bad/intents.json"))
	ev := b.drain()
	wantDLQ := 0
	for _, s := range all {
		if s.c.Expect.Outcome == "dlq" {
			wantDLQ++
		}
		t.Run(s.c.Name, func(t *testing.T) { b.checkIntentCase(t, ev, s) })
	}
	// SQS is at-least-once: a publish retried after a lost response is a
	// second copy of the same body, so count distinct bodies.
	distinct := map[string]bool{}
	for _, m := range ev.dlq {
		distinct[m.body] = true
	}
	if len(distinct) != wantDLQ {
		t.Errorf("DLQ holds %d distinct messages, want exactly the %d rejected ones", len(distinct), wantDLQ)
	}
	if rows := len(b.p.ScanLedger()); rows != len(all)-wantDLQ {
		t.Errorf("ledger holds %d rows, want %d (one per accepted case)", rows, len(all)-wantDLQ)
	}
	b.streamCases(all, ev.captured)
	b.p.AssertNoSecrets()
	if strings.Contains(b.p.Out.String(), ledgertest.Canary) {
		t.Error("a rejected body leaked into the logs")
	}
}

// badRun is one run of TestBadInput over one pipeline.
type badRun struct {
	t     *testing.T
	p     *pipelinetest.Pipeline
	store *dynamostore.Store
}

// sent is one intent case as published: the bodies sent (more than one for
// a case that sends a changed copy), their message ids, and the identity's
// key and address.
type sent struct {
	c      intentCase
	key    string
	to     string
	bodies []string
	ids    []string
}

// seal seals n's message under key with the stack's key.
func (b *badRun) seal(n producer.Notification, key string) envelope.Envelope {
	b.t.Helper()
	env, err := b.p.Producer.Sealer.Seal(b.p.Ctx, key, n.Message)
	if err != nil {
		b.t.Fatal(err)
	}
	return env
}

// valid returns the valid notification i, its intent and its sealed content.
func (b *badRun) valid(i int) (producer.Notification, ledger.Intent, envelope.Envelope) {
	n := b.p.Notification(i, ledger.Email, 10*time.Minute)
	in := ledger.Intent{
		Identity: ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: n.Channel},
		Workflow: n.Workflow, DestinationRef: n.DestinationRef, IssuedAt: b.p.Now(), ExpiresAt: n.ExpiresAt,
		TemplateID: n.TemplateID, TemplateVersion: n.TemplateVersion, PolicyVersion: n.PolicyVersion,
		ContentHash: ledger.ContentHash(n.TemplateID, n.TemplateVersion, n.Message),
	}
	return n, in, b.seal(n, in.Key())
}

func (b *badRun) encode(in ledger.Intent, env envelope.Envelope) []byte {
	binding, err := intent.Binding(in, env)
	if err != nil {
		b.t.Fatal(err)
	}
	seal, err := b.p.Seals.Sign(b.p.Ctx, binding)
	if err != nil {
		b.t.Fatal(err)
	}
	body, err := intent.Encode(in, env, seal)
	if err != nil {
		b.t.Fatal(err)
	}
	return body
}

// sendIntentCases builds every case's bodies from a valid intent and sends
// them to the intents queue.
func (b *badRun) sendIntentCases(cases []intentCase) []*sent {
	var all []*sent
	for i, c := range cases {
		all = append(all, b.intentCase(i, c))
	}
	for _, s := range all {
		for i := range s.bodies {
			out, err := b.p.SQS.SendMessage(b.p.Ctx, &sqs.SendMessageInput{QueueUrl: &b.p.QueueURL, MessageBody: &s.bodies[i]})
			if err != nil {
				b.t.Fatalf("%s: send: %v", s.c.Name, err)
			}
			s.ids = append(s.ids, *out.MessageId)
		}
	}
	return all
}

// intentCase builds the bodies of case i: a special case changes the sealed
// content or its binding; any other edits the valid intent's JSON.
func (b *badRun) intentCase(i int, c intentCase) *sent {
	n, in, env := b.valid(100 + i)
	s := &sent{c: c, key: in.Key(), to: n.Message.To}
	var body []byte
	switch c.Special {
	case "hash_mismatch":
		other := n
		other.Message.Body += " (another rendering)"
		in.ContentHash = ledger.ContentHash(n.TemplateID, n.TemplateVersion, other.Message)
		body = b.encode(in, env)
	case "tampered":
		env.CT = bytes.Clone(env.CT)
		env.CT[len(env.CT)/2] ^= 0x5a
		body = b.encode(in, env)
	case "other_key":
		_, otherIn, _ := b.valid(900 + i)
		body = b.encode(in, b.seal(n, otherIn.Key()))
	case "changed_hash":
		body = b.encode(in, env)
		changed := n
		changed.TemplateVersion = "4"
		changed.Message.Body += " (reworded)"
		in2 := in
		in2.TemplateVersion = "4"
		in2.ContentHash = ledger.ContentHash(changed.TemplateID, changed.TemplateVersion, changed.Message)
		s.bodies = append(s.bodies, string(body))
		body = b.encode(in2, b.seal(changed, in.Key()))
	case "":
		body = b.edit(c, b.encode(in, env))
	default:
		b.t.Fatalf("%s: unknown special %q", c.Name, c.Special)
	}
	s.bodies = append(s.bodies, string(body))
	return s
}

// edit applies a case's edits to a valid intent body: a raw replacement, or
// fields set and deleted, then truncation and appended text.
func (b *badRun) edit(c intentCase, body []byte) []byte {
	if c.Raw != nil {
		return []byte(*c.Raw)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		b.t.Fatal(err)
	}
	for path, v := range c.Set {
		if arr, ok := v.([]any); ok {
			setPath(doc, path, arr)
			continue
		}
		setPath(doc, path, expandAny(v, nil))
	}
	for _, f := range c.Delete {
		delete(doc, f)
	}
	body = marshalDoc(b.t, doc)
	if dec, err := intent.Decode(body); err == nil && dec.Version == intent.SchemaVersion && !c.Unsealed {
		seal, err := b.p.Seals.Sign(b.p.Ctx, dec.Binding)
		if err != nil {
			b.t.Fatal(err)
		}
		doc["intent_mac"] = seal
		body = marshalDoc(b.t, doc)
	}
	if c.Truncate > 0 {
		body = body[:c.Truncate]
	}
	if c.AppendInside != "" {
		body = append(body[:len(body)-1], []byte(c.AppendInside+"}")...)
	}
	return append(body, []byte(c.Append)...)
}

func marshalDoc(t *testing.T, doc map[string]any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(buf.Bytes())
}

// badEvidence is what the intent cases left: the DLQ, the reasons the claim
// function logged, the emails sent and the content table.
type badEvidence struct {
	dlq      []dlqMsg
	reasons  map[string]string
	captured int
	emails   map[string]int
	contents string
}

// drain delivers the queue to claim until it is empty and the stream to
// dispatch, then collects the evidence.
func (b *badRun) drain() *badEvidence {
	for round := 0; round <= 2; round++ {
		pumpQueueRound(b.t, b.p, 1)
	}
	// A receive whose answer was lost on the way leaves its messages in
	// flight until their visibility timeout: wait them out, then pump again.
	for tries := 0; !queueEmpty(b.t, b.p) && tries < 3; tries++ {
		b.p.WaitInFlight()
		pumpQueueRound(b.t, b.p, 1)
	}
	if !queueEmpty(b.t, b.p) {
		b.t.Fatal("intents queue did not drain")
	}
	for pumps := 0; pumps < 3; pumps++ {
		b.p.PumpStream()
	}
	ev := &badEvidence{dlq: drainDLQ(b.t, b.p), reasons: logReasons(b.p.Out.String())}
	ev.captured, ev.emails = capturedEmails(b.t, b.p)
	ev.contents = strings.Join(b.p.ScanTable(b.p.ContentTable), "\n")
	return ev
}

func (ev *badEvidence) inDLQ(body string) bool {
	for _, m := range ev.dlq {
		if m.body == body {
			return true
		}
	}
	return false
}

// checkIntentCase checks one intent case ended as its corpus entry expects:
// dead-lettered with a reason naming the field and no row; expired or
// quarantined with the reason and nothing sent; or a recorded mismatch with
// the original sent once. No case leaves sealed content behind.
func (b *badRun) checkIntentCase(t *testing.T, ev *badEvidence, s *sent) {
	row, rowErr := b.store.Get(b.p.Ctx, s.key)
	if strings.Contains(ev.contents, s.key) {
		t.Errorf("sealed content left in the content table")
	}
	switch s.c.Expect.Outcome {
	case "dlq":
		if !ev.inDLQ(s.bodies[0]) {
			t.Errorf("not in the DLQ")
		}
		reason := ev.reasons[s.ids[0]]
		if !strings.Contains(reason, s.c.Expect.Field) {
			t.Errorf("logged reason %q does not name %q", reason, s.c.Expect.Field)
		}
		if rowErr == nil {
			t.Errorf("a row was written for rejected input: %s", row.State)
		}
	case "expired", "quarantined":
		if rowErr != nil {
			t.Fatalf("no row: %v", rowErr)
		}
		if string(row.State) != s.c.Expect.Outcome || !strings.Contains(row.Reason, s.c.Expect.Reason) {
			t.Errorf("row %s %q, want %s %q", row.State, row.Reason, s.c.Expect.Outcome, s.c.Expect.Reason)
		}
		if ev.emails[s.to] != 0 {
			t.Errorf("%d emails sent", ev.emails[s.to])
		}
	case "mismatch":
		if rowErr != nil {
			t.Fatalf("no row: %v", rowErr)
		}
		found := false
		for _, e := range row.History {
			found = found || e.Kind == ledger.KindContentMismatch && strings.Contains(e.Reason, s.c.Expect.Reason)
		}
		if row.State != ledger.Accepted || row.Mismatches != 1 || !found || ev.emails[s.to] != 1 {
			t.Errorf("row %s mismatches %d event %v emails %d", row.State, row.Mismatches, found, ev.emails[s.to])
		}
	default:
		t.Fatalf("unknown expected outcome %q", s.c.Expect.Outcome)
	}
	if rowErr == nil {
		if err := row.Verify(); err != nil {
			t.Error(err)
		}
	}
}

// streamCases feeds every stream case to dispatch, each on its own (it must
// change no row and send nothing; an unreadable one is reported by its
// sequence number with a logged reason) and then all in one batch (the
// first unreadable record is the one reported, so the event source
// redelivers it and everything after it).
func (b *badRun) streamCases(all []*sent, captured int) {
	t, p := b.t, b.p
	var acceptedKey string
	for _, s := range all {
		if s.c.Expect.Outcome == "mismatch" {
			acceptedKey = s.key
		}
	}
	missing := sha256.Sum256([]byte("no such row " + p.LedgerTable))
	vars := map[string]string{
		"missing_key": hex.EncodeToString(missing[:]), "upper_key": strings.ToUpper(hex.EncodeToString(missing[:])),
		"accepted_key": acceptedKey,
	}
	scases := loadCases[streamCase](t, "testdata/bad/stream.json")
	var batch []events.DynamoDBEventRecord
	for i, c := range scases {
		var rec events.DynamoDBEventRecord
		t.Run("stream/"+c.Name, func(t *testing.T) {
			if err := json.Unmarshal([]byte(expand(string(c.Record), vars)), &rec); err != nil {
				t.Fatalf("corpus record: %v", err)
			}
			rec.Change.SequenceNumber = fmt.Sprintf("%021d", 1000+i)
			batch = append(batch, rec)
			b.checkStreamCase(t, c, rec, captured)
		})
	}
	resp, err := p.Dispatch.Handle(p.Ctx, events.DynamoDBEvent{Records: batch})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range scases {
		if c.Expect == "failed" {
			if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != batch[i].Change.SequenceNumber {
				t.Errorf("mixed batch: failures %v, want the first unreadable record %s", resp.BatchItemFailures, batch[i].Change.SequenceNumber)
			}
			break
		}
	}
}

// checkStreamCase delivers one stream record on its own and checks the
// answer and the log against the case; no row changes and nothing is sent.
func (b *badRun) checkStreamCase(t *testing.T, c streamCase, rec events.DynamoDBEventRecord, sentBefore int) {
	p := b.p
	before := len(p.Out.String())
	beforeRows := versions(t, p)
	resp, err := p.Dispatch.Handle(p.Ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}})
	if err != nil {
		t.Fatalf("the whole batch failed: %v", err)
	}
	logs := p.Out.String()[before:]
	switch c.Expect {
	case "failed":
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != rec.Change.SequenceNumber {
			t.Fatalf("failures %v, want the record's sequence number", resp.BatchItemFailures)
		}
		if !strings.Contains(logs, "unreadable stream record") || !strings.Contains(logs, c.Reason) || !strings.Contains(logs, rec.Change.SequenceNumber) {
			t.Errorf("no clear reason logged: %s", logs)
		}
	case "ignored", "skipped", "duplicate":
		if len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", resp.BatchItemFailures)
		}
		if c.Reason != "" && !strings.Contains(logs, c.Reason) {
			t.Errorf("log does not say %q: %s", c.Reason, logs)
		}
	default:
		t.Fatalf("unknown expectation %q", c.Expect)
	}
	if after := versions(t, p); after != beforeRows {
		t.Errorf("the ledger changed")
	}
	now, err := p.SESCaptured()
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != sentBefore {
		t.Errorf("%d emails sent", len(now)-sentBefore)
	}
}

// versions fingerprints the ledger: every row's key and version.
func versions(t *testing.T, p *pipelinetest.Pipeline) string {
	t.Helper()
	var keys []string
	in := &dynamodb.ScanInput{TableName: &p.LedgerTable, ConsistentRead: aws.Bool(true)}
	for {
		out, err := p.DB.Scan(p.Ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			e, err := dynamostore.DecodeItem(it) // either stored form
			if err != nil {
				t.Fatalf("a row that does not decode: %v", err)
			}
			keys = append(keys, fmt.Sprintf("%s@%d", e.Key, e.Version))
		}
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}
