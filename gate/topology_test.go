package gate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
)

// topology drives the real handlers the way the deployed event sources
// would, concurrently: claim pollers on the intents queue, one stream
// reader fanning dispatch-bound records out to one worker per stream
// shard, pollers on the dispatch queue, and the reconcile and expire
// schedules. None of its goroutines touches the testing.T: failures of the
// harness itself (an SQS call that failed after the SDK's retries) are
// counted and the work is redone the way the event source would redo it.
type topology struct {
	p *pipelinetest.Pipeline
	// ClaimPollers, StreamShards and QueuePollers are the concurrency of the
	// three event sources; Tick is the reconcile and expire schedule.
	ClaimPollers, StreamShards, QueuePollers int
	Tick                                     time.Duration

	shards []chan events.DynamoDBEventRecord
	wg     sync.WaitGroup

	mu      sync.Mutex
	claimed map[string]bool // intents-queue message ids whose claim succeeded

	// Counters, for the report.
	claimFailures     atomic.Int64 // intents reported failed by claim (redelivered)
	streamBatches     atomic.Int64
	streamRetries     atomic.Int64 // stream batches redelivered after a reported failure
	streamGivenUp     atomic.Int64 // records given up after the retries (reconcile re-drives them)
	queueBatches      atomic.Int64
	queueMessages     atomic.Int64
	queueFailures     atomic.Int64 // dispatch-queue messages reported failed (visible again after the timeout)
	reconcileRuns     atomic.Int64
	expireRuns        atomic.Int64
	sweepErrors       atomic.Int64
	harnessErrors     atomic.Int64
	streamReadErrors  atomic.Int64
	lastHarnessErrMu  sync.Mutex
	lastHarnessErr    error
	streamRecordsSeen atomic.Int64
}

// Visibility timeouts of the pollers' receives. A dispatch-queue batch may
// wait in-process for its send slots (up to BUDGET_MAX_WAIT per message),
// so it gets a longer one.
const (
	claimVisibility = 30
	queueVisibility = 60
	// streamRetries is how often a failed stream batch is redelivered
	// before its records are given up (the event source's RetryAttempts).
	streamRetries = 3
	idle          = 200 * time.Millisecond
)

func (tp *topology) harnessError(err error) {
	tp.harnessErrors.Add(1)
	tp.lastHarnessErrMu.Lock()
	tp.lastHarnessErr = err
	tp.lastHarnessErrMu.Unlock()
}

// start launches every poller and worker; they run until ctx ends.
func (tp *topology) start(ctx context.Context) {
	tp.claimed = map[string]bool{}
	for range tp.ClaimPollers {
		tp.wg.Go(func() { tp.claimPoller(ctx) })
	}
	for range tp.StreamShards {
		ch := make(chan events.DynamoDBEventRecord, 1<<16)
		tp.shards = append(tp.shards, ch)
		tp.wg.Go(func() { tp.streamWorker(ctx, ch) })
	}
	for range tp.QueuePollers {
		tp.wg.Go(func() { tp.queuePoller(ctx) })
	}
	tp.wg.Go(func() { tp.schedule(ctx) })
}

// wait waits for every goroutine started by start to return.
func (tp *topology) wait() { tp.wg.Wait() }

// claimed reports how many distinct intents-queue messages were claimed.
func (tp *topology) claimedCount() int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return len(tp.claimed)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// claimPoller is one concurrent poller of the intents queue's event
// source: batches of 10 into the claim handler, successes deleted,
// reported failures visible again at once.
func (tp *topology) claimPoller(ctx context.Context) {
	p := tp.p
	for ctx.Err() == nil {
		// Long polling, as Lambda's pollers do: the intents queue is short
		// once the burst is claimed, so the emulator's polling is cheap.
		out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &p.QueueURL, MaxNumberOfMessages: 10, VisibilityTimeout: claimVisibility, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			if ctx.Err() == nil {
				tp.harnessError(fmt.Errorf("receive intents: %w", err))
				sleepCtx(ctx, idle)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, Attributes: m.Attributes, EventSource: "aws:sqs",
			})
		}
		resp, err := p.Claim.Handle(invocation(ctx), ev)
		if err != nil {
			// The whole batch failed: it comes back after the visibility timeout.
			tp.claimFailures.Add(int64(len(ev.Records)))
			continue
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		tp.claimFailures.Add(int64(len(failed)))
		var del []sqstypes.DeleteMessageBatchRequestEntry
		var retry []sqstypes.ChangeMessageVisibilityBatchRequestEntry
		tp.mu.Lock()
		for i, m := range out.Messages {
			id := aws.String(strconv.Itoa(i))
			if failed[*m.MessageId] {
				retry = append(retry, sqstypes.ChangeMessageVisibilityBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
				continue
			}
			tp.claimed[*m.MessageId] = true
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: id, ReceiptHandle: m.ReceiptHandle})
		}
		tp.mu.Unlock()
		tp.deleteBatch(ctx, p.QueueURL, del)
		if len(retry) > 0 {
			if _, err := p.SQS.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &p.QueueURL, Entries: retry}); err != nil && ctx.Err() == nil {
				tp.harnessError(fmt.Errorf("release failed intents: %w", err))
			}
		}
	}
}

// deleteBatch deletes handled messages. A delete that fails leaves the
// message to come back after its visibility timeout, as with Lambda: the
// handlers make the second delivery harmless.
func (tp *topology) deleteBatch(ctx context.Context, url string, entries []sqstypes.DeleteMessageBatchRequestEntry) {
	if len(entries) == 0 {
		return
	}
	out, err := tp.p.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
	switch {
	case err != nil && ctx.Err() == nil:
		tp.harnessError(fmt.Errorf("delete batch: %w", err))
	case err == nil && len(out.Failed) > 0:
		tp.harnessError(fmt.Errorf("delete batch: %d entries failed (%s)", len(out.Failed), aws.ToString(out.Failed[0].Code)))
	}
}

// route hands dispatch-bound stream records to the worker of their shard
// (by key hash, so one row's records stay in order, as in a stream shard).
func (tp *topology) route(ev events.DynamoDBEvent) {
	for _, rec := range ev.Records {
		h := fnv.New32a()
		if pk, ok := rec.Change.Keys["pk"]; ok && pk.DataType() == events.DataTypeString {
			h.Write([]byte(pk.String()))
		}
		tp.streamRecordsSeen.Add(1)
		tp.shards[int(h.Sum32()%uint32(len(tp.shards)))] <- rec
	}
}

// streamWorker is one stream shard's consumer: batches of up to 10 records
// into the dispatch handler, in order; a batch that reports a failure is
// redelivered from the failed record, streamRetries times, then given up.
func (tp *topology) streamWorker(ctx context.Context, in <-chan events.DynamoDBEventRecord) {
	for {
		var batch []events.DynamoDBEventRecord
		select {
		case <-ctx.Done():
			return
		case rec := <-in:
			batch = append(batch, rec)
		}
	fill:
		for len(batch) < 10 {
			select {
			case rec := <-in:
				batch = append(batch, rec)
			default:
				break fill
			}
		}
		tp.streamBatches.Add(1)
		for try := 0; ; try++ {
			resp, err := tp.p.Dispatch.Handle(invocation(ctx), events.DynamoDBEvent{Records: batch})
			if err == nil && len(resp.BatchItemFailures) == 0 {
				break
			}
			if ctx.Err() != nil {
				return
			}
			if try == streamRetries {
				tp.streamGivenUp.Add(int64(len(batch)))
				break
			}
			tp.streamRetries.Add(1)
			if err == nil {
				seq := resp.BatchItemFailures[0].ItemIdentifier
				for i, r := range batch {
					if r.Change.SequenceNumber == seq {
						batch = batch[i:]
						break
					}
				}
			}
			sleepCtx(ctx, idle)
		}
	}
}

// queuePoller is one concurrent poller of the dispatch queue's event
// source: batches of up to 10 into the dispatch handler, successes deleted,
// reported failures left to come back after the visibility timeout.
func (tp *topology) queuePoller(ctx context.Context) {
	p := tp.p
	for ctx.Err() == nil {
		// Short polls: the dispatch queue holds every delayed wake-up, and
		// the emulator scans all of them on each poll of a long poll.
		out, err := p.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &p.DispatchQueueURL, MaxNumberOfMessages: 10, VisibilityTimeout: queueVisibility,
		})
		if err != nil {
			if ctx.Err() == nil {
				tp.harnessError(fmt.Errorf("receive dispatch queue: %w", err))
				sleepCtx(ctx, idle)
			}
			continue
		}
		if len(out.Messages) == 0 {
			sleepCtx(ctx, idle)
			continue
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, EventSource: "aws:sqs"})
		}
		tp.queueBatches.Add(1)
		tp.queueMessages.Add(int64(len(ev.Records)))
		resp, err := p.Dispatch.HandleQueue(invocation(ctx), ev)
		if err != nil {
			tp.queueFailures.Add(int64(len(ev.Records)))
			continue
		}
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		tp.queueFailures.Add(int64(len(failed)))
		var del []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			if !failed[*m.MessageId] {
				del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
			}
		}
		tp.deleteBatch(ctx, p.DispatchQueueURL, del)
	}
}

// schedule runs reconcile and expire every Tick, as their schedules would
// (one at a time each).
func (tp *topology) schedule(ctx context.Context) {
	tick := time.NewTicker(tp.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		tp.reconcileRuns.Add(1)
		if err := tp.p.Reconcile.Handle(invocation(ctx), events.CloudWatchEvent{}); err != nil && !errors.Is(err, context.Canceled) {
			tp.sweepErrors.Add(1)
		}
		tp.expireRuns.Add(1)
		if err := tp.p.Expire.Handle(invocation(ctx), events.CloudWatchEvent{}); err != nil && !errors.Is(err, context.Canceled) {
			tp.sweepErrors.Add(1)
		}
	}
}

// invocation gives one handler call the Lambda context a deployed function
// gets, with a request id of Lambda's form: the handlers name their worker
// after it in every history entry they write, so the rows, and the write
// units their size costs, are those of a deployed stage.
func invocation(ctx context.Context) context.Context {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id})
}
