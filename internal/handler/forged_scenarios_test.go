package handler_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestForgedStreamRecordsWriteNothing: copies of a genuine INSERT record
// with only expires_at moved into the past, or only subject_ref changed,
// handed straight to the real dispatch handler (a direct invocation), leave
// the row as the table holds it and are counted; the genuine record then
// sends the message once.
func TestForgedStreamRecordsWriteNothing(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d intents failed", failed)
	}
	genuine := p.ReadStream()
	if len(genuine.Records) != 1 {
		t.Fatalf("want one claim on the stream, got %d", len(genuine.Records))
	}
	before := p.Row(n)
	forgeries := map[string]func(map[string]events.DynamoDBAttributeValue){
		// The row's expiry as the compact stored form holds it (x: Unix ms).
		"expires_at in the past": func(img map[string]events.DynamoDBAttributeValue) {
			img["x"] = events.NewNumberAttribute(strconv.FormatInt(p.Now().Add(-time.Minute).UnixMilli(), 10))
		},
		"expires_at unreadable": func(img map[string]events.DynamoDBAttributeValue) {
			img["x"] = events.NewStringAttribute("yesterday")
		},
		"another subject_ref": func(img map[string]events.DynamoDBAttributeValue) {
			img["subject_ref"] = events.NewStringAttribute("acct-forged")
		},
	}
	for name, forge := range forgeries {
		forged := forgedCopy(genuine, forge)
		if resp, err := p.Dispatch.Handle(p.Ctx, forged); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: %v %v", name, err, resp.BatchItemFailures)
		}
		if row := p.Row(n); row.Version != before.Version || row.State != ledger.Claimed || !row.ExpiresAt.Equal(before.ExpiresAt) {
			t.Fatalf("%s: row %s v%d; want claimed v%d, untouched", name, row.State, row.Version, before.Version)
		}
	}
	if got := strings.Count(p.Out.String(), `"ContradictedRecords"`); got < len(forgeries) {
		t.Fatalf("ContradictedRecords emitted %d times; want once per forged record (%d)", got, len(forgeries))
	}
	if got := p.SESMessages(n.Message.To); got != 0 {
		t.Fatalf("forged records sent %d emails", got)
	}
	if resp, err := p.Dispatch.Handle(p.Ctx, genuine); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("genuine record: %v %v", err, resp.BatchItemFailures)
	}
	if row := p.Row(n); row.State != ledger.Accepted || p.SESMessages(n.Message.To) != 1 {
		t.Fatalf("genuine record: row %s, %d emails; want accepted, one email", row.State, p.SESMessages(n.Message.To))
	}
	p.AssertNoSecrets()
}

// forgedCopy returns ev with its first record's new image copied and
// changed by forge.
func forgedCopy(ev events.DynamoDBEvent, forge func(map[string]events.DynamoDBAttributeValue)) events.DynamoDBEvent {
	rec := ev.Records[0]
	img := make(map[string]events.DynamoDBAttributeValue, len(rec.Change.NewImage))
	for k, v := range rec.Change.NewImage {
		img[k] = v
	}
	forge(img)
	rec.Change.NewImage = img
	return events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{rec}}
}
