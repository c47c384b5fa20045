// Package sqsqueue is the dispatch queue on Amazon SQS: it implements
// ledger.Scheduler by sending dispatchqueue's messages, each delayed until
// its row is due (dispatchqueue.Delay). Only the functions that hand rows
// back (dispatch and reconcile) import it, and with it the SQS client.
package sqsqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/dispatchqueue"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Client is the part of the SQS API the queue uses.
type Client interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue is the SQS ledger.Scheduler.
type Queue struct {
	client Client
	url    string
	now    func() time.Time
}

var _ ledger.Scheduler = (*Queue)(nil)

// New returns a Queue that sends to url; now is the clock delays are
// measured from.
func New(client Client, url string, now func() time.Time) *Queue {
	return &Queue{client: client, url: url, now: now}
}

// Schedule implements ledger.Scheduler.
func (q *Queue) Schedule(ctx context.Context, key string, at time.Time) error {
	body, err := dispatchqueue.Body(key, at)
	if err != nil {
		return err
	}
	if _, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body, DelaySeconds: dispatchqueue.Delay(at, q.now())}); err != nil {
		return fmt.Errorf("sqsqueue: send: %w", err)
	}
	return nil
}
