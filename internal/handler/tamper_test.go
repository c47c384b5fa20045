package handler_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// TestTamperedCopyFirstCannotBlockTheGenuineIntent (issue 42, item 4): on
// the emulator, through the real claim and dispatch handlers, a copy of a
// sealed intent with one bit of sealed_content.ct flipped (every field and
// intent_mac as the producer wrote them) arrives first. Its seal binds the
// envelope (version 3), so it is refused before any row exists, with
// reason intent_mac, and dead-lettered as it arrived; nothing is
// dispatched. The genuine intent published afterwards is claimed and its
// email sent, once. Under version 2, whose seal left the envelope out, the
// copy was claimed, then quarantined at dispatch, and the genuine intent
// was a duplicate: nothing was ever sent.
func TestTamperedCopyFirstCannotBlockTheGenuineIntent(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	genuine := sealedBody(t, p, n)
	tampered := flipOneCTBit(t, genuine)

	p.PublishRaw(tampered)
	for i := 0; i <= pipelinetest.MaxReceives; i++ {
		p.PumpQueue()
	}
	if rows := p.ScanLedger(); len(rows) != 0 {
		t.Fatalf("the tampered copy left %d rows", len(rows))
	}
	if got := p.PumpStream(); got != 0 {
		t.Fatalf("%d claims reached dispatch from the tampered copy", got)
	}
	out := p.Out.String()
	if !strings.Contains(out, `"msg":"intent rejected"`) || !strings.Contains(out, `"Reason":"intent_mac"`) {
		t.Fatalf("the tampered copy was not refused with reason intent_mac")
	}
	if dlq := dlqBodies(t, p); len(dlq) != 1 || dlq[0] != tampered {
		t.Fatalf("the intent DLQ holds %d messages, want the tampered copy as it arrived", len(dlq))
	}

	p.PublishRaw(genuine)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("the genuine intent after the tampered copy: %d records failed", failed)
	}
	if got := p.PumpStream(); got != 1 {
		t.Fatalf("%d claims reached dispatch, want the genuine one", got)
	}
	if got := p.SESMessages(n.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want the genuine intent's one", got)
	}
	if row := p.Row(n); row.State != ledger.Accepted || row.Attempts != 1 {
		t.Fatalf("genuine row %s after %d attempts, want accepted after 1", row.State, row.Attempts)
	}
	p.AssertNoSecrets()
}

// sealedBody is the body the pipeline's producer publishes for n (sealed
// under the pipeline's content and intent keys), captured instead of sent.
func sealedBody(t *testing.T, p *pipelinetest.Pipeline, n producer.Notification) string {
	t.Helper()
	q := &captureQueue{}
	pr := *p.Producer
	pr.Queue = q
	if _, err := pr.Publish(p.Ctx, n); err != nil {
		t.Fatal(err)
	}
	return q.body
}

type captureQueue struct{ body string }

func (q *captureQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.body = aws.ToString(in.MessageBody)
	return &sqs.SendMessageOutput{MessageId: aws.String("captured")}, nil
}

// flipOneCTBit returns body with one bit of sealed_content.ct flipped and
// every other byte as it was.
func flipOneCTBit(t *testing.T, body string) string {
	t.Helper()
	var doc struct {
		SealedContent struct {
			CT string `json:"ct"`
		} `json:"sealed_content"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	ct, err := base64.StdEncoding.DecodeString(doc.SealedContent.CT)
	if err != nil {
		t.Fatal(err)
	}
	ct[len(ct)/2] ^= 0x01
	was := `"ct":"` + doc.SealedContent.CT + `"`
	if strings.Count(body, was) != 1 {
		t.Fatal("ct is not in the body exactly once")
	}
	return strings.Replace(body, was, `"ct":"`+base64.StdEncoding.EncodeToString(ct)+`"`, 1)
}

// dlqBodies receives (and leaves) the bodies in the intent DLQ.
func dlqBodies(t *testing.T, p *pipelinetest.Pipeline) []string {
	t.Helper()
	out, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{QueueUrl: &p.DLQURL, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range out.Messages {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies
}
