package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestResourceCounts(t *testing.T) {
	s := synth(t, nil)
	for typ, n := range map[string]float64{
		"AWS::Lambda::Function":           7,  // the five, the operator function and the digest function
		"AWS::Lambda::Url":                1,  // the operator function's, AuthType AWS_IAM
		"AWS::Lambda::ResourcePolicy":     7,  // one per function: who may invoke it (invokers.go, operator.go)
		"AWS::Lambda::Permission":         0,  // the schedules' invoke permission is in their functions' policies
		"AWS::Lambda::EventSourceMapping": 5,  // intent queue -> claim; stream and dispatch queue -> dispatch; provider events -> events; stream -> digest
		"AWS::DynamoDB::Table":            4,  // ledger, content, budget, limits
		"AWS::SQS::Queue":                 8,  // intent, dispatch, provider events, their DLQs, the stream's and the digest stream's
		"AWS::KMS::Key":                   10, // ledger, content, provider events topic and queues, attempt proofs, fingerprints, intents, backup vault, data-events trail, digests
		// the two sweeps' schedules; key, ledger, queue, topic, bucket, function, role, SES and SMS
		// configuration set, protect configuration and trail changes (audit.go)
		"AWS::Events::Rule":     float64(3 + len(securityRuleNames)), // the sweeps, the digest tick
		"AWS::S3::Bucket":       2,                                   // the digests and the data-events trail's
		"AWS::S3::BucketPolicy": 2,
		"AWS::Logs::LogGroup":   7,
		"AWS::IAM::Role":        10, // the seven functions, LedgerOperatorRole, SecurityEventsRole, AWS Backup's
		// TestAlarmsAndDashboard names each one: 39 fixed (IntentSealRefused, the five digest alarms
		// and ContradictedRecords among them), one per security rule (its Undelivered), one per
		// channel, one per open state, and the send limits' five (one per limit rule but supersession).
		"AWS::CloudWatch::Alarm":                     float64(39 + len(securityRuleNames) + len(ledger.Channels) + openStates() + len(ledger.Rules) - 1),
		"AWS::Backup::BackupVault":                   1,
		"AWS::Backup::BackupPlan":                    1,
		"AWS::Backup::BackupSelection":               1, // the ledger table
		"AWS::CloudTrail::Trail":                     1, // dataEventsTrail, required on every stage but the local one
		"AWS::SNS::Topic":                            1, // provider events; the alarm topic is the on-call team's, imported
		"AWS::SNS::Subscription":                     1, // the provider events queue
		"AWS::SES::ConfigurationSet":                 1,
		"AWS::SMSVOICE::ConfigurationSet":            1,
		"AWS::SES::ConfigurationSetEventDestination": 1,
		"AWS::CloudWatch::Dashboard":                 1,
		"Custom::LogRetention":                       0, // explicit log groups, no retention custom resource
		"AWS::Lambda::LayerVersion":                  0,
	} {
		check(t, typ, func() { s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
}

func TestLocalStageSettings(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.Architecture = awslambda.Architecture_X86_64()
		p.Functions.Transports[ledger.Email], p.Functions.Transports[ledger.SMS] = settings.TransportWebhook, settings.TransportWebhook
		p.Functions.WebhookURL = "http://127.0.0.1:9999/send"
		p.Functions.WebhookLookup = true
		p.Functions.SESFrom = ""
		p.Functions.SESConfigurationSet = "cs"
		p.DeletionProtection, p.PointInTimeRecovery = false, false
		p.ReconcileRate, p.ExpireRate = 5*time.Minute, 2*time.Minute
		p.LogRetentionDays = 7
		p.SkipObservability, p.RequireAlarmTopic, p.AlarmTopicArn = true, false, ""
		p.IntentVisibilityTimeout, p.MaxReceiveCount = 30*time.Second, 2
	})
	check(t, "fast redrive", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"VisibilityTimeout": 30,
			"RedrivePolicy":     assertions.Match_ObjectLike(&map[string]any{"maxReceiveCount": 2}),
		})
	})
	fn := s.function(t, settings.Dispatch)
	if got := fmt.Sprint(fn["Architectures"]); got != "[x86_64]" {
		t.Errorf("architectures = %s, want [x86_64]", got)
	}
	vars := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars["EMAIL_TRANSPORT"] != "webhook" || vars["SMS_TRANSPORT"] != "webhook" || vars["WEBHOOK_URL"] != "http://127.0.0.1:9999/send" ||
		vars["WEBHOOK_LOOKUP"] != "true" {
		t.Errorf("transport env = %v", vars)
	}
	if _, ok := vars["SES_FROM_ADDRESS"]; ok {
		t.Errorf("empty SES_FROM_ADDRESS should be absent, env = %v", vars)
	}
	for _, g := range s.grants(t)["Dispatch"] {
		if strings.HasPrefix(g, "ses:") || strings.HasPrefix(g, "sms-voice:") {
			t.Errorf("webhook-only stage grants %s", g)
		}
	}
	for id, tbl := range s.resources("AWS::DynamoDB::Table") {
		if tbl["DeletionPolicy"] != "Delete" || props(tbl)["DeletionProtectionEnabled"] != false {
			t.Errorf("%s: DeletionPolicy %v, protection %v; want Delete, false", id, tbl["DeletionPolicy"], props(tbl)["DeletionProtectionEnabled"])
		}
	}
	ledger := props(s.resources("AWS::DynamoDB::Table")[s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")])
	if got := fmt.Sprint(ledger["PointInTimeRecoverySpecification"]); got != "map[PointInTimeRecoveryEnabled:false]" {
		t.Errorf("ledger PITR = %s", got)
	}
	var rates []string
	for _, r := range s.resources("AWS::Events::Rule") {
		rates = append(rates, props(r)["ScheduleExpression"].(string))
	}
	sort.Strings(rates)
	// The sweeps, and the digest tick at the default DIGEST_INTERVAL (5m).
	if !slices.Equal(rates, []string{"rate(2 minutes)", "rate(5 minutes)", "rate(5 minutes)"}) {
		t.Errorf("schedules = %v", rates)
	}
	for id, lg := range s.resources("AWS::Logs::LogGroup") {
		if props(lg)["RetentionInDays"] != 7.0 {
			t.Errorf("%s retention = %v, want 7", id, props(lg)["RetentionInDays"])
		}
	}
	check(t, "no alarms", func() { s.template.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(0)) })
	check(t, "no dashboard", func() { s.template.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(0)) })
	noNagErrors(t, s)
}

// TestRemovalPolicyMatchesDeletionProtection: a resource CloudFormation may not delete is
// retained (else a stack delete or a replacement fails on it), with and without protection.
func TestRemovalPolicyMatchesDeletionProtection(t *testing.T) {
	for _, protect := range []bool{true, false} {
		s := synth(t, func(p *LedgerStackProps) { p.DeletionProtection, p.PointInTimeRecovery = protect, protect })
		want := map[bool]string{true: "Retain", false: "Delete"}[protect]
		content := s.logicalID(t, "AWS::DynamoDB::Table", "ContentTable")
		budget := s.logicalID(t, "AWS::DynamoDB::Table", "BudgetTable")
		limits := s.logicalID(t, "AWS::DynamoDB::Table", "LimitsTable")
		for id, r := range s.json["Resources"].(map[string]any) {
			res := r.(map[string]any)
			if props(res)["DeletionProtectionEnabled"] == true && (res["DeletionPolicy"] != "Retain" || res["UpdateReplacePolicy"] != "Retain") {
				t.Errorf("protect=%v: %s is deletion-protected with DeletionPolicy %v, UpdateReplacePolicy %v",
					protect, id, res["DeletionPolicy"], res["UpdateReplacePolicy"])
			}
			switch res["Type"] {
			case "AWS::DynamoDB::Table", "AWS::KMS::Key", "AWS::SQS::Queue", "AWS::Logs::LogGroup":
			default:
				continue
			}
			w := want
			// Content: secrets for minutes; budget: derived rate state; limits: counters that expire.
			// None is evidence: never retained, never protected.
			if id == content || id == budget || id == limits {
				w = "Delete"
				if props(res)["DeletionProtectionEnabled"] != false {
					t.Errorf("protect=%v: %s deletion protection = %v", protect, id, props(res)["DeletionProtectionEnabled"])
				}
			}
			if res["DeletionPolicy"] != w || res["UpdateReplacePolicy"] != w {
				t.Errorf("protect=%v: %s DeletionPolicy %v, UpdateReplacePolicy %v, want %s",
					protect, id, res["DeletionPolicy"], res["UpdateReplacePolicy"], w)
			}
		}
		ledgerTable := props(s.resources("AWS::DynamoDB::Table")[s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")])
		if ledgerTable["DeletionProtectionEnabled"] != protect {
			t.Errorf("protect=%v: ledger table deletion protection = %v", protect, ledgerTable["DeletionProtectionEnabled"])
		}
	}
}

// TestOutputs: the stack writes every output package outputs declares (a conditional one at least
// on the default stage, whose email goes through an SES configuration set) and no other, so a
// reader of the outputs file finds each name where outputs says.
func TestOutputs(t *testing.T) {
	got := synth(t, nil).json["Outputs"].(map[string]any)
	declared := map[string]bool{}
	for _, o := range outputs.All() {
		declared[o.Name] = true
		if _, ok := got[o.Name]; !ok && (!o.Conditional || o == outputs.SESConfigurationSet) {
			t.Errorf("output %s is declared but the stack does not write it", o.Name)
		}
	}
	for name := range got {
		if !declared[name] {
			t.Errorf("the stack writes output %s, which package outputs does not declare", name)
		}
	}
}

func TestNagAwsSolutions(t *testing.T) {
	noNagErrors(t, synth(t, nil))
}

// TestNagCatchesViolations shows the nag check can fail: once the stream DLQ's suppression is gone,
// AwsSolutions-SQS3 fails synthesis.
func TestNagCatchesViolations(t *testing.T) {
	ctx := cdkContext(t)
	out := t.TempDir()
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(out)})
	stack, err := NewLedgerStack(app, "Test", testProps(t))
	if err != nil {
		t.Fatal(err)
	}
	dlq := stack.Node().FindChild(jsii.String("StreamFailureDlq")).Node().DefaultChild().(awscdk.CfnResource)
	dlq.AddMetadata(jsii.String("cdk_nag"), map[string]any{"rules_to_suppress": []any{}})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("synthesis succeeded without the SQS3 suppression")
			}
		}()
		assertions.Template_FromStack(stack, nil)
	}()
	report, err := os.ReadFile(filepath.Join(out, "validation-report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(report), "AwsSolutions-SQS3"); n == 0 || strings.Contains(string(report), "AwsSolutions-IAM5") {
		t.Errorf("validation report: want only the SQS3 finding, got %s", report)
	}
}

// TestQueuesAreTLSOnly: every queue denies non-TLS access.
func TestQueuesAreTLSOnly(t *testing.T) {
	s := synth(t, nil)
	check(t, "TLS only", func() {
		s.template.ResourcePropertiesCountIs(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
			})})},
		}, jsii.Number(8))
	})
}
