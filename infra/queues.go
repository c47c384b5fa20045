package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// The stack's queues share one shape: every queue denies non-TLS access, and a work queue moves a
// message that keeps failing to its DLQ. A queue that holds only opaque ids, hashes, sealed
// envelopes and record metadata uses SQS-managed SSE (so its senders need no KMS permissions);
// one that holds personal data (the providers' event JSON) uses a customer-managed key whose
// policy names who may use it (events.go).

// dlqRetention is how long a dead-letter queue keeps a message: SQS's longest retention.
const dlqRetention = 14 * 24 * time.Hour

// deadLetterQueue defines a queue that keeps what failed for retention, encrypted under key (nil:
// SQS-managed SSE).
func (p *LedgerStackProps) deadLetterQueue(stack awscdk.Stack, id string, retention time.Duration, key awskms.IKey) awssqs.Queue {
	return awssqs.NewQueue(stack, jsii.String(id), encrypted(&awssqs.QueueProps{
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: seconds(retention),
		RemovalPolicy:   p.removalPolicy(),
	}, key))
}

// workQueue defines a queue that keeps a message for retention, hides a received one for
// visibility, and moves one received maxReceives times to dlq, encrypted under key (nil:
// SQS-managed SSE).
func (p *LedgerStackProps) workQueue(stack awscdk.Stack, id string, retention, visibility time.Duration, dlq awssqs.Queue, maxReceives int, key awskms.IKey) awssqs.Queue {
	return awssqs.NewQueue(stack, jsii.String(id), encrypted(&awssqs.QueueProps{
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   seconds(retention),
		VisibilityTimeout: seconds(visibility),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dlq,
			MaxReceiveCount: jsii.Number(float64(maxReceives)),
		},
		RemovalPolicy: p.removalPolicy(),
	}, key))
}

// encrypted sets props' server-side encryption: SQS-managed SSE, or key when it is not nil.
func encrypted(props *awssqs.QueueProps, key awskms.IKey) *awssqs.QueueProps {
	props.Encryption = awssqs.QueueEncryption_SQS_MANAGED
	if key != nil {
		props.Encryption, props.EncryptionMasterKey = awssqs.QueueEncryption_KMS, key
	}
	return props
}
