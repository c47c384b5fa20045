package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestEmailIsSentOnceAcrossRedeliveryAndDuplicateStreamRecords(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	p.Publish(n) // the account service retried: a new SQS message id, the same identity
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d records failed", failed)
	}
	ev := p.ReadStream()
	if len(ev.Records) != 1 {
		t.Fatalf("want one new claim on the stream, got %d", len(ev.Records))
	}
	// The event source (or the local runtime) delivers the same record twice.
	for i := 0; i < 2; i++ {
		if resp, err := p.Dispatch.Handle(p.Ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("dispatch %d: %v %v", i, err, resp.BatchItemFailures)
		}
	}
	if got := p.SESMessages(n.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want exactly 1", got)
	}
	row := p.Row(n)
	if row.State != ledger.Accepted || row.AckID == "" || row.Attempts != 1 {
		t.Fatalf("row %s ack %q attempts %d", row.State, row.AckID, row.Attempts)
	}
	if err := row.Verify(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Content().Get(p.Ctx, ledger.ContentKey(row)); err == nil {
		t.Fatal("sealed content survived the terminal state")
	}
	p.AssertNoSecrets()
}

func TestExpiredIntentsAreRecordedAndNeverSent(t *testing.T) {
	p := pipelinetest.New(t, map[string]string{"EXPIRY_MARGIN": "1s", "SEND_GUARD": "500ms"})
	late := p.Notification(1, ledger.Email, 1500*time.Millisecond) // expires while it waits in the queue
	waiting := p.Notification(2, ledger.Email, 30*time.Second)     // claimed, then expires before dispatch
	p.Publish(late)
	p.Advance(700 * time.Millisecond)
	p.PumpQueue()
	if st := p.Row(late).State; st != ledger.Expired {
		t.Fatalf("late intent: %s", st)
	}
	p.Publish(waiting)
	p.PumpQueue()
	if st := p.Row(waiting).State; st != ledger.Claimed {
		t.Fatalf("waiting intent: %s", st)
	}
	p.Advance(30 * time.Second)
	p.PumpStream()
	for _, n := range []struct {
		name string
		to   string
	}{{"late", late.Message.To}, {"waiting", waiting.Message.To}} {
		if got := p.SESMessages(n.to); got != 0 {
			t.Fatalf("%s: %d emails sent after expiry", n.name, got)
		}
	}
	row := p.Row(waiting)
	if row.State != ledger.Expired || !strings.Contains(row.Reason, "expired") {
		t.Fatalf("waiting intent: %s %q", row.State, row.Reason)
	}
}

func TestExpireSweepClosesClaimsWhoseStreamRecordNeverArrived(t *testing.T) {
	p := pipelinetest.New(t, map[string]string{"EXPIRY_MARGIN": "1s", "SEND_GUARD": "500ms"})
	n := p.Notification(1, ledger.SMS, 20*time.Second)
	p.Publish(n)
	p.PumpQueue()
	p.Advance(20 * time.Second)
	p.ExpireNow()
	row := p.Row(n)
	if row.State != ledger.Expired {
		t.Fatalf("row %s", row.State)
	}
	if _, err := p.Content().Get(p.Ctx, ledger.ContentKey(row)); err == nil {
		t.Fatal("sealed content not purged")
	}
	p.PumpStream() // the late stream record finds nothing to send
	if r := p.Row(n); r.State != ledger.Expired || len(r.History) != 2 {
		t.Fatalf("after late dispatch: %s with %d events", r.State, len(r.History))
	}
}

func TestContentMismatchIsBlockedRecordedAndCounted(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	changed := n
	changed.TemplateVersion = "4"
	changed.Message.Body += " Reworded."
	p.Publish(changed)
	p.PumpQueue()
	p.PumpStream()
	if got := p.SESMessages(n.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want 1", got)
	}
	row := p.Row(n)
	if row.Mismatches != 1 || row.TemplateVersion != "3" {
		t.Fatalf("mismatches %d template %s", row.Mismatches, row.TemplateVersion)
	}
	if !strings.Contains(p.Out.String(), `"ContentMismatch":1`) {
		t.Fatal("no ContentMismatch metric emitted")
	}
}

func TestPoisonMessagesEndInTheDLQWithAReason(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	for _, body := range []string{
		`{"schema_version":1,"purpose":"password-reset"`,
		`{"schema_version":99}`,
		`not json at all ` + ledgertest.Canary,
	} {
		p.PublishRaw(body)
	}
	for i := 0; i <= pipelinetest.MaxReceives; i++ {
		p.PumpQueue()
	}
	if got := p.DLQDepth(); got != 3 {
		t.Fatalf("DLQ holds %d messages, want 3", got)
	}
	if c := strings.Count(p.Out.String(), `"msg":"intent rejected"`); c < 3 {
		t.Fatalf("%d rejection log lines, want at least 3", c)
	}
	if st := p.Row(n).State; st != ledger.Claimed {
		t.Fatalf("the good intent beside the poison ones: %s", st)
	}
	if strings.Contains(p.Out.String(), ledgertest.Canary) {
		t.Fatal("a rejected body leaked into the logs")
	}
}
