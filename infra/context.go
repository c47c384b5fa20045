package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"

	"github.com/resetledger/resetledger/internal/settings"
)

// A stage's parameters come from CDK context (cdk.json or -c key=value). The functions' settings
// are declared in internal/settings (settings.Vars, each with its context key); the parameters
// only the stack reads are declared here, in stageParams. configFromContext, the defaults
// (DefaultLedgerStackProps), the usage text and the README check all follow from the two tables.

// appConfig is what the app reads from context.
type appConfig struct {
	Stage string
	Props *LedgerStackProps
	// Nag runs cdk-nag's AwsSolutions checks at synth.
	Nag bool
	// Observability keeps the alarms and the dashboard (Props.SkipObservability is its negation).
	Observability bool
	// MathAlarms keeps the metric-math alarms (Props.SkipMathAlarms is its negation).
	MathAlarms bool
	// Backup keeps the ledger table's AWS Backup plan (Props.SkipBackup is its negation).
	Backup bool
	// OperatorDenies keeps the operator function's resource policy with its Denies
	// (Props.SkipOperatorDenies is its negation).
	OperatorDenies bool
	// SubjectIndex keeps the ledger table's subject index (Props.SkipSubjectIndex is its negation).
	SubjectIndex bool
}

// toProps carries the flags whose props field is their negation (the props' zero value builds the
// whole stack) into the props.
func (c *appConfig) toProps() {
	c.Props.SkipObservability = !c.Observability
	c.Props.SkipMathAlarms = !c.MathAlarms
	c.Props.SkipBackup = !c.Backup
	c.Props.SkipOperatorDenies = !c.OperatorDenies
	c.Props.SkipSubjectIndex = !c.SubjectIndex
}

// A stageParam is one stage parameter only the stack reads: its context key, its default as the
// key spells it ("" for none), what it is, and the field its value goes to.
type stageParam struct {
	Key, Default, Doc string
	set               func(c *appConfig, text string) error
}

// param declares a stage parameter of kind k stored in the field at returns.
func param[T any](key, def, doc string, k settings.Kind[T], at func(c *appConfig) *T) stageParam {
	return stageParam{Key: key, Default: def, Doc: doc, set: func(c *appConfig, text string) error {
		v, err := k.Parse(text)
		if err == nil {
			*at(c) = v
		}
		return err
	}}
}

// inProps binds a stage parameter to a field of the stack's props.
func inProps[T any](field func(p *LedgerStackProps) *T) func(c *appConfig) *T {
	return func(c *appConfig) *T { return field(c.Props) }
}

const stageKey = "stage"

var stageName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,24}$`)

// stageParams declares every parameter only the stack reads, in the README's order.
var stageParams = []stageParam{
	param(stageKey, "dev", "names the stack resetledger-<stage> and prefixes function, alarm and dashboard names",
		settings.Text, func(c *appConfig) *string { return &c.Stage }),
	param("assetDir", "../dist", "holds <fn>/bootstrap",
		settings.Text, inProps(func(p *LedgerStackProps) *string { return &p.AssetDir })),
	param("arch", "arm64", "arm64, or x86_64 for a local emulator on an x86_64 host",
		architecture, inProps(func(p *LedgerStackProps) *awslambda.Architecture { return &p.Architecture })),
	param("deletionProtection", "true", "false also destroys tables, keys and logs with the stack",
		settings.Flag, inProps(func(p *LedgerStackProps) *bool { return &p.DeletionProtection })),
	param("pitr", "true", "point-in-time recovery of the ledger table",
		settings.Flag, inProps(func(p *LedgerStackProps) *bool { return &p.PointInTimeRecovery })),
	param("intentRetention", "1h", "the intent queue's message retention",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.IntentRetention })),
	param("maxReceiveCount", "5", "receives of an intent before it moves to the DLQ",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.MaxReceiveCount })),
	param("intentVisibilityTimeout", settings.FormatDuration(6*functionTimeouts[settings.Claim]),
		"6 x the claim timeout; at least 30s; the retry delay of a failed claim",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.IntentVisibilityTimeout })),
	param("claimMaxConcurrency", "10", "2..1000, claim instances the intent queue's event source runs at once",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.ClaimMaxConcurrency })),
	param("eventsMaxConcurrency", "5", "2..1000, events instances the provider events queue's event source runs at once",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.EventsMaxConcurrency })),
	param("dispatchQueueMaxConcurrency", "5", "2..1000, dispatch instances the dispatch queue's event source runs at once",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.DispatchQueueMaxConcurrency })),
	param("reconcileRate", "1m", "the reconcile schedule, whole minutes",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.ReconcileRate })),
	param("expireRate", "1m", "the expire schedule, whole minutes",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.ExpireRate })),
	param("sweepTimeout", "50s", "reconcile and expire timeout, below both rates",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.SweepTimeout })),
	param("logRetentionDays", "30", "every function's log retention, a CloudWatch Logs value",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.LogRetentionDays })),
	param("sesIdentity", "", "the SES identity that authorises the sender; the from address's domain if unset",
		settings.Text, inProps(func(p *LedgerStackProps) *string { return &p.SESIdentity })),
	param("producerArns", "", "comma-separated principal ARNs allowed to send intents, seal content and bind intents; required unless localStage",
		arnList, inProps(func(p *LedgerStackProps) *[]string { return &p.ProducerPrincipalArns })),
	param("localStage", "false", "true only for the stage on the local emulator (no IAM enforced): lets producerArns, operatorArns and dataEventsTrail be unset",
		settings.Flag, inProps(func(p *LedgerStackProps) *bool { return &p.LocalStage })),
	param("operatorArns", "", "comma-separated IAM role or user ARNs allowed to assume the LedgerOperator role and call the operator function; required unless localStage",
		arnList, inProps(func(p *LedgerStackProps) *[]string { return &p.OperatorPrincipalArns })),
	param("dataEventsTrail", "", "names a CloudTrail trail the stack creates to log the ledger table's write data events; required unless localStage",
		settings.Text, inProps(func(p *LedgerStackProps) *string { return &p.DataEventsTrail })),
	param("alarmTopicArn", "", "SNS topic for alarm and OK actions; required unless requireAlarmTopic is false",
		settings.Text, inProps(func(p *LedgerStackProps) *string { return &p.AlarmTopicArn })),
	param("requireAlarmTopic", "true", "false for stage dev; false lets a throw-away stage deploy alarms without a topic",
		settings.Flag, inProps(func(p *LedgerStackProps) *bool { return &p.RequireAlarmTopic })),
	param("dispatchLagLimit", "1m", "dispatch stream IteratorAge alarm threshold",
		settings.Duration, inProps(func(p *LedgerStackProps) *time.Duration { return &p.DispatchLagLimit })),
	param("smsMonthlyMessages", "30000", "SMS a month the stage expects at most; more accepted in a day than its daily pace (/30) alarms (SMS through End User Messaging)",
		settings.Count, inProps(func(p *LedgerStackProps) *int { return &p.SMSMonthlyMessages })),
	param("observability", "true", "false leaves out alarms and the dashboard",
		settings.Flag, func(c *appConfig) *bool { return &c.Observability }),
	param("mathAlarms", "true", "false leaves out the metric-math alarms (the local emulator rejects them)",
		settings.Flag, func(c *appConfig) *bool { return &c.MathAlarms }),
	param("backup", "true", "false leaves out the AWS Backup plan of the ledger table (the local emulator cannot create a backup selection)",
		settings.Flag, func(c *appConfig) *bool { return &c.Backup }),
	param("operatorDenies", "true", "false gives no function an AWS::Lambda::ResourcePolicy (the local emulator cannot create one): the operator function gets its invoke permissions as AWS::Lambda::Permission allows and the sweeps their schedules' permissions, without the Denies of every other invoker",
		settings.Flag, func(c *appConfig) *bool { return &c.OperatorDenies }),
	param("subjectIndex", "true", "false leaves out the ledger table's subject index (the first of two deploys that add the timeline indexes to an existing stack)",
		settings.Flag, func(c *appConfig) *bool { return &c.SubjectIndex }),
	param("nag", "true", "false skips the cdk-nag AwsSolutions checks",
		settings.Flag, func(c *appConfig) *bool { return &c.Nag }),
}

// architecture is the kind of the arch parameter.
var architecture = settings.Kind[awslambda.Architecture]{
	Parse: func(s string) (awslambda.Architecture, error) {
		switch s {
		case "arm64":
			return awslambda.Architecture_ARM_64(), nil
		case "x86_64", "amd64":
			return awslambda.Architecture_X86_64(), nil
		}
		return nil, errors.New("want arm64 or x86_64")
	},
	Format: func(a awslambda.Architecture) string { return *a.Name() },
}

// arnList is the kind of a comma-separated list; blank entries are dropped.
var arnList = settings.Kind[[]string]{
	Parse: func(s string) ([]string, error) {
		var out []string
		for _, arn := range strings.Split(s, ",") {
			if arn = strings.TrimSpace(arn); arn != "" {
				out = append(out, arn)
			}
		}
		return out, nil
	},
	Format: func(l []string) string { return strings.Join(l, ",") },
}

// DefaultLedgerStackProps returns the production defaults for a stage: every declared default, and
// the SMS send rate that follows from the default SMS transport (spend.go).
func DefaultLedgerStackProps(stage string) *LedgerStackProps {
	c := defaultConfig(stage)
	c.Props.defaultSMSRate()
	return c.Props
}

// defaultConfig is a stage's configuration before context: every declared default.
func defaultConfig(stage string) *appConfig {
	c := &appConfig{Stage: stage, Props: &LedgerStackProps{Prefix: "resetledger-" + stage, Functions: settings.Defaults()}}
	for _, sp := range stageParams {
		if sp.Default == "" || sp.Key == stageKey {
			continue
		}
		if err := sp.set(c, sp.Default); err != nil {
			panic(fmt.Sprintf("infra: the default of stage parameter %s does not parse: %v", sp.Key, err))
		}
	}
	// A dev stage is the one stage whose alarms may notify no one.
	c.Props.RequireAlarmTopic = c.Props.RequireAlarmTopic && stage != "dev"
	c.toProps()
	return c
}

// configFromContext builds a stage's configuration from context values read through get: the
// stage first (it sets the defaults), then every other stage parameter and every function
// setting with a context key. It reports every bad value at once.
func configFromContext(get func(key string) any) (*appConfig, error) {
	str := func(key string) (string, bool) {
		v := get(key)
		if v == nil {
			return "", false
		}
		s := strings.TrimSpace(fmt.Sprint(v))
		return s, s != ""
	}
	stage := "dev"
	if s, ok := str(stageKey); ok {
		stage = s
	}
	if !stageName.MatchString(stage) {
		return nil, fmt.Errorf("context stage %q: want lowercase letters, digits and dashes, starting with a letter", stage)
	}
	c := defaultConfig(stage)
	var errs []string
	read := func(key string, set func(text string) error) {
		if text, ok := str(key); ok {
			if err := set(text); err != nil {
				errs = append(errs, fmt.Sprintf("context %s: %v", key, err))
			}
		}
	}
	for _, sp := range stageParams {
		if sp.Key != stageKey {
			read(sp.Key, func(text string) error { return sp.set(c, text) })
		}
	}
	for _, v := range settings.Vars {
		if v.Context != "" {
			read(v.Context, func(text string) error { return v.Set(&c.Props.Functions, text) })
		}
	}
	c.Props.defaultSMSRate() // after context, so the default follows the SMS transport context chose
	c.toProps()
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return c, nil
}

// printContextKeys lists every context key with its default and what it is.
func printContextKeys(w io.Writer) {
	lines := map[string]string{}
	for _, sp := range stageParams {
		lines[sp.Key] = describe(sp.Default, sp.Doc)
	}
	for _, v := range settings.Vars {
		if v.Context != "" {
			lines[v.Context] = describe(v.Default, v.Doc+" ("+v.Env+")")
		}
	}
	keys := make([]string, 0, len(lines))
	for k := range lines {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "stage parameters (-c key=value, default):")
	for _, k := range keys {
		fmt.Fprintf(w, "  %-28s %s\n", k, lines[k])
	}
}

func describe(def, doc string) string {
	if def == "" {
		def = "none"
	}
	return def + "; " + doc
}
