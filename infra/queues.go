package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// The stack's queues share one shape: SQS-managed SSE (so senders need no KMS permissions), every
// queue denies non-TLS access, and a work queue moves a message that keeps failing to its DLQ.

// dlqRetention is how long a dead-letter queue keeps a message: SQS's longest retention.
const dlqRetention = 14 * 24 * time.Hour

// deadLetterQueue defines a queue that keeps what failed for dlqRetention.
func (p *LedgerStackProps) deadLetterQueue(stack awscdk.Stack, id string) awssqs.Queue {
	return awssqs.NewQueue(stack, jsii.String(id), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(dlqRetention.Hours() / 24)),
		RemovalPolicy:   p.removalPolicy(),
	})
}

// workQueue defines a queue that keeps a message for retention, hides a received one for
// visibility, and moves one received maxReceives times to dlq.
func (p *LedgerStackProps) workQueue(stack awscdk.Stack, id string, retention, visibility time.Duration, dlq awssqs.Queue, maxReceives int) awssqs.Queue {
	return awssqs.NewQueue(stack, jsii.String(id), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   seconds(retention),
		VisibilityTimeout: seconds(visibility),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(maxReceives)),
		},
		RemovalPolicy: p.removalPolicy(),
	})
}
