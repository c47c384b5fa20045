package dispatchqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/resetledger/resetledger/internal/emulator"
	"github.com/resetledger/resetledger/pkg/dispatchqueue"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestDelay(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		in   time.Duration
		want int32
	}{
		{-time.Second, 0}, {0, 0}, {999 * time.Millisecond, 0}, {1500 * time.Millisecond, 1},
		{14*time.Minute + 59*time.Second, 899}, {time.Hour, 900},
	} {
		if got := dispatchqueue.Delay(now.Add(tt.in), now); got != tt.want {
			t.Errorf("Delay(+%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.Email}.Key()
	if got, err := dispatchqueue.Parse(`{"key":"` + key + `"}`); err != nil || got != key {
		t.Fatalf("Parse: %q, %v", got, err)
	}
	for _, body := range []string{"", "null", `{"key":"x"}`, `{"key":"` + key + `","to":"someone@example.test"}`, `{"key":"` + key + `"} {}`, `["` + key + `"]`} {
		_, err := dispatchqueue.Parse(body)
		if !errors.Is(err, dispatchqueue.ErrBadMessage) {
			t.Errorf("Parse(%q) = %v, want ErrBadMessage", body, err)
		}
		if err != nil && strings.Contains(err.Error(), "example.test") {
			t.Errorf("error repeats the body: %v", err)
		}
	}
}

// TestScheduleOnSQS sends through the emulator's SQS: a row due now is
// receivable at once, one due later is held back by the delay.
func TestScheduleOnSQS(t *testing.T) {
	ctx := context.Background()
	client := sqs.NewFromConfig(emulator.Config(t))
	url := emulator.Queue(t, client, "dispatch")
	queue := dispatchqueue.New(client, url, time.Now)
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
