package main

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Function names, as built by the Makefile into <AssetDir>/<name>/bootstrap.
const (
	FnClaim     = "claim"
	FnDispatch  = "dispatch"
	FnReconcile = "reconcile"
	FnExpire    = "expire"
)

// FunctionNames lists the four functions in a stable order.
var FunctionNames = []string{FnClaim, FnDispatch, FnReconcile, FnExpire}

// Transport names accepted per channel (the EMAIL_TRANSPORT / SMS_TRANSPORT values).
const (
	TransportSES     = "ses"
	TransportSMS     = "sms"
	TransportWebhook = "webhook"
)

// Names shared with the functions' code: the sparse open-claims index and the EMF metrics.
const (
	OpenIndexName   = "open"
	MetricNamespace = "ResetLedger"
)

// Fixed function settings from the contract.
var functionTimeouts = map[string]time.Duration{
	FnClaim:     30 * time.Second,
	FnDispatch:  60 * time.Second,
	FnReconcile: 120 * time.Second,
	FnExpire:    120 * time.Second,
}

const functionMemoryMB = 256

// LedgerStackProps configures one stage of the ledger. Start from DefaultLedgerStackProps and
// override; NewLedgerStack validates every field and applies no hidden defaults.
type LedgerStackProps struct {
	awscdk.StackProps

	// Prefix names the stage's functions, alarms and dashboard, e.g. "resetledger-dev".
	Prefix string
	// AssetDir holds <name>/bootstrap for each function (the Makefile's dist folder).
	AssetDir string
	// Architecture of the bootstrap binaries: arm64 on AWS, the host's for a local emulator.
	Architecture awslambda.Architecture

	// DeletionProtection turns on table deletion protection and retains tables, keys and
	// log groups when the stack is deleted. Off for throw-away stages.
	DeletionProtection bool
	// PointInTimeRecovery enables PITR on the ledger table (never on the content table).
	PointInTimeRecovery bool

	// IntentRetention is the intent queue's message retention (short: intents expire fast).
	IntentRetention time.Duration
	// MaxReceiveCount is how often an intent is received before it moves to the DLQ.
	MaxReceiveCount int
	// IntentVisibilityTimeout is the intent queue's visibility timeout: how long a received intent
	// stays hidden, so the delay before a failed claim is retried. At least the claim function's
	// timeout (SQS event sources require it); six times it by default, as AWS recommends. A local
	// stage lowers it, with MaxReceiveCount, so poison intents reach the DLQ in about a minute.
	IntentVisibilityTimeout time.Duration
	// ReconcileRate and ExpireRate are the EventBridge schedule rates (whole minutes).
	ReconcileRate time.Duration
	ExpireRate    time.Duration
	// LogRetentionDays for every function's log group; must be a CloudWatch Logs value.
	LogRetentionDays int

	// Function configuration, passed as environment variables.
	PolicyVersion          string
	LeaseDuration          time.Duration
	ExpiryMargin           time.Duration
	HistoryRetention       time.Duration
	EmailTransport         string // "ses" or "webhook"
	SMSTransport           string // "sms" or "webhook"
	SESFromAddress         string // required when EmailTransport is "ses"
	SESIdentity            string // SES identity that authorises the sender; defaults to the from address's domain
	SESConfigurationSet    string // optional
	SMSOriginationIdentity string // optional; an ARN scopes sms-voice:SendTextMessage to it
	WebhookURL             string // required when a transport is "webhook"
	WebhookKeyWindow       time.Duration
	WebhookTimeout         time.Duration
	WebhookLookup          bool // the webhook answers GET <url>/<key> (lookup-based reconciliation)
	ReconcileMaxAttempts   int
	SweepLimit             int // rows one reconcile/expire sweep handles per state
	LogLevel               string

	// ProducerPrincipalArns may send intents and encrypt content (the account service's roles).
	ProducerPrincipalArns []string
	// AlarmTopicArn, if set, receives alarm and OK notifications.
	AlarmTopicArn string
	// SkipObservability leaves out the alarms and the dashboard (for emulators lacking them).
	SkipObservability bool
}

// DefaultLedgerStackProps returns the production defaults for a stage.
func DefaultLedgerStackProps(stage string) *LedgerStackProps {
	return &LedgerStackProps{
		Prefix:                  "resetledger-" + stage,
		AssetDir:                filepath.Join("..", "dist"),
		Architecture:            awslambda.Architecture_ARM_64(),
		DeletionProtection:      true,
		PointInTimeRecovery:     true,
		IntentRetention:         time.Hour,
		MaxReceiveCount:         5,
		IntentVisibilityTimeout: 6 * functionTimeouts[FnClaim],
		ReconcileRate:           time.Minute,
		ExpireRate:              time.Minute,
		LogRetentionDays:        30,
		PolicyVersion:           "policy-1",
		LeaseDuration:           2 * time.Minute,
		ExpiryMargin:            30 * time.Second,
		HistoryRetention:        9600 * time.Hour,
		EmailTransport:          TransportSES,
		SMSTransport:            TransportSMS,
		WebhookKeyWindow:        24 * time.Hour,
		WebhookTimeout:          5 * time.Second,
		ReconcileMaxAttempts:    3,
		SweepLimit:              500,
		LogLevel:                "info",
	}
}

var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS,
	5: awslogs.RetentionDays_FIVE_DAYS, 7: awslogs.RetentionDays_ONE_WEEK,
	14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS,
	120: awslogs.RetentionDays_FOUR_MONTHS, 150: awslogs.RetentionDays_FIVE_MONTHS,
	180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS,
	731: awslogs.RetentionDays_TWO_YEARS, 1096: awslogs.RetentionDays_THREE_YEARS,
	1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS,
	3288: awslogs.RetentionDays_NINE_YEARS, 3653: awslogs.RetentionDays_TEN_YEARS,
}

// Validate reports every invalid field at once.
func (p *LedgerStackProps) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if p.Prefix == "" {
		bad("Prefix is empty")
	}
	if p.Architecture == nil {
		bad("Architecture is not set")
	}
	if p.AssetDir == "" {
		bad("AssetDir is empty")
	} else {
		for _, name := range FunctionNames {
			f := filepath.Join(p.AssetDir, name, "bootstrap")
			if st, err := os.Stat(f); err != nil || st.IsDir() {
				bad("missing %s: build the functions first (make build)", f)
			}
		}
	}
	if p.IntentRetention < time.Minute || p.IntentRetention > 14*24*time.Hour {
		bad("IntentRetention %v: want 1m..14d", p.IntentRetention)
	}
	if p.MaxReceiveCount < 1 || p.MaxReceiveCount > 1000 {
		bad("MaxReceiveCount %d: want 1..1000", p.MaxReceiveCount)
	}
	if v := p.IntentVisibilityTimeout; v < functionTimeouts[FnClaim] || v > 12*time.Hour || v%time.Second != 0 {
		bad("IntentVisibilityTimeout %v: want whole seconds from the claim timeout %v to 12h", v, functionTimeouts[FnClaim])
	}
	for name, rate := range map[string]time.Duration{"ReconcileRate": p.ReconcileRate, "ExpireRate": p.ExpireRate} {
		if rate < time.Minute || rate%time.Minute != 0 {
			bad("%s %v: want whole minutes, at least 1m", name, rate)
		}
	}
	if _, ok := retentionDays[p.LogRetentionDays]; !ok {
		bad("LogRetentionDays %d is not a CloudWatch Logs retention value", p.LogRetentionDays)
	}
	if p.PolicyVersion == "" {
		bad("PolicyVersion is empty")
	}
	for name, d := range map[string]time.Duration{
		"LeaseDuration": p.LeaseDuration, "ExpiryMargin": p.ExpiryMargin,
		"HistoryRetention": p.HistoryRetention, "WebhookTimeout": p.WebhookTimeout,
	} {
		if d <= 0 {
			bad("%s %v: want > 0", name, d)
		}
	}
	// Zero is honest for an endpoint that does not deduplicate by key: its
	// unknown outcomes are quarantined instead of retried.
	if p.WebhookKeyWindow < 0 {
		bad("WebhookKeyWindow %v: want >= 0", p.WebhookKeyWindow)
	}
	if p.WebhookTimeout >= functionTimeouts[FnDispatch] {
		bad("WebhookTimeout %v must be below the dispatch timeout %v", p.WebhookTimeout, functionTimeouts[FnDispatch])
	}
	if p.ReconcileMaxAttempts < 1 {
		bad("ReconcileMaxAttempts %d: want >= 1", p.ReconcileMaxAttempts)
	}
	if p.SweepLimit < 1 {
		bad("SweepLimit %d: want >= 1", p.SweepLimit)
	}
	switch p.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("LogLevel %q: want debug, info, warn or error", p.LogLevel)
	}
	switch p.EmailTransport {
	case TransportSES:
		if !strings.Contains(p.SESFromAddress, "@") {
			bad("EmailTransport ses needs SESFromAddress (got %q)", p.SESFromAddress)
		}
	case TransportWebhook:
	default:
		bad("EmailTransport %q: want ses or webhook", p.EmailTransport)
	}
	switch p.SMSTransport {
	case TransportSMS, TransportWebhook:
	default:
		bad("SMSTransport %q: want sms or webhook", p.SMSTransport)
	}
	if p.EmailTransport == TransportWebhook || p.SMSTransport == TransportWebhook {
		u, err := url.Parse(p.WebhookURL)
		loopback := err == nil && u.Scheme == "http" && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost")
		if err != nil || u.Host == "" || (u.Scheme != "https" && !loopback) {
			bad("a webhook transport needs WebhookURL https://host/... (plain http only on loopback), got %q", p.WebhookURL)
		}
	}
	return errors.Join(errs...)
}

func (p *LedgerStackProps) sesIdentity() string {
	if p.SESIdentity != "" {
		return p.SESIdentity
	}
	_, domain, _ := strings.Cut(p.SESFromAddress, "@")
	return domain
}

func (p *LedgerStackProps) removalPolicy() awscdk.RemovalPolicy {
	if p.DeletionProtection {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}

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

	// Keys. The ledger key encrypts both tables at rest; the content key seals the secret-bearing
	// envelope, which the producer encrypts and only dispatch and reconcile may decrypt.
	ledgerKey := awskms.NewKey(stack, jsii.String("LedgerKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " ledger and content tables at rest"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     removal,
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})
	contentKey := awskms.NewKey(stack, jsii.String("ContentKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " sealed reset-notification content (producer encrypts, dispatch decrypts)"),
		Alias:             jsii.String("alias/" + p.Prefix + "-content"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     removal,
		PendingWindow:     awscdk.Duration_Days(jsii.Number(7)),
	})

	// Tables.
	ledger := awsdynamodb.NewTable(stack, jsii.String("LedgerTable"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		Stream:              awsdynamodb.StreamViewType_NEW_AND_OLD_IMAGES,
		TimeToLiveAttribute: jsii.String("ttl"),
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       ledgerKey,
		DeletionProtection:  jsii.Bool(p.DeletionProtection),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(p.PointInTimeRecovery),
		},
		RemovalPolicy: removal,
	})
	ledger.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
		IndexName:      jsii.String(OpenIndexName),
		PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String("open_pk"), Type: awsdynamodb.AttributeType_STRING},
		SortKey:        &awsdynamodb.Attribute{Name: jsii.String("open_due"), Type: awsdynamodb.AttributeType_STRING},
		ProjectionType: awsdynamodb.ProjectionType_KEYS_ONLY,
	})
	content := awsdynamodb.NewTable(stack, jsii.String("ContentTable"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("ttl"),
		Encryption:          awsdynamodb.TableEncryption_CUSTOMER_MANAGED,
		EncryptionKey:       ledgerKey,
		DeletionProtection:  jsii.Bool(p.DeletionProtection),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(false),
		},
		// Sealed content lives minutes; nothing in it is worth keeping after the stack is gone.
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(content, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-DDB3"),
		Reason: jsii.String("The content table holds sealed secret-bearing messages for minutes (TTL at challenge " +
			"expiry, purged at every terminal state); point-in-time backups would keep reset secrets for 35 days, " +
			"which the design forbids."),
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

	// Functions.
	env := p.environment(ledger, content, contentKey)
	fns := map[string]awslambda.Function{}
	for _, name := range FunctionNames {
		fns[name] = p.function(stack, name, env[name])
	}
	claim, dispatch, reconcile, expire := fns[FnClaim], fns[FnDispatch], fns[FnReconcile], fns[FnExpire]

	// Triggers.
	claim.AddEventSource(awslambdaeventsources.NewSqsEventSource(intentQueue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}))
	// TRIM_HORIZON, not LATEST: a mapping created, re-created or re-enabled after claims were
	// written must still dispatch them. Old records are harmless: dispatch's conditional
	// claimed->dispatching write (with the expiry check) decides, and MaxRecordAge bounds the tail.
	dispatch.AddEventSource(awslambdaeventsources.NewDynamoEventSource(ledger, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(10),
		BisectBatchOnError:      jsii.Bool(true),
		RetryAttempts:           jsii.Number(3),
		MaxRecordAge:            awscdk.Duration_Hours(jsii.Number(1)),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(streamDLQ),
		// A row becomes claimed by being inserted claimed, or (a held
		// fallback channel whose earlier channel ended rejected) by moving
		// from held to claimed. Nothing else starts a dispatch.
		Filters: &[]*map[string]interface{}{
			awslambda.FilterCriteria_Filter(&map[string]interface{}{
				"eventName": []string{"INSERT"},
				"dynamodb": map[string]interface{}{
					"NewImage": map[string]interface{}{"state": map[string]interface{}{"S": []string{"claimed"}}},
				},
			}),
			awslambda.FilterCriteria_Filter(&map[string]interface{}{
				"eventName": []string{"MODIFY"},
				"dynamodb": map[string]interface{}{
					"NewImage": map[string]interface{}{"state": map[string]interface{}{"S": []string{"claimed"}}},
					"OldImage": map[string]interface{}{"state": map[string]interface{}{"S": []string{"held"}}},
				},
			}),
		},
	}))
	p.schedule(stack, FnReconcile, reconcile, p.ReconcileRate)
	p.schedule(stack, FnExpire, expire, p.ExpireRate)

	// Permissions beyond what the event sources grant (SQS consume for claim; stream read, the
	// stream's key and the on-failure queue for dispatch).
	ledgerArn, contentArn := ledger.TableArn(), content.TableArn()
	openIndexArn := awscdk.Fn_Join(jsii.String(""), &[]*string{ledgerArn, jsii.String("/index/" + OpenIndexName)})
	allow := func(fn awslambda.Function, resources []*string, actions ...string) {
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(actions...),
			Resources: &resources,
		}))
	}
	// DynamoDB calls KMS on the caller's behalf for tables under a customer-managed key.
	for _, name := range FunctionNames {
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

	allow(claim, []*string{ledgerArn}, "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(claim, []*string{contentArn}, "dynamodb:PutItem")

	allow(dispatch, []*string{ledgerArn}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(dispatch, []*string{contentArn}, "dynamodb:GetItem", "dynamodb:DeleteItem")

	allow(reconcile, []*string{openIndexArn}, "dynamodb:Query")
	allow(reconcile, []*string{ledgerArn}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(reconcile, []*string{contentArn}, "dynamodb:GetItem", "dynamodb:DeleteItem")

	allow(expire, []*string{openIndexArn}, "dynamodb:Query")
	allow(expire, []*string{ledgerArn}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(expire, []*string{contentArn}, "dynamodb:DeleteItem")

	// Content key: the senders decrypt; a key-policy deny makes that exclusive within the account.
	senders := []awslambda.Function{dispatch, reconcile}
	senderRoles := []*string{}
	for _, fn := range senders {
		contentKey.GrantDecrypt(fn)
		senderRoles = append(senderRoles, fn.Role().RoleArn())
		p.grantSend(stack, fn)
	}
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

	// Suppressions for the grants CDK's event-source bindings make.
	cdknag.NagSuppressions_AddResourceSuppressions(dispatch.Role(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("dynamodb:ListStreams supports no resource-level permission, so the stream binding " +
			"(Table.grantStreamRead) grants it on *; every other stream action is scoped to this table's stream ARN."),
		AppliesTo: &[]interface{}{"Resource::*"},
	}}, jsii.Bool(true))

	if !p.SkipObservability {
		p.observability(stack, intentDLQ, streamDLQ)
	}

	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("IntentQueueUrl", intentQueue.QueueUrl(), "Producers send notification intents here")
	out("IntentQueueArn", intentQueue.QueueArn(), "Intent queue ARN (for producer IAM policies)")
	out("IntentDlqUrl", intentDLQ.QueueUrl(), "Poison and repeatedly failing intents")
	out("StreamFailureDlqUrl", streamDLQ.QueueUrl(), "Stream batches dispatch gave up on (metadata only)")
	out("LedgerTableName", ledger.TableName(), "Delivery-claim ledger")
	out("ContentTableName", content.TableName(), "Sealed content store")
	out("ContentKeyArn", contentKey.KeyArn(), "Producers encrypt notification content with this key")
	for _, name := range FunctionNames {
		out(strings.ToUpper(name[:1])+name[1:]+"FunctionName", fns[name].FunctionName(), name+" function")
	}
	suppressLinterFindings(stack) // cfn-lint and checkov findings that do not apply, with reasons (linters.go)
	return stack, nil
}

// environment returns each function's environment variables.
func (p *LedgerStackProps) environment(ledger, content awsdynamodb.Table, contentKey awskms.Key) map[string]map[string]*string {
	common := map[string]string{
		"LEDGER_TABLE":      *ledger.TableName(),
		"CONTENT_TABLE":     *content.TableName(),
		"POLICY_VERSION":    p.PolicyVersion,
		"LEASE_DURATION":    compactDuration(p.LeaseDuration),
		"EXPIRY_MARGIN":     compactDuration(p.ExpiryMargin),
		"HISTORY_RETENTION": compactDuration(p.HistoryRetention),
		"LOG_LEVEL":         p.LogLevel,
	}
	sweeping := map[string]string{"SWEEP_LIMIT": strconv.Itoa(p.SweepLimit)}
	sending := map[string]string{
		"CONTENT_KEY_ARN":          *contentKey.KeyArn(),
		"EMAIL_TRANSPORT":          p.EmailTransport,
		"SMS_TRANSPORT":            p.SMSTransport,
		"SES_FROM_ADDRESS":         p.SESFromAddress,
		"SES_CONFIGURATION_SET":    p.SESConfigurationSet,
		"SMS_ORIGINATION_IDENTITY": p.SMSOriginationIdentity,
		"WEBHOOK_URL":              p.WebhookURL,
		"WEBHOOK_KEY_WINDOW":       compactDuration(p.WebhookKeyWindow),
		"WEBHOOK_TIMEOUT":          compactDuration(p.WebhookTimeout),
		"RECONCILE_MAX_ATTEMPTS":   strconv.Itoa(p.ReconcileMaxAttempts),
	}
	if p.WebhookLookup {
		sending["WEBHOOK_LOOKUP"] = "true"
	}
	env := map[string]map[string]*string{}
	for _, name := range FunctionNames {
		m := map[string]*string{}
		add := func(vars map[string]string) {
			for k, v := range vars {
				if v != "" { // optional settings are absent rather than empty
					m[k] = jsii.String(v)
				}
			}
		}
		add(common)
		if name == FnDispatch || name == FnReconcile {
			add(sending)
		}
		if name == FnReconcile || name == FnExpire {
			add(sweeping)
		}
		env[name] = m
	}
	return env
}

// function defines one Lambda function with its own role and log group (no managed policies).
func (p *LedgerStackProps) function(stack awscdk.Stack, name string, env map[string]*string) awslambda.Function {
	id := strings.ToUpper(name[:1]) + name[1:]
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + p.Prefix + "-" + name),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: p.removalPolicy(),
	})
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(p.Prefix + " " + name + " function"),
	})
	logs.GrantWrite(role)
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(p.Prefix + "-" + name),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetDir, name)), nil),
		Architecture: p.Architecture,
		MemorySize:   jsii.Number(functionMemoryMB),
		Timeout:      seconds(functionTimeouts[name]),
		Environment:  &env,
		LogGroup:     logs,
		Role:         role,
	}
	if name == FnReconcile || name == FnExpire {
		// A failed sweep is not retried asynchronously: the next scheduled tick is the retry.
		props.RetryAttempts = jsii.Number(0)
	}
	return awslambda.NewFunction(stack, jsii.String(id+"Function"), props)
}

// schedule invokes fn at a fixed rate.
func (p *LedgerStackProps) schedule(stack awscdk.Stack, name string, fn awslambda.Function, rate time.Duration) {
	id := strings.ToUpper(name[:1]) + name[1:]
	awsevents.NewRule(stack, jsii.String(id+"Schedule"), &awsevents.RuleProps{
		Description: jsii.String(p.Prefix + " " + name + " sweep"),
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
	if p.EmailTransport == TransportSES {
		resources := []*string{awscdk.Arn_Format(&awscdk.ArnComponents{
			Service: jsii.String("ses"), Resource: jsii.String("identity"),
			ResourceName: jsii.String(p.sesIdentity()), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}, stack)}
		if p.SESConfigurationSet != "" {
			resources = append(resources, awscdk.Arn_Format(&awscdk.ArnComponents{
				Service: jsii.String("ses"), Resource: jsii.String("configuration-set"),
				ResourceName: jsii.String(p.SESConfigurationSet), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
			}, stack))
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("ses:SendEmail"),
			Resources: &resources,
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"ses:FromAddress": p.SESFromAddress},
			},
		}))
	}
	if p.SMSTransport == TransportSMS {
		resource := p.SMSOriginationIdentity
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

// observability defines the alarms and the dashboard over the EMF metrics and the DLQs.
func (p *LedgerStackProps) observability(stack awscdk.Stack, intentDLQ, streamDLQ awssqs.Queue) {
	period := awscdk.Duration_Minutes(jsii.Number(5))
	claims := func(metric, state, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String(MetricNamespace),
			MetricName:    jsii.String(metric),
			DimensionsMap: &map[string]*string{"State": jsii.String(state)},
			Statistic:     jsii.String(stat),
			Period:        period,
		})
	}
	var topic awssns.ITopic
	if p.AlarmTopicArn != "" {
		topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(p.AlarmTopicArn))
	}
	alarm := func(id, desc string, metric awscloudwatch.IMetric, threshold float64, op awscloudwatch.ComparisonOperator) {
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(p.Prefix + "-" + id),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: op,
			EvaluationPeriods:  jsii.Number(1),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if topic != nil {
			a.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
			a.AddOkAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}
	gte := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	gt := awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD

	// A dispatching row older than its lease plus two sweeps means reconcile is not keeping up.
	ageLimit := p.LeaseDuration + 2*p.ReconcileRate
	alarm("OldestDispatchingAge",
		fmt.Sprintf("A claim has been dispatching for more than %v (lease %v + two reconcile sweeps).", ageLimit, p.LeaseDuration),
		claims("OpenClaimOldestAgeSeconds", "dispatching", "Maximum"), ageLimit.Seconds(), gt)
	// "unknown + quarantined >= 1" as two plain alarms: for non-negative counts it fires exactly when
	// either does, and it needs no metric math (which the local emulator's CloudFormation rejects).
	alarm("UnknownClaims", "Claims in state unknown: the transport outcome is uncertain and awaits reconciliation.",
		claims("OpenClaims", "unknown", "Maximum"), 1, gte)
	alarm("QuarantinedClaims", "Claims in state quarantined: the policy cannot resolve them; an operator must record a decision.",
		claims("OpenClaims", "quarantined", "Maximum"), 1, gte)
	alarm("IntentDlqDepth", "Intents moved to the DLQ (poison input or repeated claim failures).",
		intentDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: period}), 1, gte)
	alarm("StreamFailureDlqDepth", "Dispatch gave up on stream records; claims may sit in claimed until expire runs.",
		streamDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: period}), 1, gte)
	alarm("ContentMismatch", "An identity arrived again with a different content hash (blocked, not sent).",
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricNamespace), MetricName: jsii.String("ContentMismatch"),
			Statistic: jsii.String("Sum"), Period: period,
		}), 0, gt)

	states := []string{"claimed", "dispatching", "unknown", "quarantined"}
	var counts, ages []awscloudwatch.IMetric
	for _, s := range states {
		label := &awscloudwatch.MetricOptions{Label: jsii.String(s)}
		counts = append(counts, claims("OpenClaims", s, "Maximum").With(label))
		ages = append(ages, claims("OpenClaimOldestAgeSeconds", s, "Maximum").With(label))
	}
	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(p.Prefix),
		Widgets: &[]*[]awscloudwatch.IWidget{{
			awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
				Title: jsii.String("Open claims by state"), Left: &counts, Width: jsii.Number(12),
			}),
			awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
				Title: jsii.String("Oldest open claim age (s) by state"), Left: &ages, Width: jsii.Number(12),
			}),
		}},
	})
}

func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// compactDuration formats d as time.ParseDuration reads it, without zero units: 2m, 30s, 9600h.
func compactDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
