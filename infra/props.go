package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
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
}

// DefaultLedgerStackProps returns the production defaults for a stage: every declared default.
func DefaultLedgerStackProps(stage string) *LedgerStackProps { return defaultConfig(stage).Props }

// Validate reports every invalid field at once: the functions' settings as the functions would
// check them at start, then what each part of the stack needs of its fields.
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
	for _, pr := range p.Functions.Check(settings.Functions...) {
		bad("%s", contextName(pr))
	}
	// The stack asks for a margin for the workers' clock skew even though the domain takes 0.
	if m := p.Functions.Policy.ExpiryMargin; m <= 0 {
		bad("%s %v: want > 0", varName(settings.ExpiryMargin), m)
	}
	p.validateIntake(bad)
	p.validateDispatch(bad)
	p.validateSweeps(bad)
	p.validateObservability(bad)
	return errors.Join(errs...)
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

func (p *LedgerStackProps) validateIntake(bad func(string, ...any)) {
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

func (p *LedgerStackProps) validateSweeps(bad func(string, ...any)) {
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
}

func (p *LedgerStackProps) validateObservability(bad func(string, ...any)) {
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
	if _, ok := retentionDays[p.LogRetentionDays]; !ok {
		bad("LogRetentionDays %d is not a CloudWatch Logs retention value", p.LogRetentionDays)
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

func (p *LedgerStackProps) sesIdentity() string {
	if p.SESIdentity != "" {
		return p.SESIdentity
	}
	_, domain, _ := strings.Cut(p.Functions.SESFrom, "@")
	return domain
}

// readsSESSendRate reports whether dispatch reads the email budget from the SES account
// (ses:GetAccount's MaxSendRate): email goes through SES and no sendRateEmail is configured.
func (p *LedgerStackProps) readsSESSendRate() bool {
	return p.Functions.Transports[ledger.Email] == settings.TransportSES && p.Functions.SendRates[ledger.Email] == 0
}

func (p *LedgerStackProps) removalPolicy() awscdk.RemovalPolicy {
	if p.DeletionProtection {
		return awscdk.RemovalPolicy_RETAIN
	}
	return awscdk.RemovalPolicy_DESTROY
}
