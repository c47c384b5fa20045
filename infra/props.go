package main

import (
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// LedgerStackProps configures one stage of the ledger. Start from DefaultLedgerStackProps and
// override; NewLedgerStack validates every field and applies no hidden defaults. The context key
// and default of each field are declared once: in stageParams (context.go) for the stack's own
// fields, in internal/settings for the functions' settings.
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
	// EventsMaxConcurrency caps the events function instances the provider events queue's event
	// source runs at once (2..1000), so a burst of provider events (a bulk send's deliveries)
	// cannot take the account's concurrency; events beyond it wait in the queue.
	EventsMaxConcurrency int
	// DispatchQueueMaxConcurrency caps the dispatch instances the dispatch queue's event source
	// runs at once (2..1000), so a wave of wake-ups cannot take the account's concurrency.
	DispatchQueueMaxConcurrency int
	// ReconcileRate and ExpireRate are the EventBridge schedule rates (whole minutes).
	ReconcileRate time.Duration
	ExpireRate    time.Duration
	// SweepTimeout is the reconcile and expire functions' timeout, below both rates so a sweep
	// ends before the next is scheduled. Each sweep function also has a reserved concurrency of
	// 1, so two sweeps of one kind never overlap even when a schedule tick arrives late.
	SweepTimeout time.Duration
	// LogRetentionDays for every function's log group; must be a CloudWatch Logs value.
	LogRetentionDays int

	// Functions is the functions' configuration; the stack sets each function's environment from
	// it (settings.Settings.Environ). Its table, key and queue fields are the stack's own
	// resources and are filled in by the stack.
	Functions settings.Settings
	// SESIdentity is the SES identity that authorises the sender; the from address's domain if empty.
	SESIdentity string

	// ProducerPrincipalArns may send intents, seal content and bind intents (the account
	// service's roles). Required unless LocalStage: without it nothing limits who may publish an
	// intent, which the stack sends from the verified reset sender.
	ProducerPrincipalArns []string
	// LocalStage marks the stage deployed to the local emulator (localstack/deploy-local.sh),
	// which enforces no IAM: the one stage that may leave ProducerPrincipalArns,
	// OperatorPrincipalArns and DataEventsTrail unset.
	LocalStage bool
	// OperatorPrincipalArns may assume the LedgerOperator role (operator.go). Required unless
	// LocalStage: empty, any IAM principal of the account whose own policy allows sts:AssumeRole
	// on it may.
	OperatorPrincipalArns []string
	// DataEventsTrail names a CloudTrail trail the stack creates to log the ledger table's write
	// data events (audit.go). Required unless LocalStage.
	DataEventsTrail string
	// AlarmTopicArn is the SNS topic that receives alarm and OK notifications (the on-call
	// team's topic; the stack does not own it).
	AlarmTopicArn string
	// RequireAlarmTopic makes Validate refuse a stage without AlarmTopicArn, or one that skips
	// observability: alarms that notify no one are silent failures. On for every stage but dev.
	RequireAlarmTopic bool
	// DispatchLagLimit is how far dispatch may fall behind the ledger stream (IteratorAge) before
	// it alarms; below the stream's one-hour record age limit, and well below a challenge's life.
	DispatchLagLimit time.Duration
	// SMSMonthlyMessages is how many SMS a month the stage expects at most; with SMS through End
	// User Messaging, more accepted in a day than its daily pace (/30) alarms (spend.go).
	SMSMonthlyMessages int
	// SkipMathAlarms leaves out the alarms on metric math (the bounce and complaint rates of the
	// system's own sends): the local emulator's CloudFormation rejects them.
	SkipMathAlarms bool
	// SkipBackup leaves out the AWS Backup plan, vault and vault key of the ledger table (backup.go):
	// the local emulator's CloudFormation cannot create AWS::Backup::BackupSelection.
	SkipBackup bool
	// SkipOperatorDenies gives no function an AWS::Lambda::ResourcePolicy, and so none of their
	// Denies of other invokers (invokers.go, operator.go): the operator function gets its invoke
	// permissions as AWS::Lambda::Permission allows, the sweeps their schedules' permissions. The
	// local emulator's CloudFormation cannot create AWS::Lambda::ResourcePolicy.
	SkipOperatorDenies bool
	// SkipSubjectIndex leaves out the ledger table's subject index (storage.go). A table takes one
	// new global secondary index per update, so a stack deployed before the timeline indexes gets
	// them in two deploys: first without the subject index, then with it.
	SkipSubjectIndex bool
	// SkipObservability leaves out the alarms and the dashboard (for emulators lacking them).
	SkipObservability bool
}

// varName names a function setting for a stack user: its context key and its variable.
func varName(v *settings.Var) string {
	if v.Context == "" {
		return v.Env
	}
	return v.Context + " (" + v.Env + ")"
}

// contextName words a settings problem with the setting's context key.
func contextName(pr settings.Problem) string {
	if pr.Var == nil {
		return pr.Error()
	}
	return varName(pr.Var) + ": " + pr.Why
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

func (p *LedgerStackProps) removalPolicy() awscdk.RemovalPolicy {
	if p.DeletionProtection {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}

// seconds is d as a CDK duration.
func seconds(d time.Duration) awscdk.Duration {
	return awscdk.Duration_Seconds(jsii.Number(d.Seconds()))
}

// title capitalizes a name for construct ids: "claim" -> "Claim".
func title[S ~string](name S) string { return strings.ToUpper(string(name[:1])) + string(name[1:]) }
