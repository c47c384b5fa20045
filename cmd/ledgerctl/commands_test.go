package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// scenario holds the keys of the rows populate writes.
type scenario struct {
	acceptedEmail, rejectedSMS string // challenge 1, dual workflow
	quarantined                string // challenge 4
	unknown                    string // challenge 3
	stuckDispatching           string // challenge 5, past its lease
	freshDispatching           string // challenge 6, inside its lease
	claimed                    string // challenge 7
	deferred                   string // challenge 8, throttled once
}

// populate writes one row per interesting state through the ledger's use cases and
// leaves the clock at Epoch+13m:
//
//	Epoch       chal-1 email accepted, chal-1 sms rejected (dual)
//	Epoch+1m    chal-4 email unknown, quarantined by reconcile at Epoch+6m
//	Epoch+7m    chal-3 sms unknown
//	Epoch+8m    chal-5 email dispatching, lease ends Epoch+10m
//	Epoch+12m   chal-6 email dispatching (lease ends Epoch+14m), chal-7 email claimed
func populate(f *fixture) scenario {
	f.t.Helper()
	var s scenario
	s.acceptedEmail = f.claim(1, ledger.Email, ledger.Dual)
	s.rejectedSMS = f.claim(1, ledger.SMS, ledger.Dual)
	if out := f.dispatch(s.acceptedEmail, ledgertest.Accept); out != ledger.OutcomeAccepted {
		f.t.Fatalf("dispatch chal-1 email: %s", out)
	}
	if out := f.dispatch(s.rejectedSMS, ledgertest.Reject); out != ledger.OutcomeRejected {
		f.t.Fatalf("dispatch chal-1 sms: %s", out)
	}
	f.clock.Advance(time.Minute)
	s.quarantined = f.claim(4, ledger.Email, ledger.Single)
	if out := f.dispatch(s.quarantined, ledgertest.AcceptThenDrop); out != ledger.OutcomeUnknown {
		f.t.Fatalf("dispatch chal-4: %s", out)
	}
	f.clock.Advance(5 * time.Minute)
	f.reconcile()
	if st := f.get(s.quarantined).State; st != ledger.Quarantined {
		f.t.Fatalf("chal-4 is %s after reconcile, want quarantined", st)
	}
	f.clock.Advance(time.Minute)
	s.unknown = f.claim(3, ledger.SMS, ledger.Single)
	if out := f.dispatch(s.unknown, ledgertest.AcceptThenDrop); out != ledger.OutcomeUnknown {
		f.t.Fatalf("dispatch chal-3: %s", out)
	}
	f.clock.Advance(time.Minute)
	s.stuckDispatching = f.claim(5, ledger.Email, ledger.Single)
	f.crashDispatch(s.stuckDispatching)
	f.clock.Advance(4 * time.Minute)
	s.freshDispatching = f.claim(6, ledger.Email, ledger.Single)
	f.crashDispatch(s.freshDispatching)
	s.claimed = f.claim(7, ledger.Email, ledger.Single)
	s.deferred = f.claim(8, ledger.SMS, ledger.Single)
	if out := f.dispatch(s.deferred, ledgertest.Throttle); out != ledger.OutcomeDeferred {
		f.t.Fatalf("dispatch chal-8: %s", out)
	}
	f.clock.Advance(time.Minute)
	return s
}

func TestExplainText(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	out, errOut, code := f.run("explain", chal(1))
	wantCode(t, code, exitOK, out, errOut)
	email, sms := f.get(s.acceptedEmail), f.get(s.rejectedSMS)
	for _, want := range []string{
		"chal-000001 / email  [accepted]",
		"chal-000001 / sms  [rejected]",
		"dedupe key:      " + s.acceptedEmail + "  (the idempotency key of every attempt)",
		"content hash:    " + email.ContentHash,
		"ack id:          " + email.AckID,
		"hash chain:      verified (3 entries)",
		"none -> claimed",
		"claimed -> dispatching",
		"dispatching -> accepted",
		"dispatching -> rejected",
		"reason:  intent claimed",
		"transport rejected: destination suppressed",
		"worker:  claim/req-chal-000001   policy: policy-1   attempt: 0",
		"worker:  dispatch/req-1   policy: policy-1   attempt: 1   ack id: " + email.AckID,
		"[0] 2026-11-30 09:00:00.000Z  none -> claimed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q", want)
		}
	}
	if email.AckID == "" || sms.State != ledger.Rejected {
		t.Fatalf("fixture rows are not as expected: email ack %q, sms %s", email.AckID, sms.State)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestExplainShowsAttempts(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	row := f.get(s.deferred)
	out, errOut, code := f.run("explain", chal(8))
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{
		"chal-000008 / sms  [deferred]",
		"next attempt:    " + textTime(row.NextAttemptAt),
		"not sent because: " + ledgertest.ThrottleCode,
		"attempts:",
		"#1  2026-11-30 09:12:00.000Z  -> deferred  not sent: " + ledgertest.ThrottleCode + "  next attempt " + textTime(row.NextAttemptAt),
		"dispatching -> deferred",
		"not sent: " + ledgertest.ThrottleCode + "   next attempt: " + textTime(row.NextAttemptAt),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q", want)
		}
	}
	out, errOut, code = f.run("explain", "--json", chal(8))
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		Rows []rowView `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Rows) != 1 {
		t.Fatalf("explain --json: %v\n%s", err, out)
	}
	if log := got.Rows[0].AttemptLog; len(log) != 1 || log[0].Result != "deferred" || log[0].Code != ledgertest.ThrottleCode || log[0].NextAttemptAt == "" {
		t.Errorf("attempt log %+v", log)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestExplainJSON(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	out, errOut, code := f.run("explain", "--json", chal(1))
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		ChallengeID string    `json:"challenge_id"`
		Rows        []rowView `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("explain --json is not JSON: %v\n%s", err, out)
	}
	if got.ChallengeID != chal(1) || len(got.Rows) != 2 {
		t.Fatalf("got challenge %q with %d rows, want %s with 2", got.ChallengeID, len(got.Rows), chal(1))
	}
	byChannel := map[string]rowView{}
	for _, r := range got.Rows {
		byChannel[r.Channel] = r
	}
	em := byChannel["email"]
	want := f.get(s.acceptedEmail)
	if em.DedupeKey != s.acceptedEmail || em.IdempotencyKey != s.acceptedEmail || em.State != "accepted" || em.ContentHash != want.ContentHash || em.Workflow != "dual" {
		t.Errorf("email row = %+v", em)
	}
	if !em.Chain.Verified || em.Chain.Entries != 3 || len(em.History) != 3 {
		t.Errorf("email chain %+v with %d entries", em.Chain, len(em.History))
	}
	last := em.History[2]
	if last.From != "dispatching" || last.To != "accepted" || last.AckID != want.AckID || last.AckID == "" ||
		last.Worker != "dispatch/req-1" || last.PolicyVersion != "policy-1" || last.Attempt != 1 || last.ContentHash != want.ContentHash {
		t.Errorf("last email entry = %+v", last)
	}
	if last.At != "2026-11-30T09:00:00Z" || last.Hash != want.History[2].Hash || last.PrevHash != want.History[1].Hash {
		t.Errorf("last email entry time or hashes = %+v", last)
	}
	if r := byChannel["sms"]; r.State != "rejected" || r.History[2].Reason == "" {
		t.Errorf("sms row = %+v", r)
	}
}

func TestExplainNotFoundAndBadID(t *testing.T) {
	f := newFixture(t)
	out, errOut, code := f.run("explain", "chal-does-not-exist")
	wantCode(t, code, exitNotFound, out, errOut)
	if !strings.Contains(errOut, "no ledger rows for challenge chal-does-not-exist") {
		t.Errorf("stderr = %q", errOut)
	}
	out, errOut, code = f.run("explain", "bad id with spaces")
	wantCode(t, code, exitUsage, out, errOut)
}

func TestStuck(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	out, errOut, code := f.run("stuck")
	wantCode(t, code, exitOK, out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("stuck printed %d lines, want a header and 3 rows:\n%s", len(lines), out)
	}
	// Oldest first: quarantined since +6m, unknown since +7m, dispatching since +8m.
	for i, want := range []struct{ age, state, key, status string }{
		{"7m0s", "quarantined", s.quarantined, "needs an operator decision"},
		{"6m0s", "unknown", s.unknown, "reconcile"},
		{"5m0s", "dispatching", s.stuckDispatching, "lease expired 3m0s ago"},
	} {
		l := lines[i+1]
		if !strings.HasPrefix(l, want.age+" ") || !strings.Contains(l, want.state) || !strings.Contains(l, want.key) || !strings.Contains(l, want.status) {
			t.Errorf("line %d = %q, want age %s, %s, %s, %q", i+1, l, want.age, want.state, want.key, want.status)
		}
	}
	for _, key := range []string{s.freshDispatching, s.claimed, s.acceptedEmail} {
		if strings.Contains(out, key) {
			t.Errorf("stuck lists %s, which is not stuck", key)
		}
	}

	out, errOut, code = f.run("stuck", "--json")
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		Rows []stuckView `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range got.Rows {
		keys = append(keys, r.DedupeKey)
	}
	if want := []string{s.quarantined, s.unknown, s.stuckDispatching}; !slices.Equal(keys, want) {
		t.Errorf("stuck --json keys = %v, want %v", keys, want)
	}
	if len(got.Rows) == 3 && (got.Rows[0].AgeSeconds != 420 || got.Rows[2].LeaseUntil != "2026-11-30T09:10:00Z") {
		t.Errorf("stuck --json rows = %+v", got.Rows)
	}
}

func TestStats(t *testing.T) {
	f := newFixture(t)
	populate(f)
	out, errOut, code := f.run("stats", "--json")
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		States []struct {
			State         string         `json:"state"`
			Open          int            `json:"open"`
			OldestSeconds float64        `json:"oldest_seconds"`
			ByAge         map[string]int `json:"by_age"`
		} `json:"states"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	type row struct {
		open          int
		oldest        float64
		oneToFive     int
		fiveToFifteen int
	}
	// Due rows only, and how long past due (the sweep time of each state).
	want := map[string]row{
		"held":        {0, 0, 0, 0},   // no fallback rows in this fixture
		"claimed":     {0, 0, 0, 0},   // chal-7: its challenge has not expired
		"dispatching": {1, 180, 1, 0}, // chal-5's lease ended 3 min ago; chal-6's has not
		"unknown":     {1, 300, 0, 1}, // chal-3, due for its check 5 min ago
		"quarantined": {1, 420, 0, 1}, // chal-4, quarantined 7 min ago: always due
		"deferred":    {1, 0, 0, 0},   // chal-8: its next attempt, 1-2 s after the throttle (jitter), a minute ago
	}
	if len(got.States) != len(want) {
		t.Fatalf("stats has %d states, want %d:\n%s", len(got.States), len(want), out)
	}
	for _, st := range got.States {
		w := want[st.State]
		g := row{st.Open, st.OldestSeconds, st.ByAge["1m0s-5m0s"], st.ByAge["5m0s-15m0s"]}
		if st.State == "deferred" {
			if st.OldestSeconds < 58 || st.OldestSeconds > 59 || st.ByAge["0-1m0s"] != 1 {
				t.Errorf("stats deferred = %+v, want one row 58-59 s past due", st)
			}
			g.oldest = 0
		}
		if g != w {
			t.Errorf("stats %s = %+v, want %+v", st.State, g, w)
		}
	}
	out, errOut, code = f.run("stats")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "quarantined") || !strings.Contains(out, "5m0s-15m0s") {
		t.Errorf("stats text:\n%s", out)
	}
}

func TestResolve(t *testing.T) {
	f := newFixture(t)
	s := populate(f)

	// Accepted needs evidence: refused as a usage error, row untouched.
	before := f.get(s.quarantined)
	out, errOut, code := f.run("resolve", s.quarantined, "--decision", "accepted", "--reason", "provider console shows it")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, "needs --evidence") {
		t.Errorf("stderr = %q", errOut)
	}
	if got := f.get(s.quarantined); got.Version != before.Version {
		t.Fatalf("a refused decision wrote the row (version %d -> %d)", before.Version, got.Version)
	}

	out, errOut, code = f.run("resolve", s.quarantined, "--decision", "accepted", "--evidence", "ses-0100-abc",
		"--reason", "provider console shows it delivered", "--note", "OPS-17")
	wantCode(t, code, exitOK, out, errOut)
	e := f.get(s.quarantined)
	last := e.Last()
	if e.State != ledger.Accepted || e.AckID != "ses-0100-abc" || !strings.HasPrefix(last.Worker, "operator:arn:") || last.AckID != "ses-0100-abc" ||
		last.From != ledger.Quarantined || last.Reason != "operator decision with transport evidence: provider console shows it delivered; note: OPS-17" {
		t.Errorf("after resolve: state %s ack %q last %+v", e.State, e.AckID, last)
	}
	if err := e.Verify(); err != nil {
		t.Errorf("resolved row does not verify: %v", err)
	}
	for _, want := range []string{"resolved: accepted", "quarantined -> accepted", last.Worker, "note: OPS-17", "ses-0100-abc"} {
		if !strings.Contains(out, want) {
			t.Errorf("resolve output lacks %q:\n%s", want, out)
		}
	}

	// Abandoned, without a note.
	out, errOut, code = f.run("resolve", s.unknown, "--decision", "abandoned", "--reason", "provider has no record API", "--json")
	wantCode(t, code, exitOK, out, errOut)
	var got struct {
		State string    `json:"state"`
		Entry eventView `json:"entry"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.State != "abandoned" || got.Entry.From != "unknown" || !strings.HasPrefix(got.Entry.Reason, "abandoned, outcome unknown: ") ||
		!strings.HasPrefix(got.Entry.Worker, "operator:arn:") || got.Entry.AckID != "" {
		t.Errorf("abandon = %+v", got)
	}
	if e := f.get(s.unknown); e.State != ledger.Abandoned || e.AckID != "" {
		t.Errorf("abandoned row: state %s ack %q", e.State, e.AckID)
	}

	// A closed row cannot be resolved; an unknown key is not found.
	out, errOut, code = f.run("resolve", s.acceptedEmail, "--decision", "abandoned", "--reason", "x")
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(errOut, "is accepted: only unknown or quarantined rows can be resolved") {
		t.Errorf("stderr = %q", errOut)
	}
	unknownKey := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-none", Channel: ledger.SMS}.Key()
	out, errOut, code = f.run("resolve", unknownKey, "--decision", "abandoned", "--reason", "x")
	wantCode(t, code, exitNotFound, out, errOut)
	out, errOut, code = f.run("resolve", "not-a-key", "--decision", "abandoned", "--reason", "x")
	wantCode(t, code, exitUsage, out, errOut)
	out, errOut, code = f.run("resolve", s.stuckDispatching, "--decision", "maybe", "--reason", "x")
	wantCode(t, code, exitUsage, out, errOut)
}

// editReason rewrites the reason of history entry i directly in DynamoDB,
// as someone with write access to the table could.
func editReason(t *testing.T, f *fixture, key string, i int, reason string) {
	t.Helper()
	_, err := f.db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 &f.table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("SET #h[" + string(rune('0'+i)) + "].#why = :why"),
		ExpressionAttributeNames:  map[string]string{"#h": "history", "#why": "why"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":why": &types.AttributeValueMemberS{Value: reason}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.get(key).History[i].Reason; got != reason {
		t.Fatalf("edit did not land: reason %q", got)
	}
}

func TestVerifyDetectsEditedHistory(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	out, errOut, code := f.run("verify", chal(1))
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "ok: 2 rows, 6 history entries") {
		t.Errorf("verify output = %q", out)
	}
	out, errOut, code = f.run("verify", "--all")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "ok: 8 rows") {
		t.Errorf("verify --all output = %q", out)
	}

	editReason(t, f, s.acceptedEmail, 1, "claimed -> dispatching (nothing to see here)")

	out, errOut, code = f.run("verify", chal(1))
	wantCode(t, code, exitFailure, out, errOut)
	for _, want := range []string{"broken ROW " + s.acceptedEmail + ": the hash chain does not verify (challenge chal-000001 / email", "entry 1", "[1] ", "<-- first failing entry", "nothing to see here"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chal-000001 / sms") {
		t.Errorf("verify blames the untouched sms row:\n%s", out)
	}
	if !strings.Contains(errOut, "1 of 2 rows have a broken hash chain") {
		t.Errorf("stderr = %q", errOut)
	}

	out, errOut, code = f.run("verify", "--all")
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(errOut, "1 of 8 rows") || !strings.Contains(out, s.acceptedEmail) {
		t.Errorf("verify --all: stdout %q stderr %q", out, errOut)
	}

	// explain still shows the row, and says the chain is broken.
	out, errOut, code = f.run("explain", "--json", chal(1))
	wantCode(t, code, exitOK, out, errOut)
	var got struct{ Rows []rowView }
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	for _, r := range got.Rows {
		broken := r.Channel == "email"
		if r.Chain.Verified == broken || (broken && (r.Chain.BrokenAt == nil || *r.Chain.BrokenAt != 1)) {
			t.Errorf("%s chain = %+v", r.Channel, r.Chain)
		}
	}
}

func TestVerifyNotFoundAndUsage(t *testing.T) {
	f := newFixture(t)
	out, errOut, code := f.run("verify", "chal-none")
	wantCode(t, code, exitNotFound, out, errOut)
	out, errOut, code = f.run("verify")
	wantCode(t, code, exitUsage, out, errOut)
	out, errOut, code = f.run("verify", "--all", "chal-1")
	wantCode(t, code, exitUsage, out, errOut)
}

// readLines returns the export's lines, failing on any that is not a row.
func readLines(t *testing.T, path string) []rowView {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var rows []rowView
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r rowView
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.DedupeKey == "" {
			t.Fatalf("export line %d is not a row (%v): %q", len(rows)+1, err, sc.Text())
		}
		rows = append(rows, r)
	}
	return rows
}

func TestExportResumesWithoutDuplicatesOrGaps(t *testing.T) {
	f := newFixture(t)
	// Rows last written at Epoch+0m .. Epoch+11m, one a minute; some move on.
	var all []string
	for i := range 12 {
		key := f.claim(100+i, ledger.Email, ledger.Single)
		if i%3 == 0 {
			f.dispatch(key, ledgertest.Accept)
		}
		all = append(all, key)
		f.clock.Advance(time.Minute)
	}
	// Window [Epoch+2m, Epoch+10m): rows 2..9.
	want := slices.Sorted(slices.Values(all[2:10]))
	since, until := "2026-11-30T09:02:00Z", "2026-11-30T09:10:00Z"
	out := filepath.Join(t.TempDir(), "evidence.jsonl")

	interrupt := errors.New("simulated interruption")
	f.afterPage = func(page int) error {
		if page == 1 {
			return interrupt
		}
		return nil
	}
	stdout, errOut, code := f.run("export", "--since", since, "--until", until, "--out", out, "--page-size", "2")
	wantCode(t, code, exitFailure, stdout, errOut)
	if !strings.Contains(errOut, "--resume") {
		t.Errorf("an interrupted export does not say how to resume: %q", errOut)
	}
	first := readLines(t, out)
	if len(first) > 2 {
		t.Fatalf("first page of 2 items wrote %d lines", len(first))
	}
	var cp checkpoint
	b, err := os.ReadFile(out + ".checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cp); err != nil || cp.Pages != 1 || cp.Done || cp.NextKey == "" || cp.Rows != int64(len(first)) {
		t.Fatalf("checkpoint after one page = %+v (%v)", cp, err)
	}
	// A crash in the middle of the next page leaves a torn line behind.
	fh, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteString(`{"dedupe_key":"` + all[9] + `","state":"cla`); err != nil {
		t.Fatal(err)
	}
	fh.Close()

	f.afterPage = nil
	stdout, errOut, code = f.run("export", "--out", out, "--resume", "--page-size", "2")
	wantCode(t, code, exitOK, stdout, errOut)
	rows := readLines(t, out)
	var got []string
	for _, r := range rows {
		got = append(got, r.DedupeKey)
		if !r.Chain.Verified || len(r.History) == 0 || r.ContentHash == "" || r.ChallengeID == "" {
			t.Errorf("export row %s lacks evidence: %+v", r.DedupeKey, r)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("export after resume has %d rows %v,\nwant %d rows %v", len(got), got, len(want), want)
	}
	if b, err = os.ReadFile(out + ".checkpoint"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cp); err != nil || !cp.Done || cp.Rows != int64(len(want)) {
		t.Errorf("final checkpoint = %+v (%v)", cp, err)
	}
	checkExportAfterCompletion(t, f, out, since, until, want)
}

// checkExportAfterCompletion: resuming a complete export changes nothing,
// resuming with another window is refused, and without --out the same window
// streams to stdout.
func checkExportAfterCompletion(t *testing.T, f *fixture, out, since, until string, want []string) {
	t.Helper()
	// Resuming a complete export changes nothing.
	stdout, errOut, code := f.run("export", "--out", out, "--resume")
	wantCode(t, code, exitOK, stdout, errOut)
	if !strings.Contains(errOut, "already complete") || len(readLines(t, out)) != len(want) {
		t.Errorf("resuming a complete export: %q", errOut)
	}
	// Resuming with another window is refused.
	stdout, errOut, code = f.run("export", "--out", out, "--resume", "--since", "2026-11-30")
	wantCode(t, code, exitUsage, stdout, errOut)

	// Without --out the same window streams to stdout.
	stdout, errOut, code = f.run("export", "--since", since, "--until", until, "--page-size", "5")
	wantCode(t, code, exitOK, stdout, errOut)
	if n := strings.Count(stdout, "\n"); n != len(want) {
		t.Errorf("stdout export has %d lines, want %d", n, len(want))
	}
}

func TestExportUsage(t *testing.T) {
	f := newFixture(t)
	for _, args := range [][]string{
		{"export"},
		{"export", "--since", "yesterday"},
		{"export", "--since", "2026-11-30", "--until", "2026-11-29"},
		{"export", "--since", "2026-11-30", "--resume"},
	} {
		out, errOut, code := f.run(args...)
		wantCode(t, code, exitUsage, out, errOut)
	}
	out, errOut, code := f.run("export", "--out", filepath.Join(t.TempDir(), "x.jsonl"), "--resume")
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(errOut, "no checkpoint") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestUsageHelpAndErrors(t *testing.T) {
	f := newFixture(t)
	for _, c := range commands() {
		out, errOut, code := f.run(c.name, "--help")
		wantCode(t, code, exitOK, out, errOut)
		for _, want := range []string{"Usage: ledgerctl " + c.name + " ", "Global flags:", "--table TABLE", "Exit codes:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s --help lacks %q:\n%s", c.name, want, out)
			}
		}
		if help, _, _ := f.run("help", c.name); help != out {
			t.Errorf("'help %s' differs from '%s --help'", c.name, c.name)
		}
	}
	out, errOut, code := f.run("--help")
	wantCode(t, code, exitOK, out, errOut)
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("--help does not list %s", c.name)
		}
	}
	for _, args := range [][]string{{}, {"frobnicate"}, {"explain"}, {"explain", "a", "b"}, {"stuck", "--nope"}, {"stats", "extra"}} {
		out, errOut, code := f.run(args...)
		wantCode(t, code, exitUsage, out, errOut)
	}

	// Global flags work before and after the command.
	out, errOut, code = f.run("--table", "no-such-table-ledgerctl", "explain", "chal-1")
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(errOut, "table no-such-table-ledgerctl not found in region us-east-1") {
		t.Errorf("stderr = %q", errOut)
	}
	out, errOut, code = f.run("stuck", "--table", "no-such-table-ledgerctl")
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(errOut, "table no-such-table-ledgerctl not found") {
		t.Errorf("stderr = %q", errOut)
	}
	out, errOut, code = f.run("stuck", "--table", "")
	wantCode(t, code, exitUsage, out, errOut)
	if !strings.Contains(errOut, "set --table or LEDGER_TABLE") {
		t.Errorf("stderr = %q", errOut)
	}
}

func TestAccessDeniedNamesTheAction(t *testing.T) {
	a := newApp(nil, nil, func(string) string { return "" })
	a.table, a.cfg = "ledger-prod", &aws.Config{Region: "eu-west-1"}
	err := a.explainAWS(&smithy.OperationError{ServiceID: "DynamoDB", OperationName: "Query",
		Err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}})
	want := "access denied: the caller may not perform dynamodb:Query on table ledger-prod in region eu-west-1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("explainAWS = %v, want it to contain %q", err, want)
	}
	err = a.explainAWS(&smithy.OperationError{ServiceID: "STS", OperationName: "GetCallerIdentity",
		Err: &smithy.GenericAPIError{Code: "AccessDenied"}})
	if err == nil || !strings.Contains(err.Error(), "sts:GetCallerIdentity") {
		t.Errorf("explainAWS = %v", err)
	}
}

// sentDictionary is the dictionary send was given, as a set: the envelope
// is version 3 and names it (id), and opens only with it.
func sentDictionary(t *testing.T, id string) envelope.Dictionaries {
	t.Helper()
	dict, err := os.ReadFile(sampleDictionary)
	if err != nil {
		t.Fatal(err)
	}
	if id != envelope.DictionaryID(dict) {
		t.Errorf("the envelope names dictionary %q, want the file's %s", id, envelope.DictionaryID(dict))
	}
	dicts, err := envelope.NewDictionaries(dict)
	if err != nil {
		t.Fatal(err)
	}
	return dicts
}

const sampleDictionary = "../../internal/dictionaries/starfall-reset.dict"

func TestSendPublishesASealedIntent(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	kmsClient, sqsClient := kms.NewFromConfig(f.cfg), sqs.NewFromConfig(f.cfg)
	arn := emulator.KMSKey(t, kmsClient, "ledgerctl-send")
	url := emulator.Queue(t, sqsClient, "ledgerctl-intents")
	macKey, err := kmsClient.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	intentKey := *macKey.KeyMetadata.Arn

	f.clock = ledgertest.NewClock()
	realNow := time.Now().UTC()
	f.clock.Advance(realNow.Sub(ledgertest.Epoch)) // the producer refuses expired challenges
	const address = "player9@example.test"
	out, errOut, code := f.run("send", "--challenge", "chal-send-1", "--channel", "email", "--to", address,
		"--workflow", "fallback", "--queue-url", url, "--key-arn", arn, "--intent-key-arn", intentKey,
		"--dictionary", sampleDictionary)
	wantCode(t, code, exitOK, out, errOut)
	wantKey := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-send-1", Channel: ledger.Email}.Key()
	if !strings.Contains(out, wantKey) {
		t.Errorf("send output lacks the dedupe key:\n%s", out)
	}

	// A long poll returns as soon as the message is there; a busy emulator
	// may take longer than one short wait to show it.
	var msgs *sqs.ReceiveMessageOutput
	for deadline := time.Now().Add(15 * time.Second); ; {
		msgs, err = sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 5})
		if err != nil || len(msgs.Messages) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(msgs.Messages) == 0 {
		t.Fatalf("receive: %d messages, %v", len(msgs.Messages), err)
	}
	// SQS delivers at least once, and the SDK retries a send whose
	// answer it lost on a busy emulator: copies are allowed, and each must
	// be the same intent (the claim function dedupes them).
	body := aws.ToString(msgs.Messages[0].Body)
	for _, m := range msgs.Messages[1:] {
		if aws.ToString(m.Body) != body {
			t.Fatalf("send published %d different messages for one challenge", len(msgs.Messages))
		}
	}
	if strings.Contains(body, address) || strings.Contains(body, "reset.invalid") {
		t.Errorf("the intent carries the address or link outside the sealed envelope")
	}
	dec, err := intent.Decode([]byte(body))
	in, sealed := dec.Intent, dec.Sealed
	if err != nil {
		t.Fatalf("the published intent does not decode as the claim function decodes it: %v", err)
	}
	if in.Key() != wantKey || in.Workflow.Kind != ledger.Fallback || in.ExpiresAt.Sub(realNow) < 9*time.Minute {
		t.Errorf("intent = %+v", in)
	}
	if err := (&kmsseal.KMS{Client: kmsClient, KeyARN: intentKey}).Verify(ctx, dec.Binding, dec.Seal); err != nil {
		t.Errorf("the intent's seal does not verify under the intent key: %v", err)
	}
	dicts := sentDictionary(t, dec.Dict)
	m, err := (&envelope.Opener{KMS: kmsClient, KeyARN: arn, Dictionaries: dicts}).Open(ctx, wantKey, sealed)
	if err != nil || m.To != address || ledger.ContentHash(in.TemplateID, in.TemplateVersion, m) != in.ContentHash {
		t.Errorf("sealed content does not open to the message: %v", err)
	}

	for _, args := range [][]string{
		{"send", "--challenge", "c", "--channel", "fax", "--to", "x", "--queue-url", url, "--key-arn", arn, "--intent-key-arn", intentKey},
		{"send", "--challenge", "c", "--channel", "sms", "--to", "+15550000000", "--queue-url", url, "--key-arn", arn},
		{"send", "--challenge", "c", "--channel", "sms", "--to", "x", "--key-arn", arn},
		{"send", "--challenge", "bad id", "--channel", "sms", "--to", "+15550000000", "--queue-url", url, "--key-arn", arn, "--intent-key-arn", intentKey},
	} {
		out, errOut, code := f.run(args...)
		wantCode(t, code, exitUsage, out, errOut)
	}
}
