package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The index the sweeps query, as the store names it.
const openIndexName = dynamostore.IndexName

// Fixed timeouts of the event-driven functions; the sweeps' is LedgerStackProps.SweepTimeout.
var functionTimeouts = map[settings.Role]time.Duration{
	settings.Claim:    30 * time.Second,
	settings.Dispatch: 60 * time.Second,
}

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

const functionMemoryMB = 256

// NewLedgerStack defines the whole ledger for one stage: keys, tables, queues, the four functions
// with their triggers and least-privilege policies, alarms, dashboard and outputs.
func NewLedgerStack(scope constructs.Construct, id string, props *LedgerStackProps) (awscdk.Stack, error) {
	if props == nil {
		return nil, errors.New("infra: nil LedgerStackProps")
	}
	if err := props.Validate(); err != nil {
		return nil, fmt.Errorf("infra: invalid LedgerStackProps: %w", err)
	}
	p := props
	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)
	removal := p.removalPolicy()

	// Keys. The ledger key encrypts every table at rest; the content key seals the secret-bearing
	// envelope, which the producer encrypts and only dispatch and reconcile may decrypt.
	ledgerKey := awskms.NewKey(stack, jsii.String("LedgerKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " ledger, content and budget tables at rest"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     removal,
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})
	contentKey := awskms.NewKey(stack, jsii.String(awscall.ContentKey), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " sealed reset-notification content (producer encrypts, dispatch decrypts)"),
		Alias:             jsii.String("alias/" + p.Prefix + "-content"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     removal,
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})

	// Tables.
	ledger := awsdynamodb.NewTable(stack, jsii.String(awscall.LedgerTable), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:              awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		TimeToLiveAttribute: jsii.String(dynamostore.AttrTTL),
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       ledgerKey,
		DeletionProtection:  jsii.Bool(p.DeletionProtection),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(p.PointInTimeRecovery),
		},
		RemovalPolicy: removal,
	})
	ledger.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(openIndexName),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrOpenPK), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrOpenDue), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	content := awsdynamodb.NewTable(stack, jsii.String(awscall.ContentTable), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dynamostore.AttrTTL),
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       ledgerKey,
		// Sealed content lives minutes and holds reset secrets; it is not evidence (the ledger is).
		// It goes with the stack (and with a replacement), so no deletion protection, which would
		// make that delete fail; retaining it instead would keep secrets in an orphaned table.
		DeletionProtection: jsii.Bool(false),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(content, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The content table holds sealed secret-bearing messages for minutes (TTL at challenge " +
			"expiry, purged at every terminal state); point-in-time backups would keep reset secrets for 35 days, " +
			"which the design forbids."),
	}}, jsii.Bool(true))
	// The send-rate budget: one item per channel holding its GCRA theoretical arrival time. It is
	// derived state, not evidence: losing it only empties the budget (the provider's own limit
	// still answers not-sent, which dispatch retries), so no backups and no protection, like the
	// content table.
	budget := awsdynamodb.NewTable(stack, jsii.String(awscall.BudgetTable), &awsdynamodb.TableProps{
		PartitionKey:       &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrPK), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:        awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Encryption:         awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:      ledgerKey,
		DeletionProtection: jsii.Bool(false),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(budget, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The budget table holds one send-rate timestamp per channel, rewritten on every send; " +
			"a restore would bring back a stale timestamp, and losing it only empties the budget (the provider's " +
			"own limit still answers not-sent, which dispatch retries). It holds no evidence; the ledger table has PITR."),
	}}, jsii.Bool(true))
	if !p.PointInTimeRecovery {
		cdknag.NagSuppressions_AddResourceSuppressions(ledger, &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String("AwsSolutions-DDB3"),
			Reason: jsii.String("PITR is turned off deliberately for stage " + p.Prefix + " (a throw-away or emulator stage)."),
		}}, jsii.Bool(true))
	}

	// Queues. SQS-managed SSE lets producers send without KMS permissions; TLS is enforced.
	intentDLQ := awssqs.NewQueue(stack, jsii.String("IntentDlq"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal,
	})
	intentQueue := awssqs.NewQueue(stack, jsii.String("IntentQueue"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   seconds(p.IntentRetention),
		VisibilityTimeout: seconds(p.IntentVisibilityTimeout),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           intentDLQ,
			MaxReceiveCount: jsii.Number(float64(p.MaxReceiveCount)),
		},
		RemovalPolicy: removal,
	})
	streamDLQ := awssqs.NewQueue(stack, jsii.String("StreamFailureDlq"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(streamDLQ, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is itself a dead-letter queue: the on-failure destination of the dispatch " +
			"stream mapping (cdk-nag only recognises redrive-policy DLQs). It holds record metadata, is kept 14 days " +
			"and is alarmed on depth."),
	}}, jsii.Bool(true))

	// The dispatch queue hands rows back to dispatch: deferred rows' wake-ups (delayed messages
	// dispatch sends itself) and reconcile's re-drives of due rows no dispatch picked up. A
	// message is a dedupe key only; dispatch's conditional writes decide, so a duplicate or late
	// message is harmless.
	dispatchDLQ := awssqs.NewQueue(stack, jsii.String("DispatchQueueDlq"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
		RemovalPolicy:   removal,
	})
	dispatchQueue := awssqs.NewQueue(stack, jsii.String(awscall.DispatchQueue), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		RetentionPeriod:   seconds(dispatchQueueRetention),
		VisibilityTimeout: seconds(dispatchQueueVisibility),
		DeadLetterQueue: &awssqs.DeadLetterQueue{
			Queue:           dispatchDLQ,
			MaxReceiveCount: jsii.Number(dispatchQueueMaxReceiveCount),
		},
		RemovalPolicy: removal,
	})

	// Functions.
	env := p.environment(refs{ledger: ledger, content: content, budget: budget, contentKey: contentKey, dispatchQueue: dispatchQueue})
	fns := map[settings.Role]awslambda.Function{}
	for _, name := range settings.Functions {
		fns[name] = p.function(stack, name, env[name])
	}
	claim, dispatch, reconcile, expire := fns[settings.Claim], fns[settings.Dispatch], fns[settings.Reconcile], fns[settings.Expire]

	// Triggers.
	// The mapping is declared directly rather than through SqsEventSource, whose binding also
	// grants sqs:ChangeMessageVisibility and sqs:GetQueueUrl, which Lambda's poller never calls;
	// the three actions it does call are granted below.
	awslambda.NewEventSourceMapping(stack, jsii.String("ClaimIntentQueueSource"), &awslambda.EventSourceMappingProps{
		Target:                  claim,
		EventSourceArn:          intentQueue.QueueArn(),
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(p.ClaimMaxConcurrency)),
	})
	// Dispatch's second trigger, declared like claim's for the same reason.
	awslambda.NewEventSourceMapping(stack, jsii.String("DispatchQueueSource"), &awslambda.EventSourceMappingProps{
		Target:                  dispatch,
		EventSourceArn:          dispatchQueue.QueueArn(),
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(p.DispatchQueueMaxConcurrency)),
	})
	// TRIM_HORIZON, not LATEST: a mapping created, re-created or re-enabled after claims were
	// written must still dispatch them. Old records are harmless: dispatch's conditional
	// claimed->dispatching write (with the expiry check) decides, and MaxRecordAge bounds the tail.
	dispatch.AddEventSource(awslambdaeventsources.NewDynamoEventSource(ledger, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(10),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(3),
		MaxRecordAge:            seconds(dispatchMaxRecordAge),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               &sendOnlyDLQ{queue: streamDLQ},
		// Only the changes ledger.TriggersDispatch names start a dispatch (a row inserted claimed, a
		// held fallback row released); the patterns are generated from that rule.
		Filters: dispatchFilters(),
	}))
	p.schedule(stack, settings.Reconcile, reconcile, p.ReconcileRate)
	p.schedule(stack, settings.Expire, expire, p.ExpireRate)

	// Permissions beyond what the event sources grant (SQS consume for claim; stream read, the
	// stream's key and the on-failure queue for dispatch).
	ledgerArn, contentArn := ledger.TableArn(), content.TableArn()
	openIndexArn := awscdk.Fn_Join(jsii.String(""), &[]*string{ledgerArn, jsii.String("/index/" + openIndexName)})
	allow := func(fn awslambda.Function, resources []*string, actions ...string) {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(actions...),
			Resources: &resources,
		}))
	}
	// DynamoDB calls KMS on the caller's behalf for tables under a customer-managed key.
	for _, name := range settings.Functions {
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"),
			Resources: jsii.Strings(*ledgerKey.KeyArn()),
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{
					"kms:ViaService": awscdk.Fn_Sub(jsii.String("dynamodb.${AWS::Region}.${AWS::URLSuffix}"), nil),
				},
			},
		}))
	}

	allow(claim, []*string{intentQueue.QueueArn()}, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
	allow(claim, []*string{ledgerArn}, "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(claim, []*string{contentArn}, "dynamodb:PutItem")

	allow(dispatch, []*string{ledgerArn}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(dispatch, []*string{contentArn}, "dynamodb:GetItem", "dynamodb:DeleteItem")
	allow(dispatch, []*string{budget.TableArn()}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	// The mapping's poller, and dispatch re-scheduling a row (a deferred row's wake-up).
	allow(dispatch, []*string{dispatchQueue.QueueArn()}, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
		"sqs:SendMessage")

	allow(reconcile, []*string{openIndexArn}, "dynamodb:Query")
	// Sweeps list the open index's keys, then read the rows in batches (Store.ListOpen).
	allow(reconcile, []*string{ledgerArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(reconcile, []*string{contentArn}, "dynamodb:GetItem", "dynamodb:DeleteItem")
	// Re-drives: due rows no dispatch picked up within RedriveAfter go back to dispatch.
	allow(reconcile, []*string{dispatchQueue.QueueArn()}, "sqs:SendMessage")

	allow(expire, []*string{openIndexArn}, "dynamodb:Query")
	allow(expire, []*string{ledgerArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(expire, []*string{contentArn}, "dynamodb:DeleteItem")

	// Content key: the senders decrypt; a key-policy deny makes that exclusive within the account.
	// Only dispatch sends through SES and SMS: reconcile retries only through a transport that
	// honors an idempotency key (the webhook), which needs no AWS permission.
	senders := []awslambda.Function{dispatch, reconcile}
	senderRoles := []*string{}
	for _, fn := range senders {
		contentKey.GrantDecrypt(fn)
		senderRoles = append(senderRoles, fn.Role().RoleArn())
	}
	p.grantSend(stack, dispatch)
	contentKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlySendersDecrypt"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": senderRoles},
		},
	}), jsii.Bool(false))
	for _, arn := range p.ProducerPrincipalArns {
		producer := awsiam.NewArnPrincipal(jsii.String(arn))
		contentKey.Grant(producer, jsii.String("kms:Encrypt"), jsii.String("kms:GenerateDataKey"))
		intentQueue.GrantSendMessages(producer)
	}

	// Actions without resource-level permissions, granted on *.
	wildcard := "dynamodb:ListStreams supports no resource-level permission, so the stream binding " +
		"(Table.grantStreamRead) grants it on *; every other stream action is scoped to this table's stream ARN."
	if p.readsSESSendRate() {
		wildcard += " ses:GetAccount (SES v2) has no resource ARN either: dispatch reads the account's MaxSendRate " +
			"as the email send-rate budget at cold start, because no sendRateEmail is configured."
	}
	cdknag.NagSuppressions_AddResourceSuppressions(dispatch.Role(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(wildcard), AppliesTo: &[]interface{}{"Resource::*"},
	}}, jsii.Bool(true))

	if !p.SkipObservability {
		err := p.observability(stack, observed{fns: fns, intentQueue: intentQueue, intentDLQ: intentDLQ, streamDLQ: streamDLQ,
			dispatchQueue: dispatchQueue, dispatchDLQ: dispatchDLQ})
		if err != nil {
			return nil, err
		}
	}

	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("IntentQueueUrl", intentQueue.QueueUrl(), "Producers send notification intents here")
	out("IntentQueueArn", intentQueue.QueueArn(), "Intent queue ARN (for producer IAM policies)")
	out("IntentDlqUrl", intentDLQ.QueueUrl(), "Poison and repeatedly failing intents")
	out("StreamFailureDlqUrl", streamDLQ.QueueUrl(), "Stream batches dispatch gave up on (metadata only)")
	out("DispatchQueueUrl", dispatchQueue.QueueUrl(), "Wake-ups and re-drives of rows for dispatch")
	out("DispatchQueueDlqUrl", dispatchDLQ.QueueUrl(), "Dispatch-queue messages dispatch kept failing on")
	out("LedgerTableName", ledger.TableName(), "Delivery-claim ledger")
	out("ContentTableName", content.TableName(), "Sealed content store")
	out("BudgetTableName", budget.TableName(), "Send-rate budget per channel")
	out("ContentKeyArn", contentKey.KeyArn(), "Producers encrypt notification content with this key")
	for _, name := range settings.Functions {
		out(title(name)+"FunctionName", fns[name].FunctionName(), string(name)+" function")
	}
	suppressLinterFindings(stack) // cfn-lint and checkov findings that do not apply, with reasons (linters.go)
	return stack, nil
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

// refs are the resources the functions' environment names.
type refs struct {
	ledger, content, budget awsdynamodb.Table
	contentKey              awskms.Key
	dispatchQueue           awssqs.Queue
}

// environment returns each function's environment: the variables the functions' settings give
// it (settings.Settings.Environ), with the stack's tables, content key and dispatch queue.
func (p *LedgerStackProps) environment(r refs) map[settings.Role]map[string]*string {
	fs := p.Functions
	fs.LedgerTable, fs.ContentTable, fs.BudgetTable = *r.ledger.TableName(), *r.content.TableName(), *r.budget.TableName()
	fs.ContentKeyARN, fs.DispatchQueueURL = *r.contentKey.KeyArn(), *r.dispatchQueue.QueueUrl()
	env := map[settings.Role]map[string]*string{}
	for _, name := range settings.Functions {
		env[name] = map[string]*string{}
		for k, v := range fs.Environ(name) {
			env[name][k] = jsii.String(v)
		}
	}
	return env
}

// function defines one Lambda function with its own role and log group (no managed policies).
func (p *LedgerStackProps) function(stack awscdk.Stack, name settings.Role, env map[string]*string) awslambda.Function {
	id := title(name)
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + p.Prefix + "-" + string(name)),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: p.removalPolicy(),
	})
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(p.Prefix + " " + string(name) + " function"),
	})
	logs.GrantWrite(role)
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(p.Prefix + "-" + string(name)),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetDir, string(name))), nil),
		Architecture: p.Architecture,
		MemorySize:   jsii.Number(functionMemoryMB),
		Timeout:      seconds(p.timeout(name)),
		Environment:  &env,
		LogGroup:     logs,
		Role:         role,
	}
	if rate, ok := p.sweepRate(name); ok {
		// A failed sweep is not retried asynchronously: the next scheduled tick is the retry.
		props.RetryAttempts = jsii.Number(0)
		// One sweep of a kind at a time; a tick throttled by a running sweep is dropped once the
		// next tick is due instead of queueing up behind it.
		props.ReservedConcurrentExecutions = jsii.Number(1)
		props.MaxEventAge = seconds(rate)
	}
	return awslambda.NewFunction(stack, jsii.String(id+"Function"), props)
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

// timeout returns a function's timeout.
func (p *LedgerStackProps) timeout(name settings.Role) time.Duration {
	if _, ok := p.sweepRate(name); ok {
		return p.SweepTimeout
	}
	return functionTimeouts[name]
}

// sweepRate returns a scheduled sweep function's rate; ok is false for the other functions.
func (p *LedgerStackProps) sweepRate(name settings.Role) (rate time.Duration, ok bool) {
	switch name {
	case settings.Reconcile:
		return p.ReconcileRate, true
	case settings.Expire:
		return p.ExpireRate, true
	}
	return 0, false
}

// schedule invokes fn at a fixed rate.
func (p *LedgerStackProps) schedule(stack awscdk.Stack, name settings.Role, fn awslambda.Function, rate time.Duration) {
	id := title(name)
	awsevents.NewRule(stack, jsii.String(id+"Schedule"), &awsevents.RuleProps{
		Description: jsii.String(p.Prefix + " " + string(name) + " sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(rate.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   seconds(rate),
		})},
	})
}

// grantSend lets fn call the configured transports: SES v2 SendEmail scoped to the sending
// identity (and configuration set) and from address, and End User Messaging SendTextMessage.
func (p *LedgerStackProps) grantSend(stack awscdk.Stack, fn awslambda.Function) {
	if p.Functions.Transports[ledger.Email] == settings.TransportSES {
		resources := []*string{awscdk.Arn_Format(&awscdk.ArnComponents{
			Service: jsii.String("ses"), Resource: jsii.String("identity"),
			ResourceName: jsii.String(p.sesIdentity()), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}, stack)}
		if p.Functions.SESConfigurationSet != "" {
			resources = append(resources, awscdk.Arn_Format(&awscdk.ArnComponents{
				Service: jsii.String("ses"), Resource: jsii.String("configuration-set"),
				ResourceName: jsii.String(p.Functions.SESConfigurationSet), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
			}, stack))
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("ses:SendEmail"),
			Resources: &resources,
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"ses:FromAddress": p.Functions.SESFrom},
			},
		}))
		if p.readsSESSendRate() {
			// SES v2 GetAccount has no resource ARN: it is allowed on * or not at all.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("ses:GetAccount"),
				Resources: jsii.Strings("*"),
			}))
		}
	}
	if p.Functions.Transports[ledger.SMS] == settings.TransportSMS {
		resource := p.Functions.SMSOrigination
		if !strings.HasPrefix(resource, "arn:") {
			resource = *awscdk.Arn_Format(&awscdk.ArnComponents{
				Service: jsii.String("sms-voice"), Resource: jsii.String("*"),
				ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME,
			}, stack)
			cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"),
				Reason: jsii.String("No origination-identity ARN is configured for this stage, so End User Messaging " +
					"picks the sender and sms-voice:SendTextMessage is scoped to this account and region only. " +
					"Pass smsOriginationIdentity=<phone-number/pool ARN> to scope it to one identity."),
				AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:sms-voice:<AWS::Region>:<AWS::AccountId>:*"},
			}}, jsii.Bool(true))
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("sms-voice:SendTextMessage"),
			Resources: jsii.Strings(resource),
		}))
	}
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}
