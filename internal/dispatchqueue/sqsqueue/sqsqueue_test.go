package sqsqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/resetledger/resetledger/internal/dispatchqueue"
	"github.com/resetledger/resetledger/internal/dispatchqueue/sqsqueue"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestScheduleOnSQS sends through the emulator's SQS: a row due now is
// receivable at once, one due later is held back by the delay.
func TestScheduleOnSQS(t *testing.T) {
	ctx := context.Background()
	client := sqs.NewFromConfig(emulator.Config(t))
	url := emulator.Queue(t, client, "dispatch")
	queue := sqsqueue.New(client, url, time.Now)
	now := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-now", Channel: ledger.Email}.Key()
	later := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-later", Channel: ledger.SMS}.Key()
	if err := queue.Schedule(ctx, now, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := queue.Schedule(ctx, later, time.Now().Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := queue.Schedule(ctx, "not-a-key", time.Now()); err == nil {
		t.Fatal("scheduled a value that is not a dedupe key")
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Messages) != 1 {
		t.Fatalf("received %d messages, want only the one due now", len(out.Messages))
	}
	if got, err := dispatchqueue.Parse(*out.Messages[0].Body); err != nil || got != now {
		t.Fatalf("received %q, %v", got, err)
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	if got := attrs.Attributes["ApproximateNumberOfMessagesDelayed"]; got != "1" {
		t.Fatalf("delayed messages: %s, want 1", got)
	}
}
