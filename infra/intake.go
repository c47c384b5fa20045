package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// intake is where intents arrive: the queue producers send to, which the claim function consumes,
// and its DLQ for poison and repeatedly failing intents. Producers send without KMS permissions
// (see workQueue).
type intake struct {
	queue, dlq awssqs.Queue
}

// intake defines the intent queue and its DLQ.
func (p *LedgerStackProps) intake(stack awscdk.Stack) intake {
	dlq := p.deadLetterQueue(stack, "IntentDlq", dlqRetention, nil)
	queue := p.workQueue(stack, "IntentQueue", p.IntentRetention, p.IntentVisibilityTimeout, dlq, p.MaxReceiveCount, nil)
	return intake{queue: queue, dlq: dlq}
}

// claimTrigger makes the intent queue claim's event source.
func (p *LedgerStackProps) claimTrigger(stack awscdk.Stack, claim awslambda.Function, in intake) {
	queueTrigger(stack, "ClaimIntentQueueSource", claim, in.queue, p.ClaimMaxConcurrency)
}

// queueTrigger makes queue fn's event source: batches of up to 10, failures reported per
// message, at most maxConcurrency instances at once. The mapping is declared directly rather than
// through SqsEventSource, whose binding also grants sqs:ChangeMessageVisibility and
// sqs:GetQueueUrl, which Lambda's poller never calls; the three actions it does call are granted
// with the rest of fn's permissions.
func queueTrigger(stack awscdk.Stack, id string, fn awslambda.Function, queue awssqs.Queue, maxConcurrency int) {
	awslambda.NewEventSourceMapping(stack, jsii.String(id), &awslambda.EventSourceMappingProps{
		Target:                  fn,
		EventSourceArn:          queue.QueueArn(),
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(maxConcurrency)),
	})
}

// validateIntake checks what the intent queue needs of the props: producers on every stage but
// the local one.
func (p *LedgerStackProps) validateIntake(bad func(string, ...any)) {
	if len(p.ProducerPrincipalArns) == 0 && !p.LocalStage {
		bad("producerArns is not set: without it any principal of the account whose IAM policies allow it can " +
			"publish an intent this stack sends from the verified sender. Pass -c producerArns=<the account service's " +
			"role ARNs> (only the local emulator's stage, -c localStage=true, may leave it unset)")
	}
	if p.IntentRetention < time.Minute || p.IntentRetention > 14*24*time.Hour {
		bad("IntentRetention %v: want 1m..14d", p.IntentRetention)
	}
	if p.MaxReceiveCount < 1 || p.MaxReceiveCount > 1000 {
		bad("MaxReceiveCount %d: want 1..1000", p.MaxReceiveCount)
	}
	if v := p.IntentVisibilityTimeout; v < functionTimeouts[settings.Claim] || v > 12*time.Hour || v%time.Second != 0 {
		bad("IntentVisibilityTimeout %v: want whole seconds from the claim timeout %v to 12h", v, functionTimeouts[settings.Claim])
	}
	if 2*p.IntentVisibilityTimeout >= p.IntentRetention {
		bad("IntentVisibilityTimeout %v: the intent age alarm (two visibility timeouts) must fire before IntentRetention %v drops intents",
			p.IntentVisibilityTimeout, p.IntentRetention)
	}
	for name, n := range map[string]int{
		"ClaimMaxConcurrency": p.ClaimMaxConcurrency, "DispatchQueueMaxConcurrency": p.DispatchQueueMaxConcurrency,
	} {
		if n < 2 || n > 1000 {
			bad("%s %d: want 2..1000", name, n)
		}
	}
}
