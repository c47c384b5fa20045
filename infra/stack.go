package main

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
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
	// ClaimMaxConcurrency caps the claim function instances the intent queue's event source runs
	// at once (2..1000, AWS's bounds), so a surge of intents cannot take the account's concurrency
	// or throttle the ledger table; intents beyond it wait in the queue.
	ClaimMaxConcurrency int
	// ReconcileRate and ExpireRate are the EventBridge schedule rates (whole minutes).
	ReconcileRate time.Duration
	ExpireRate    time.Duration
	// SweepTimeout is the reconcile and expire functions' timeout, below both rates so a sweep
	// ends before the next is scheduled. Each sweep function also has a reserved concurrency of
	// 1, so two sweeps of one kind never overlap even when a schedule tick arrives late.
	SweepTimeout time.Duration
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

	// Liveness under provider throttling (dispatch's send-rate budget, retries and wake-ups).
	//
	// SendRateEmail and SendRateSMS are the channels' send-rate budgets in sends per second
	// (SEND_RATE_EMAIL, SEND_RATE_SMS); 0 leaves the variable unset: dispatch then reads an SES
	// account's MaxSendRate at cold start (ses:GetAccount), and a webhook or SMS channel has no
	// budget.
	SendRateEmail float64
	SendRateSMS   float64
	// BudgetMaxWait is the longest dispatch waits in-process for a budget slot before it defers
	// the row to the dispatch queue (BUDGET_MAX_WAIT).
	BudgetMaxWait time.Duration
	// RetryBackoffBase and RetryBackoffMax bound dispatch's exponential backoff, with jitter,
	// after a not-sent answer (RETRY_BACKOFF_BASE, RETRY_BACKOFF_MAX).
	RetryBackoffBase time.Duration
	RetryBackoffMax  time.Duration
	// RedriveAfter is how long past due a row may wait before reconcile hands it back to
	// dispatch through the dispatch queue (REDRIVE_AFTER).
	RedriveAfter time.Duration
	// DispatchQueueMaxConcurrency caps the dispatch instances the dispatch queue's event source
	// runs at once (2..1000), so a wave of wake-ups cannot take the account's concurrency.
	DispatchQueueMaxConcurrency int

	// ProducerPrincipalArns may send intents and encrypt content (the account service's roles).
	ProducerPrincipalArns []string
	// AlarmTopicArn is the SNS topic that receives alarm and OK notifications (the on-call
	// team's topic; the stack does not own it).
	AlarmTopicArn string
	// RequireAlarmTopic makes Validate refuse a stage without AlarmTopicArn, or one that skips
	// observability: alarms that notify no one are silent failures. On for every stage but dev.
	RequireAlarmTopic bool
	// MaxChallengeLifetime is the longest reset challenge producers issue (expires_at minus
	// issue time). A held or claimed row older than it plus two expire sweeps raises an alarm.
	MaxChallengeLifetime time.Duration
	// DispatchLagLimit is how far dispatch may fall behind the ledger stream (IteratorAge) before
	// it alarms; below the stream's one-hour record age limit, and well below a challenge's life.
	DispatchLagLimit time.Duration
	// SkipObservability leaves out the alarms and the dashboard (for emulators lacking them).
	SkipObservability bool
	// LogAWSCalls makes every function log each AWS call it makes with its IAM action and
	// resource (LEDGER_AWSCALL_LOG), for the local stack's permission check. Off on AWS.
	LogAWSCalls bool
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
		IntentVisibilityTimeout: 6 * functionTimeouts[settings.Claim],
		ClaimMaxConcurrency:     10,
		ReconcileRate:           time.Minute,
		ExpireRate:              time.Minute,
		SweepTimeout:            50 * time.Second,
		LogRetentionDays:        30,
		PolicyVersion:           "policy-1",
		LeaseDuration:           2 * time.Minute,
		ExpiryMargin:            30 * time.Second,
		HistoryRetention:        9600 * time.Hour,
		EmailTransport:          settings.TransportSES,
		SMSTransport:            settings.TransportSMS,
		WebhookKeyWindow:        24 * time.Hour,
		WebhookTimeout:          5 * time.Second,
		ReconcileMaxAttempts:    3,
		SweepLimit:              500,
		LogLevel:                "info",
		RequireAlarmTopic:       stage != "dev",
		MaxChallengeLifetime:    15 * time.Minute,
		DispatchLagLimit:        time.Minute,

		BudgetMaxWait:               2 * time.Second,
		RetryBackoffBase:            2 * time.Second,
		RetryBackoffMax:             time.Minute,
		RedriveAfter:                20 * time.Second,
		DispatchQueueMaxConcurrency: 5,
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
		for _, name := range settings.Functions {
			f := filepath.Join(p.AssetDir, string(name), "bootstrap")
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
	if v := p.IntentVisibilityTimeout; v < functionTimeouts[settings.Claim] || v > 12*time.Hour || v%time.Second != 0 {
		bad("IntentVisibilityTimeout %v: want whole seconds from the claim timeout %v to 12h", v, functionTimeouts[settings.Claim])
	}
	for name, n := range map[string]int{
		"ClaimMaxConcurrency": p.ClaimMaxConcurrency, "DispatchQueueMaxConcurrency": p.DispatchQueueMaxConcurrency,
	} {
		if n < 2 || n > 1000 {
			bad("%s %d: want 2..1000", name, n)
		}
	}
	if p.SweepTimeout < 10*time.Second || p.SweepTimeout%time.Second != 0 {
		bad("SweepTimeout %v: want whole seconds, at least 10s", p.SweepTimeout)
	}
	for _, r := range []struct {
		name string
		rate time.Duration
	}{{"ReconcileRate", p.ReconcileRate}, {"ExpireRate", p.ExpireRate}} {
		if r.rate < time.Minute || r.rate%time.Minute != 0 {
			bad("%s %v: want whole minutes, at least 1m", r.name, r.rate)
		}
		if p.SweepTimeout >= r.rate {
			bad("SweepTimeout %v must be below %s %v, or sweeps overlap", p.SweepTimeout, r.name, r.rate)
		}
	}
	if p.RequireAlarmTopic {
		if p.AlarmTopicArn == "" {
			bad("AlarmTopicArn is empty: this stage's alarms would notify no one (pass alarmTopicArn=<SNS topic ARN>)")
		}
		if p.SkipObservability {
			bad("SkipObservability is set on a stage that requires alarms (RequireAlarmTopic)")
		}
	}
	if a := p.AlarmTopicArn; a != "" {
		if parts := strings.Split(a, ":"); len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" || parts[5] == "" {
			bad("AlarmTopicArn %q: want arn:<partition>:sns:<region>:<account>:<topic>", a)
		}
	}
	if p.MaxChallengeLifetime <= 0 {
		bad("MaxChallengeLifetime %v: want > 0", p.MaxChallengeLifetime)
	}
	if p.DispatchLagLimit <= 0 || p.DispatchLagLimit >= dispatchMaxRecordAge {
		bad("DispatchLagLimit %v: want > 0 and below the stream record age limit %v", p.DispatchLagLimit, dispatchMaxRecordAge)
	}
	if 2*p.IntentVisibilityTimeout >= p.IntentRetention {
		bad("IntentVisibilityTimeout %v: the intent age alarm (two visibility timeouts) must fire before IntentRetention %v drops intents",
			p.IntentVisibilityTimeout, p.IntentRetention)
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
		"BudgetMaxWait": p.BudgetMaxWait, "RetryBackoffBase": p.RetryBackoffBase,
		"RetryBackoffMax": p.RetryBackoffMax, "RedriveAfter": p.RedriveAfter,
	} {
		if d <= 0 {
			bad("%s %v: want > 0", name, d)
		}
	}
	for name, r := range map[string]float64{"SendRateEmail": p.SendRateEmail, "SendRateSMS": p.SendRateSMS} {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			bad("%s %v: want sends per second > 0, or 0 for no configured rate", name, r)
		}
	}
	// Waiting for a slot holds a dispatch invocation; it must end well inside the timeout.
	if p.BudgetMaxWait >= functionTimeouts[settings.Dispatch]/2 {
		bad("BudgetMaxWait %v: want below half the dispatch timeout %v", p.BudgetMaxWait, functionTimeouts[settings.Dispatch])
	}
	if p.RetryBackoffMax < p.RetryBackoffBase {
		bad("RetryBackoffMax %v: want at least RetryBackoffBase %v", p.RetryBackoffMax, p.RetryBackoffBase)
	}
	// A retry is scheduled as a delayed dispatch-queue message: SQS delays at most 15 minutes.
	if p.RetryBackoffMax > maxWakeDelay {
		bad("RetryBackoffMax %v: want at most %v (the longest SQS message delay)", p.RetryBackoffMax, maxWakeDelay)
	}
	// Zero is honest for an endpoint that does not deduplicate by key: its
	// unknown outcomes are quarantined instead of retried.
	if p.WebhookKeyWindow < 0 {
		bad("WebhookKeyWindow %v: want >= 0", p.WebhookKeyWindow)
	}
	if p.WebhookTimeout >= functionTimeouts[settings.Dispatch] {
		bad("WebhookTimeout %v must be below the dispatch timeout %v", p.WebhookTimeout, functionTimeouts[settings.Dispatch])
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
	case settings.TransportSES:
		if !strings.Contains(p.SESFromAddress, "@") {
			bad("EmailTransport ses needs SESFromAddress (got %q)", p.SESFromAddress)
		}
	case settings.TransportWebhook:
	default:
		bad("EmailTransport %q: want ses or webhook", p.EmailTransport)
	}
	switch p.SMSTransport {
	case settings.TransportSMS, settings.TransportWebhook:
	default:
		bad("SMSTransport %q: want sms or webhook", p.SMSTransport)
	}
	if p.EmailTransport == settings.TransportWebhook || p.SMSTransport == settings.TransportWebhook {
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

// dispatchFilters is the dispatch stream event source's FilterCriteria: handler.DispatchFilter's
// patterns, generated from the dispatch trigger rule.
func dispatchFilters() *[]*map[string]interface{} {
	var filters []*map[string]interface{}
	for _, pattern := range handler.DispatchFilter() {
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

// environment returns each function's environment variables. A setting with a default is always
// set; an optional one whose absence means something (no configured send rate) is left out.
func (p *LedgerStackProps) environment(r refs) map[settings.Role]map[string]*string {
	common := map[string]string{
		"LEDGER_TABLE":      *r.ledger.TableName(),
		"CONTENT_TABLE":     *r.content.TableName(),
		"POLICY_VERSION":    p.PolicyVersion,
		"LEASE_DURATION":    compactDuration(p.LeaseDuration),
		"EXPIRY_MARGIN":     compactDuration(p.ExpiryMargin),
		"HISTORY_RETENTION": compactDuration(p.HistoryRetention),
		"LOG_LEVEL":         p.LogLevel,
	}
	if p.LogAWSCalls {
		common["LEDGER_AWSCALL_LOG"] = "true"
	}
	sweeping := map[string]string{"SWEEP_LIMIT": strconv.Itoa(p.SweepLimit)}
	sending := map[string]string{
		"CONTENT_KEY_ARN":          *r.contentKey.KeyArn(),
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
	queueURL := *r.dispatchQueue.QueueUrl()
	dispatching := map[string]string{
		"BUDGET_TABLE":       *r.budget.TableName(),
		"DISPATCH_QUEUE_URL": queueURL,
		"SEND_RATE_EMAIL":    rate(p.SendRateEmail),
		"SEND_RATE_SMS":      rate(p.SendRateSMS),
		"BUDGET_MAX_WAIT":    compactDuration(p.BudgetMaxWait),
		"RETRY_BACKOFF_BASE": compactDuration(p.RetryBackoffBase),
		"RETRY_BACKOFF_MAX":  compactDuration(p.RetryBackoffMax),
	}
	redriving := map[string]string{
		"DISPATCH_QUEUE_URL": queueURL,
		"REDRIVE_AFTER":      compactDuration(p.RedriveAfter),
	}
	env := map[settings.Role]map[string]*string{}
	for _, name := range settings.Functions {
		m := map[string]*string{}
		add := func(vars map[string]string) {
			for k, v := range vars {
				if v != "" { // optional settings are absent rather than empty
					m[k] = jsii.String(v)
				}
			}
		}
		add(common)
		if name == settings.Dispatch || name == settings.Reconcile {
			add(sending)
		}
		if name == settings.Reconcile || name == settings.Expire {
			add(sweeping)
		}
		switch name {
		case settings.Dispatch:
			add(dispatching)
		case settings.Reconcile:
			add(redriving)
		}
		env[name] = m
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

// rate formats a send rate for the environment: "" (left out) for 0, no configured rate.
func rate(perSecond float64) string {
	if perSecond == 0 {
		return ""
	}
	return strconv.FormatFloat(perSecond, 'f', -1, 64)
}

// readsSESSendRate reports whether dispatch reads the email budget from the SES account
// (ses:GetAccount's MaxSendRate): email goes through SES and no sendRateEmail is configured.
func (p *LedgerStackProps) readsSESSendRate() bool {
	return p.EmailTransport == settings.TransportSES && p.SendRateEmail == 0
}

// grantSend lets fn call the configured transports: SES v2 SendEmail scoped to the sending
// identity (and configuration set) and from address, and End User Messaging SendTextMessage.
func (p *LedgerStackProps) grantSend(stack awscdk.Stack, fn awslambda.Function) {
	if p.EmailTransport == settings.TransportSES {
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
		if p.readsSESSendRate() {
			// SES v2 GetAccount has no resource ARN: it is allowed on * or not at all.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("ses:GetAccount"),
				Resources: jsii.Strings("*"),
			}))
		}
	}
	if p.SMSTransport == settings.TransportSMS {
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
