package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/resetledger/resetledger/internal/pipeline"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// pumpQueueRound delivers what the queue holds to the claim handler from
// several goroutines at once, as concurrent Lambda pollers would. Failed
// records stay invisible until the round ends (the visibility timeout),
// then become visible again; it returns how many were held.
func pumpQueueRound(t *testing.T, p *pipeline.Pipeline, workers int) int {
	t.Helper()
	var mu sync.Mutex
	var held []string
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				out, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{
					QueueUrl: &p.QueueURL, MaxNumberOfMessages: 10, VisibilityTimeout: pipeline.ReceiveVisibility,
					MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
				})
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				if len(out.Messages) == 0 {
					return
				}
				var ev events.SQSEvent
				for _, m := range out.Messages {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, Attributes: m.Attributes})
				}
				resp, err := p.Claim.Handle(p.Ctx, ev)
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("claim failed the whole batch: %w", err)
					mu.Unlock()
					return
				}
				failed := map[string]bool{}
				for _, f := range resp.BatchItemFailures {
					failed[f.ItemIdentifier] = true
				}
				var del []sqstypes.DeleteMessageBatchRequestEntry
				for i, m := range out.Messages {
					if failed[*m.MessageId] {
						mu.Lock()
						held = append(held, *m.ReceiptHandle)
						mu.Unlock()
						continue
					}
					del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
				}
				if len(del) > 0 {
					if _, err := p.SQS.DeleteMessageBatch(p.Ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &p.QueueURL, Entries: del}); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	for _, h := range held {
		if _, err := p.SQS.ChangeMessageVisibility(p.Ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &p.QueueURL, ReceiptHandle: aws.String(h), VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
	return len(held)
}

func queueEmpty(t *testing.T, p *pipeline.Pipeline) bool {
	t.Helper()
	out, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &p.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

type streamStats struct {
	mu                                 sync.Mutex
	batches, doubled, retries, givenUp int
}

// pumpStreamRound delivers the new claims on the ledger stream to the
// dispatch handler in batches of ten from several workers; a tenth of the
// batches is delivered twice at once (duplicate invocations). A batch that
// reports a failure is redelivered from the failed record on, up to
// streamTries times, as the event source would; then it is given up (the
// on-failure destination) and the expire sweep closes its rows.
func pumpStreamRound(t *testing.T, p *pipeline.Pipeline, st *streamStats, rng *rand.Rand) {
	t.Helper()
	ev := p.ReadStream()
	var batches [][]events.DynamoDBEventRecord
	for i := 0; i < len(ev.Records); i += 10 {
		batches = append(batches, ev.Records[i:min(i+10, len(ev.Records))])
	}
	double := make([]bool, len(batches))
	for i := range double {
		double[i] = rng.Float64() < 0.10
	}
	deliver := func(recs []events.DynamoDBEventRecord) {
		for try := 1; len(recs) > 0; try++ {
			resp, err := p.Dispatch.Handle(p.Ctx, events.DynamoDBEvent{Records: recs})
			if err == nil && len(resp.BatchItemFailures) == 0 {
				return
			}
			st.mu.Lock()
			if try == streamTries {
				st.givenUp += len(recs)
				st.mu.Unlock()
				return
			}
			st.retries++
			st.mu.Unlock()
			if err == nil {
				seq := resp.BatchItemFailures[0].ItemIdentifier
				for i, r := range recs {
					if r.Change.SequenceNumber == seq {
						recs = recs[i:]
						break
					}
				}
			}
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range streamWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				st.mu.Lock()
				st.batches++
				st.mu.Unlock()
				if !double[i] {
					deliver(batches[i])
					continue
				}
				st.mu.Lock()
				st.doubled++
				st.mu.Unlock()
				var inner sync.WaitGroup
				for range 2 {
					inner.Add(1)
					go func() { defer inner.Done(); deliver(batches[i]) }()
				}
				inner.Wait()
			}
		}()
	}
	for i := range batches {
		work <- i
	}
	close(work)
	wg.Wait()
}

func readRows(t *testing.T, p *pipeline.Pipeline, st *dynamostore.Store, plans []*plan) map[string]ledger.Entry {
	t.Helper()
	rows := map[string]ledger.Entry{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				e, err := st.Get(context.Background(), k)
				mu.Lock()
				switch {
				case err == nil:
					rows[k] = e
				case !errors.Is(err, ledger.ErrNotFound):
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, pl := range plans {
		work <- pl.key
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return rows
}

type dlqMsg struct{ id, body string }

func drainDLQ(t *testing.T, p *pipeline.Pipeline) []dlqMsg {
	t.Helper()
	// Count first (the DLQ no longer changes), then receive with a short
	// visibility until every message was seen: a receive whose response the
	// emulator dropped leaves its messages in flight until they reappear.
	attrs, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &p.DLQURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(attrs.Attributes["ApproximateNumberOfMessages"])
	inFlight, _ := strconv.Atoi(attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])
	seen := map[string]dlqMsg{}
	deadline := time.Now().Add(3 * pipeline.ReceiveVisibility * time.Second)
	for len(seen) < visible+inFlight && time.Now().Before(deadline) {
		r, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{QueueUrl: &p.DLQURL, MaxNumberOfMessages: 10, VisibilityTimeout: pipeline.ReceiveVisibility})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			time.Sleep(500 * time.Millisecond)
		}
		for _, m := range r.Messages {
			seen[*m.MessageId] = dlqMsg{id: *m.MessageId, body: *m.Body}
		}
	}
	out := make([]dlqMsg, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	return out
}

// capturedEmails returns how many emails the emulator's SES captured and
// how many went to each address.
func capturedEmails(t *testing.T, p *pipeline.Pipeline) (int, map[string]int) {
	t.Helper()
	captured, err := p.SESCaptured()
	if err != nil {
		t.Fatal(err)
	}
	emails := map[string]int{}
	for _, m := range captured {
		for _, to := range m.To {
			emails[to]++
		}
	}
	return len(captured), emails
}

// logReasons maps each SQS message id to the last reason or error the claim
// function logged for it.
func logReasons(out string) map[string]string {
	reasons := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "sqs_message_id") {
			continue
		}
		var rec struct {
			ID     string `json:"sqs_message_id"`
			Msg    string `json:"msg"`
			Reason string `json:"reason"`
			Error  string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.ID == "" {
			continue
		}
		switch {
		case rec.Reason != "":
			reasons[rec.ID] = rec.Reason
		case rec.Error != "":
			reasons[rec.ID] = rec.Error
		}
	}
	return reasons
}
