package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestEmailIsSentOnceAcrossRedeliveryAndDuplicateStreamRecords(t *testing.T) {
	p := newPipeline(t, nil)
	n := p.notification(1, ledger.Email, 10*time.Minute)
	p.publish(n)
	p.publish(n) // the account service retried: a new SQS message id, the same identity
	if failed := p.pumpQueue(); failed != 0 {
		t.Fatalf("%d records failed", failed)
	}
	ev := p.readStream()
	if len(ev.Records) != 1 {
		t.Fatalf("want one new claim on the stream, got %d", len(ev.Records))
	}
	// The event source (or the local runtime) delivers the same record twice.
	for i := 0; i < 2; i++ {
		if resp, err := p.dispatch.Handle(p.ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("dispatch %d: %v %v", i, err, resp.BatchItemFailures)
		}
	}
	if got := p.sesMessages(n.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want exactly 1", got)
	}
	row := p.row(n)
	if row.State != ledger.Accepted || row.AckID == "" || row.Attempts != 1 {
		t.Fatalf("row %s ack %q attempts %d", row.State, row.AckID, row.Attempts)
	}
	if err := row.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamoContent(p).Get(p.ctx, ledger.ContentKey(row)); err == nil {
		t.Fatal("sealed content survived the terminal state")
	}
	p.assertNoSecrets(n)
}

func TestExpiredIntentsAreRecordedAndNeverSent(t *testing.T) {
	p := newPipeline(t, map[string]string{"EXPIRY_MARGIN": "1s"})
	late := p.notification(1, ledger.Email, 1500*time.Millisecond) // expires while it waits in the queue
	waiting := p.notification(2, ledger.Email, 30*time.Second)      // claimed, then expires before dispatch
	p.publish(late)
	p.advance(700 * time.Millisecond)
	p.pumpQueue()
	if st := p.row(late).State; st != ledger.Expired {
		t.Fatalf("late intent: %s", st)
	}
	p.publish(waiting)
	p.pumpQueue()
	if st := p.row(waiting).State; st != ledger.Claimed {
		t.Fatalf("waiting intent: %s", st)
	}
	p.advance(30 * time.Second)
	p.pumpStream()
	for _, n := range []struct {
		name string
		to   string
	}{{"late", late.Message.To}, {"waiting", waiting.Message.To}} {
		if got := p.sesMessages(n.to); got != 0 {
			t.Fatalf("%s: %d emails sent after expiry", n.name, got)
		}
	}
	row := p.row(waiting)
	if row.State != ledger.Expired || !strings.Contains(row.Reason, "expired") {
		t.Fatalf("waiting intent: %s %q", row.State, row.Reason)
	}
}

func TestExpireSweepClosesClaimsWhoseStreamRecordNeverArrived(t *testing.T) {
	p := newPipeline(t, map[string]string{"EXPIRY_MARGIN": "1s"})
	n := p.notification(1, ledger.SMS, 20*time.Second)
	p.publish(n)
	p.pumpQueue()
	p.advance(20 * time.Second)
	if err := p.expire.Handle(p.ctx, events.CloudWatchEvent{}); err != nil {
		t.Fatal(err)
	}
	row := p.row(n)
	if row.State != ledger.Expired {
		t.Fatalf("row %s", row.State)
	}
	if _, err := dynamoContent(p).Get(p.ctx, ledger.ContentKey(row)); err == nil {
		t.Fatal("sealed content not purged")
	}
	p.pumpStream() // the late stream record finds nothing to send
	if r := p.row(n); r.State != ledger.Expired || len(r.History) != 2 {
		t.Fatalf("after late dispatch: %s with %d events", r.State, len(r.History))
	}
}

func TestContentMismatchIsBlockedRecordedAndCounted(t *testing.T) {
	p := newPipeline(t, nil)
	n := p.notification(1, ledger.Email, 10*time.Minute)
	p.publish(n)
	changed := n
	changed.TemplateVersion = "4"
	changed.Message.Body += " Reworded."
	p.publish(changed)
	p.pumpQueue()
	p.pumpStream()
	if got := p.sesMessages(n.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want 1", got)
	}
	row := p.row(n)
	if row.Mismatches != 1 || row.TemplateVersion != "3" {
		t.Fatalf("mismatches %d template %s", row.Mismatches, row.TemplateVersion)
	}
	if !strings.Contains(p.out.String(), `"ContentMismatch":1`) {
		t.Fatal("no ContentMismatch metric emitted")
	}
}

func TestPoisonMessagesEndInTheDLQWithAReason(t *testing.T) {
	p := newPipeline(t, nil)
	n := p.notification(1, ledger.Email, 10*time.Minute)
	p.publish(n)
	for _, body := range []string{
		`{"schema_version":1,"purpose":"password-reset"`,
		`{"schema_version":99}`,
		`not json at all ` + ledgertest.Canary,
	} {
		p.publishRaw(body)
	}
	for i := 0; i <= maxReceives; i++ {
		p.pumpQueue()
	}
	if got := p.dlqDepth(); got != 3 {
		t.Fatalf("DLQ holds %d messages, want 3", got)
	}
	if c := strings.Count(p.out.String(), `"msg":"intent rejected"`); c < 3 {
		t.Fatalf("%d rejection log lines, want at least 3", c)
	}
	if st := p.row(n).State; st != ledger.Claimed {
		t.Fatalf("the good intent beside the poison ones: %s", st)
	}
	if strings.Contains(p.out.String(), ledgertest.Canary) {
		t.Fatal("a rejected body leaked into the logs")
	}
}

// assertNoSecrets proves the canary token, body and address of every given
// notification appear in no ledger item, stream record, log line, metric or
// error string.
func (p *pipeline) assertNoSecrets(ns ...any) {
	p.t.Helper()
	var haystacks []string
	haystacks = append(haystacks, p.scanLedger()...)
	haystacks = append(haystacks, p.streamRaw...)
	haystacks = append(haystacks, p.out.String())
	if len(p.streamRaw) == 0 {
		p.t.Fatal("privacy sweep saw no stream records")
	}
	needles := []string{ledgertest.Canary, "@example.test", "+1555", "reset?token"}
	for _, h := range haystacks {
		for _, s := range needles {
			if strings.Contains(h, s) {
				p.t.Fatalf("secret %q leaked into: %.300s", s, h)
			}
		}
	}
}
