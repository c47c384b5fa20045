package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
)

// dispatchMaxRecordAge is how old a stream record dispatch still takes (older ones go to the
// stream-failure DLQ).
const dispatchMaxRecordAge = time.Hour

// The dispatch queue carries {"key": "<dedupe key>"} messages that hand a row back to dispatch: a
// deferred row's wake-up (sent by dispatch with a delay of up to maxWakeDelay, SQS's limit) and
// reconcile's re-drives of due rows no dispatch picked up.
const (
	// maxWakeDelay is SQS's longest per-message delay: how long a wake-up legitimately waits.
	maxWakeDelay = 15 * time.Minute
	// dispatchQueueMaxReceiveCount is how often a message is received before it moves to the
	// dispatch queue's DLQ. A row whose message is lost is not lost: reconcile re-drives it.
	dispatchQueueMaxReceiveCount = 5
	// dispatchQueueRetention outlasts the longest delay plus every receive's visibility timeout
	// (15 min + 5 x 6 min), so a message reaches the DLQ rather than silently expiring.
	dispatchQueueRetention = time.Hour
)

// dispatchQueueVisibility is the dispatch queue's visibility timeout: six times the dispatch
// timeout, as AWS recommends for an SQS event source (room for the poller's retries of a
// throttled invocation).
var dispatchQueueVisibility = 6 * functionTimeouts[settings.Dispatch]

// dispatchQueues are dispatch's queues: the dispatch queue and its DLQ, and the stream-failure
// DLQ, the on-failure destination of dispatch's stream mapping.
type dispatchQueues struct {
	queue, dlq, streamDLQ awssqs.Queue
}

// dispatchQueues defines the stream-failure DLQ and the dispatch queue with its DLQ. The dispatch
// queue hands rows back to dispatch: deferred rows' wake-ups (delayed messages dispatch sends
// itself) and reconcile's re-drives of due rows no dispatch picked up. A message is a dedupe key
// only; dispatch's conditional writes decide, so a duplicate or late message is harmless.
func (p *LedgerStackProps) dispatchQueues(stack awscdk.Stack) dispatchQueues {
	q := dispatchQueues{streamDLQ: p.deadLetterQueue(stack, "StreamFailureDlq", dlqRetention, nil)}
	cdknag.NagSuppressions_AddResourceSuppressions(q.streamDLQ, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is itself a dead-letter queue: the on-failure destination of the dispatch " +
			"stream mapping (cdk-nag only recognises redrive-policy DLQs). It holds record metadata, is kept 14 days " +
			"and is alarmed on depth."),
	}}, jsii.Bool(true))
	q.dlq = p.deadLetterQueue(stack, "DispatchQueueDlq", dlqRetention, nil)
	q.queue = p.workQueue(stack, awscall.DispatchQueue, dispatchQueueRetention, dispatchQueueVisibility, q.dlq, dispatchQueueMaxReceiveCount, nil)
	return q
}

// dispatchTriggers makes dispatch's two event sources: the dispatch queue, and the ledger
// table's stream, filtered to the changes that start a dispatch.
//
// The stream mapping is declared directly rather than through DynamoEventSource, whose binding
// (Table.grantStreamRead) also grants kms:Decrypt and kms:DescribeKey on the table's key without
// a condition. Dispatch holds both on that key already, only through DynamoDB (kms:ViaService
// dynamodb.<region>, permissions.go), which is how the stream's records are decrypted; so the
// stream read widens nothing. The stream actions the poller calls are granted here, as the
// binding granted them. The mapping keeps the binding's construct id, so its logical id, and the
// deployed mapping with its stream position, stay the same.
func (p *LedgerStackProps) dispatchTriggers(stack awscdk.Stack, dispatch awslambda.Function, ledger awsdynamodb.Table, q dispatchQueues) {
	queueTrigger(stack, "DispatchQueueSource", dispatch, q.queue, p.DispatchQueueMaxConcurrency)
	dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
		Resources: jsii.Strings(*ledger.TableStreamArn()),
	}))
	// ListStreams has no resource-level permission (suppressWildcards says so to cdk-nag).
	dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:ListStreams"),
		Resources: jsii.Strings("*"),
	}))
	// TRIM_HORIZON, not LATEST: a mapping created, re-created or re-enabled after claims were
	// written must still dispatch them. Old records are harmless: dispatch's conditional
	// claimed->dispatching write (with the expiry check) decides, and MaxRecordAge bounds the tail.
	dispatch.AddEventSourceMapping(jsii.String("DynamoDBEventSource:"+*awscdk.Names_NodeUniqueId(ledger.Node())), &awslambda.EventSourceMappingOptions{
		EventSourceArn:          ledger.TableStreamArn(),
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(10),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(3),
		MaxRecordAge:            seconds(dispatchMaxRecordAge),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               &sendOnlyDLQ{queue: q.streamDLQ},
		// Only the changes ledger.TriggersDispatch names start a dispatch (a row inserted claimed, a
		// held fallback row released); the patterns are generated from that rule.
		Filters: dispatchFilters(),
	})
}

// dispatchFilters is the dispatch stream event source's FilterCriteria: dynamostore.DispatchFilter's
// patterns, generated from the dispatch trigger rule.
func dispatchFilters() *[]*map[string]interface{} {
	var filters []*map[string]interface{}
	for _, pattern := range dynamostore.DispatchFilter() {
		filters = append(filters, awslambda.FilterCriteria_Filter(&pattern))
	}
	return &filters
}

// sendOnlyDLQ is a stream mapping's on-failure destination that grants the function only
// sqs:SendMessage, the one call Lambda makes to it (CDK's SqsDlq also grants
// GetQueueAttributes and GetQueueUrl).
type sendOnlyDLQ struct{ queue awssqs.IQueue }

func (d *sendOnlyDLQ) Bind(_ awslambda.IEventSourceMapping, target awslambda.IFunction) *awslambda.DlqDestinationConfig {
	target.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("sqs:SendMessage"),
		Resources: jsii.Strings(*d.queue.QueueArn()),
	}))
	return &awslambda.DlqDestinationConfig{Destination: d.queue.QueueArn()}
}

// validateDispatch checks what dispatch needs of the props: its waits inside its timeout, its
// retries within SQS's longest delay, its lag alarm below the stream's record age limit.
func (p *LedgerStackProps) validateDispatch(bad func(string, ...any)) {
	fs, timeout := p.Functions, functionTimeouts[settings.Dispatch]
	// Waiting for a slot holds a dispatch invocation; it must end well inside the timeout.
	if fs.Policy.BudgetWait >= timeout/2 {
		bad("%s %v: want below half the dispatch timeout %v", varName(settings.BudgetMaxWait), fs.Policy.BudgetWait, timeout)
	}
	// A retry is scheduled as a delayed dispatch-queue message: SQS delays at most 15 minutes.
	if fs.Policy.RetryMax > maxWakeDelay {
		bad("%s %v: want at most %v (the longest SQS message delay)", varName(settings.RetryBackoffMax), fs.Policy.RetryMax, maxWakeDelay)
	}
	if fs.WebhookTimeout >= timeout {
		bad("%s %v must be below the dispatch timeout %v", varName(settings.WebhookTimeout), fs.WebhookTimeout, timeout)
	}
	if p.DispatchLagLimit <= 0 || p.DispatchLagLimit >= dispatchMaxRecordAge {
		bad("DispatchLagLimit %v: want > 0 and below the stream record age limit %v", p.DispatchLagLimit, dispatchMaxRecordAge)
	}
}
