// Command infra is the CDK v2 app for the reset-notification delivery-claim ledger.
//
// Stage parameters come from CDK context (cdk.json or -c key=value); see contextKeys for the list.
// Every stack is checked with cdk-nag's AwsSolutions pack: an unsuppressed error fails synth.
package main

import (
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	cfg, err := configFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err == nil {
		// The stack is environment-agnostic: account and region come from the deploying credentials.
		_, err = NewLedgerStack(app, cfg.Props.Prefix, cfg.Props)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		fmt.Fprintln(os.Stderr, "stage parameters (-c key=value, default):")
		keys := make([]string, 0, len(contextKeys))
		for k := range contextKeys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(os.Stderr, "  %-28s %s\n", k, contextKeys[k])
		}
		os.Exit(1) // the deferred jsii.Close is skipped; the jsii child process exits with us
	}
	if cfg.Nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	app.Synth(nil)
}

var stageName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,24}$`)

// appConfig is what the app reads from context.
type appConfig struct {
	Stage string
	Props *LedgerStackProps
	Nag   bool // run cdk-nag's AwsSolutions checks at synth
}

// contextKeys documents every stage parameter read from CDK context, with its default.
var contextKeys = map[string]string{
	"stage":                   "dev; names the stack resetledger-<stage> and prefixes function, alarm and dashboard names",
	"assetDir":                "../dist; holds <fn>/bootstrap",
	"arch":                    "arm64 (or x86_64 for a local emulator on an x86_64 host)",
	"deletionProtection":      "true; false also destroys tables, keys and logs with the stack",
	"pitr":                    "true; point-in-time recovery of the ledger table",
	"intentRetention":         "1h",
	"maxReceiveCount":         "5",
	"intentVisibilityTimeout": "3m (6 x the claim timeout); at least 30s; the retry delay of a failed claim",
	"claimMaxConcurrency":     "10; 2..1000, claim instances the intent queue's event source runs at once",
	"reconcileRate":           "1m",
	"expireRate":              "1m",
	"sweepTimeout":            "50s; reconcile and expire timeout, below both rates",
	"logRetentionDays":        "30",
	"policyVersion":           "policy-1",
	"leaseDuration":           "2m",
	"expiryMargin":            "30s",
	"historyRetention":        "9600h",
	"emailTransport":          "ses (or webhook)",
	"smsTransport":            "sms (or webhook)",
	"sesFromAddress":          "required with emailTransport=ses",
	"sesIdentity":             "the from address's domain",
	"sesConfigurationSet":     "none",
	"smsOriginationIdentity":  "none (an ARN scopes the SMS send permission)",
	"webhookUrl":              "required with a webhook transport",
	"webhookKeyWindow":        "24h; 0 for an endpoint that does not honor Idempotency-Key",
	"webhookTimeout":          "5s",
	"webhookLookup":           "false; true if the webhook answers GET <url>/<key>",
	"logAwsCalls":             "false; true logs every AWS call with its IAM action (the local stack's permission check)",
	"reconcileMaxAttempts":    "3",
	"sweepLimit":              "500",
	"logLevel":                "info",
	"producerArns":            "none; comma-separated principal ARNs allowed to send intents and encrypt content",
	"alarmTopicArn":           "none; SNS topic for alarm and OK actions; required unless stage=dev or requireAlarmTopic=false",
	"requireAlarmTopic":       "true except for stage dev; false lets a throw-away stage (the local emulator's) deploy alarms without a topic",
	"maxChallengeLifetime":    "15m; longest reset challenge producers issue (bounds the held/claimed age alarms)",
	"dispatchLagLimit":        "1m; dispatch stream IteratorAge alarm threshold",
	"observability":           "true; false leaves out alarms and the dashboard",
	"nag":                     "true; false skips the cdk-nag AwsSolutions checks",

	// Dispatch under provider throttling.
	"sendRateEmail":               "none; email sends per second (SEND_RATE_EMAIL); unset: SES's MaxSendRate (ses:GetAccount), no budget for a webhook",
	"sendRateSms":                 "none; SMS sends per second (SEND_RATE_SMS); unset: no budget",
	"budgetMaxWait":               "2s; longest in-process wait for a send-rate slot before the row is deferred to the dispatch queue",
	"retryBackoffBase":            "2s; first backoff after a not-sent answer (exponential, with jitter)",
	"retryBackoffMax":             "1m; longest backoff after a not-sent answer; at most 15m (SQS's longest delay)",
	"redriveAfter":                "20s; how long past due a row waits before reconcile re-drives it through the dispatch queue",
	"dispatchQueueMaxConcurrency": "5; 2..1000, dispatch instances the dispatch queue's event source runs at once",
}

// configFromContext builds a stage's configuration from context values read through get.
func configFromContext(get func(key string) any) (*appConfig, error) {
	str := func(key string) (string, bool) {
		v := get(key)
		if v == nil {
			return "", false
		}
		s := strings.TrimSpace(fmt.Sprint(v))
		return s, s != ""
	}
	var errs []string
	fail := func(key string, err error) { errs = append(errs, fmt.Sprintf("context %s: %v", key, err)) }

	stage := "dev"
	if s, ok := str("stage"); ok {
		stage = s
	}
	if !stageName.MatchString(stage) {
		return nil, fmt.Errorf("context stage %q: want lowercase letters, digits and dashes, starting with a letter", stage)
	}
	p := DefaultLedgerStackProps(stage)

	strs := map[string]*string{
		"assetDir": &p.AssetDir, "policyVersion": &p.PolicyVersion, "emailTransport": &p.EmailTransport,
		"smsTransport": &p.SMSTransport, "sesFromAddress": &p.SESFromAddress, "sesIdentity": &p.SESIdentity,
		"sesConfigurationSet": &p.SESConfigurationSet, "smsOriginationIdentity": &p.SMSOriginationIdentity,
		"webhookUrl": &p.WebhookURL, "logLevel": &p.LogLevel, "alarmTopicArn": &p.AlarmTopicArn,
	}
	for key, dst := range strs {
		if s, ok := str(key); ok {
			*dst = s
		}
	}
	durs := map[string]*time.Duration{
		"intentRetention": &p.IntentRetention, "intentVisibilityTimeout": &p.IntentVisibilityTimeout,
		"reconcileRate": &p.ReconcileRate, "expireRate": &p.ExpireRate,
		"leaseDuration": &p.LeaseDuration, "expiryMargin": &p.ExpiryMargin, "historyRetention": &p.HistoryRetention,
		"webhookKeyWindow": &p.WebhookKeyWindow, "webhookTimeout": &p.WebhookTimeout,
		"sweepTimeout": &p.SweepTimeout, "maxChallengeLifetime": &p.MaxChallengeLifetime,
		"dispatchLagLimit": &p.DispatchLagLimit, "budgetMaxWait": &p.BudgetMaxWait,
		"retryBackoffBase": &p.RetryBackoffBase, "retryBackoffMax": &p.RetryBackoffMax, "redriveAfter": &p.RedriveAfter,
	}
	for key, dst := range durs {
		if s, ok := str(key); ok {
			d, err := time.ParseDuration(s)
			if err != nil {
				fail(key, err)
				continue
			}
			*dst = d
		}
	}
	ints := map[string]*int{
		"maxReceiveCount": &p.MaxReceiveCount, "logRetentionDays": &p.LogRetentionDays,
		"reconcileMaxAttempts": &p.ReconcileMaxAttempts, "sweepLimit": &p.SweepLimit,
		"claimMaxConcurrency": &p.ClaimMaxConcurrency, "dispatchQueueMaxConcurrency": &p.DispatchQueueMaxConcurrency,
	}
	for key, dst := range ints {
		if s, ok := str(key); ok {
			n, err := strconv.Atoi(s)
			if err != nil {
				fail(key, err)
				continue
			}
			*dst = n
		}
	}
	// Rates: given means a positive number (leave the key out for no configured rate).
	rates := map[string]*float64{"sendRateEmail": &p.SendRateEmail, "sendRateSms": &p.SendRateSMS}
	for key, dst := range rates {
		if s, ok := str(key); ok {
			r, err := strconv.ParseFloat(s, 64)
			if err == nil && !(r > 0 && !math.IsInf(r, 0)) {
				err = fmt.Errorf("%q: want sends per second > 0", s)
			}
			if err != nil {
				fail(key, err)
				continue
			}
			*dst = r
		}
	}
	cfg := &appConfig{Stage: stage, Props: p, Nag: true}
	observability := true
	bools := map[string]*bool{
		"deletionProtection": &p.DeletionProtection, "pitr": &p.PointInTimeRecovery,
		"observability": &observability, "nag": &cfg.Nag, "webhookLookup": &p.WebhookLookup,
		"logAwsCalls":       &p.LogAWSCalls,
		"requireAlarmTopic": &p.RequireAlarmTopic,
	}
	for key, dst := range bools {
		if s, ok := str(key); ok {
			b, err := strconv.ParseBool(s)
			if err != nil {
				fail(key, err)
				continue
			}
			*dst = b
		}
	}
	p.SkipObservability = !observability
	if s, ok := str("arch"); ok {
		switch s {
		case "arm64":
			p.Architecture = awslambda.Architecture_ARM_64()
		case "x86_64", "amd64":
			p.Architecture = awslambda.Architecture_X86_64()
		default:
			fail("arch", fmt.Errorf("%q: want arm64 or x86_64", s))
		}
	}
	if s, ok := str("producerArns"); ok {
		for _, arn := range strings.Split(s, ",") {
			if arn = strings.TrimSpace(arn); arn != "" {
				p.ProducerPrincipalArns = append(p.ProducerPrincipalArns, arn)
			}
		}
	}
	if len(errs) > 0 {
		sort.Strings(errs)
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return cfg, nil
}
