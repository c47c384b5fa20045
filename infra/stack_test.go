package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/iampolicy"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// stubAssets writes <dir>/<fn>/bootstrap for every function, so tests need no prior build.
func stubAssets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range settings.Functions {
		if err := os.MkdirAll(filepath.Join(dir, string(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		stub := []byte("#!/bin/sh\necho stub " + string(name) + "\n") // distinct content, distinct assets
		if err := os.WriteFile(filepath.Join(dir, string(name), "bootstrap"), stub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testProps is a valid production-like stage with stub assets.
func testProps(t *testing.T) *LedgerStackProps {
	p := DefaultLedgerStackProps("test")
	p.AssetDir = stubAssets(t)
	p.Functions.SESFrom = "no-reply@mail.example.com"
	p.AlarmTopicArn = testTopic
	return p
}

const testTopic = "arn:aws:sns:us-east-1:111122223333:oncall"

// cdkContext returns the feature flags from cdk.json, so tests synthesize what `cdk synth` does.
func cdkContext(t *testing.T) map[string]interface{} {
	t.Helper()
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		App     string                 `json:"app"`
		Context map[string]interface{} `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	return cfg.Context
}

type synthesized struct {
	stack    awscdk.Stack
	template assertions.Template
	json     map[string]any
}

// synth builds the stack from props (after mutate) with cdk-nag's AwsSolutions pack applied.
func synth(t *testing.T, mutate func(*LedgerStackProps)) *synthesized {
	t.Helper()
	props := testProps(t)
	if mutate != nil {
		mutate(props)
	}
	ctx := cdkContext(t)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
	stack, err := NewLedgerStack(app, "Test", props)
	if err != nil {
		t.Fatalf("NewLedgerStack: %v", err)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	tpl := assertions.Template_FromStack(stack, nil)
	raw, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return &synthesized{stack: stack, template: tpl, json: doc}
}

// check runs a jsii assertion, turning its panic into a test error.
func check(t *testing.T, what string, assert func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assert()
}

// resources returns the template's resources of one type, keyed by logical id.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == typ {
			out[id] = res
		}
	}
	return out
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// logicalID finds the one resource of typ whose logical id starts with prefix.
func (s *synthesized) logicalID(t *testing.T, typ, prefix string) string {
	t.Helper()
	var ids []string
	for id := range s.resources(typ) {
		if strings.HasPrefix(id, prefix) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with logical id %s*, got %v", typ, prefix, ids)
	}
	return ids[0]
}

// constructID finds the one resource of typ whose construct name (logical id without CDK's hash) is
// name: DispatchQueue, not DispatchQueueDlq. The IAM check binds recorded names to these.
func (s *synthesized) constructID(t *testing.T, typ, name string) string {
	t.Helper()
	var ids []string
	for id := range s.resources(typ) {
		if iampolicy.ConstructName(id) == name {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with construct name %s, got %v", typ, name, ids)
	}
	return ids[0]
}

func (s *synthesized) function(t *testing.T, name settings.Role) map[string]any {
	t.Helper()
	for _, r := range s.resources("AWS::Lambda::Function") {
		if props(r)["FunctionName"] == "resetledger-test-"+string(name) {
			return props(r)
		}
	}
	t.Fatalf("no function named resetledger-test-%s", name)
	return nil
}

var logicalSuffix = regexp.MustCompile(`[0-9A-F]{8}$`)

// label renders an ARN expression readably: {"Fn::GetAtt":["LedgerTableAB12CD34","Arn"]} -> LedgerTable.
func label(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if ga, ok := x["Fn::GetAtt"].([]any); ok {
			id := logicalSuffix.ReplaceAllString(ga[0].(string), "")
			if ga[1] == "Arn" {
				return id
			}
			return id + "." + ga[1].(string)
		}
		if ref, ok := x["Ref"].(string); ok {
			return logicalSuffix.ReplaceAllString(ref, "")
		}
		if j, ok := x["Fn::Join"].([]any); ok {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, label(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// grants returns the "action on resource" pairs each role's inline policies allow.
func (s *synthesized) grants(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, pol := range s.resources("AWS::IAM::Policy") {
		pp := props(pol)
		for _, role := range list(pp["Roles"]) {
			name := strings.TrimSuffix(label(role), "Role")
			for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
				stmt := st.(map[string]any)
				if stmt["Effect"] != "Allow" {
					t.Errorf("role %s: unexpected %v statement", name, stmt["Effect"])
				}
				for _, a := range list(stmt["Action"]) {
					for _, r := range list(stmt["Resource"]) {
						out[name] = append(out[name], fmt.Sprintf("%s on %s", a, label(r)))
					}
				}
			}
		}
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out
}

// openStates counts the domain's open states: one alarm each.
func openStates() int {
	n := 0
	for _, s := range ledger.States {
		if s.Open() {
			n++
		}
	}
	return n
}

func TestResourceCounts(t *testing.T) {
	s := synth(t, nil)
	for typ, n := range map[string]float64{
		"AWS::Lambda::Function":           4,
		"AWS::Lambda::EventSourceMapping": 3, // intent queue -> claim; stream and dispatch queue -> dispatch
		"AWS::DynamoDB::Table":            3, // ledger, content, budget
		"AWS::SQS::Queue":                 5, // intent, dispatch, and the DLQs of both and of the stream
		"AWS::KMS::Key":                   2,
		"AWS::Events::Rule":               2,
		"AWS::Logs::LogGroup":             4,
		"AWS::IAM::Role":                  4,
		// TestAlarmsAndDashboard names each one: 20 fixed, one per channel, one per open state.
		"AWS::CloudWatch::Alarm":     float64(20 + len(ledger.Channels) + openStates()),
		"AWS::SNS::Topic":            0, // the alarm topic is the on-call team's, imported
		"AWS::CloudWatch::Dashboard": 1,
		"Custom::LogRetention":       0, // explicit log groups, no retention custom resource
		"AWS::Lambda::LayerVersion":  0,
	} {
		check(t, typ, func() { s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
}

func TestFunctions(t *testing.T) {
	s := synth(t, nil)
	common := []string{"LEDGER_TABLE", "CONTENT_TABLE", "POLICY_VERSION", "LEASE_DURATION", "EXPIRY_MARGIN",
		"HISTORY_RETENTION", "LOG_LEVEL"}
	sending := append(slices.Clone(common), "CONTENT_KEY_ARN", "EMAIL_TRANSPORT", "SMS_TRANSPORT", "SES_FROM_ADDRESS",
		"WEBHOOK_KEY_WINDOW", "WEBHOOK_TIMEOUT", "RECONCILE_MAX_ATTEMPTS")
	for _, tc := range []struct {
		name    settings.Role
		timeout float64
		env     []string
	}{
		{settings.Claim, 30, common},
		// No SEND_RATE_*: unset means SES's own rate for email and no budget for SMS.
		{settings.Dispatch, 60, append(slices.Clone(sending), "BUDGET_TABLE", "DISPATCH_QUEUE_URL", "BUDGET_MAX_WAIT",
			"RETRY_BACKOFF_BASE", "RETRY_BACKOFF_MAX")},
		{settings.Reconcile, 50, append(slices.Clone(sending), "SWEEP_LIMIT", "DISPATCH_QUEUE_URL", "REDRIVE_AFTER")},
		{settings.Expire, 50, append(slices.Clone(common), "SWEEP_LIMIT")},
	} {
		t.Run(string(tc.name), func(t *testing.T) {
			fn := s.function(t, tc.name)
			if fn["Runtime"] != "provided.al2023" || fn["Handler"] != "bootstrap" {
				t.Errorf("runtime/handler = %v/%v, want provided.al2023/bootstrap", fn["Runtime"], fn["Handler"])
			}
			if got := fmt.Sprint(fn["Architectures"]); got != "[arm64]" {
				t.Errorf("architectures = %s, want [arm64]", got)
			}
			if fn["MemorySize"] != 256.0 || fn["Timeout"] != tc.timeout {
				t.Errorf("memory/timeout = %v/%v, want 256/%v", fn["MemorySize"], fn["Timeout"], tc.timeout)
			}
			if got := label(fn["LoggingConfig"].(map[string]any)["LogGroup"]); got != title(tc.name)+"Logs" {
				t.Errorf("log group = %s", got)
			}
			vars := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
			var keys []string
			for k := range vars {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			want := slices.Sorted(slices.Values(tc.env))
			if !slices.Equal(keys, want) {
				t.Errorf("env keys = %v, want %v", keys, want)
			}
			if label(vars["LEDGER_TABLE"]) != "LedgerTable" || label(vars["CONTENT_TABLE"]) != "ContentTable" {
				t.Errorf("tables = %v / %v", vars["LEDGER_TABLE"], vars["CONTENT_TABLE"])
			}
			if k, ok := vars["CONTENT_KEY_ARN"]; ok && label(k) != "ContentKey" {
				t.Errorf("CONTENT_KEY_ARN = %v, want the content key", k)
			}
			if l, ok := vars["SWEEP_LIMIT"]; ok && l != "500" {
				t.Errorf("SWEEP_LIMIT = %v", l)
			}
			if v, ok := vars["BUDGET_TABLE"]; ok && label(v) != "BudgetTable" {
				t.Errorf("BUDGET_TABLE = %v, want the budget table", v)
			}
			if v, ok := vars["DISPATCH_QUEUE_URL"]; ok && label(v) != "DispatchQueue" {
				t.Errorf("DISPATCH_QUEUE_URL = %v, want the dispatch queue's URL", v)
			}
			for k, v := range map[string]string{"BUDGET_MAX_WAIT": "2s", "RETRY_BACKOFF_BASE": "2s", "RETRY_BACKOFF_MAX": "1m",
				"REDRIVE_AFTER": "20s"} {
				if got, ok := vars[k]; ok && got != v {
					t.Errorf("%s = %v, want %s", k, got, v)
				}
			}
			for k, v := range map[string]string{"LEASE_DURATION": "2m", "EXPIRY_MARGIN": "30s", "HISTORY_RETENTION": "9600h", "LOG_LEVEL": "info"} {
				if vars[k] != v {
					t.Errorf("%s = %v, want %s", k, vars[k], v)
				}
			}
			if slices.Contains(tc.env, "WEBHOOK_TIMEOUT") {
				for k, v := range map[string]string{"EMAIL_TRANSPORT": "ses", "SMS_TRANSPORT": "sms", "SES_FROM_ADDRESS": "no-reply@mail.example.com",
					"WEBHOOK_KEY_WINDOW": "24h", "WEBHOOK_TIMEOUT": "5s", "RECONCILE_MAX_ATTEMPTS": "3"} {
					if vars[k] != v {
						t.Errorf("%s = %v, want %s", k, vars[k], v)
					}
				}
			}
		})
	}
	for id, lg := range s.resources("AWS::Logs::LogGroup") {
		if props(lg)["RetentionInDays"] != 30.0 {
			t.Errorf("%s retention = %v, want 30", id, props(lg)["RetentionInDays"])
		}
	}
	for id, role := range s.resources("AWS::IAM::Role") {
		if _, ok := props(role)["ManagedPolicyArns"]; ok {
			t.Errorf("%s has managed policies: %v", id, props(role)["ManagedPolicyArns"])
		}
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
	if !slices.Equal(rates, []string{"rate(2 minutes)", "rate(5 minutes)"}) {
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

func TestTables(t *testing.T) {
	s := synth(t, nil)
	keyRef := map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::KMS::Key", "LedgerKey"), "Arn"}}
	check(t, "ledger table", func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy": "Retain",
			"Properties": map[string]any{
				"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
				"BillingMode":                      "PAY_PER_REQUEST",
				"StreamSpecification":              map[string]any{"StreamViewType": "NEW_AND_OLD_IMAGES"},
				"TimeToLiveSpecification":          map[string]any{"AttributeName": "ttl", "Enabled": true},
				"DeletionProtectionEnabled":        true,
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
				"GlobalSecondaryIndexes": []any{map[string]any{
					"IndexName": "open",
					"KeySchema": []any{
						map[string]any{"AttributeName": "open_pk", "KeyType": "HASH"},
						map[string]any{"AttributeName": "open_due", "KeyType": "RANGE"},
					},
					"Projection": map[string]any{"ProjectionType": "KEYS_ONLY"},
				}},
			},
		})
	})
	check(t, "content table", func() {
		s.template.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "ttl", "Enabled": true},
			"StreamSpecification":              assertions.Match_Absent(),
			"GlobalSecondaryIndexes":           assertions.Match_Absent(),
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": false},
			"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
		})
	})
	check(t, "budget table", func() {
		s.template.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy": "Delete",
			"Properties": map[string]any{
				"KeySchema":                        []any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}},
				"BillingMode":                      "PAY_PER_REQUEST",
				"StreamSpecification":              assertions.Match_Absent(),
				"TimeToLiveSpecification":          assertions.Match_Absent(),
				"GlobalSecondaryIndexes":           assertions.Match_Absent(),
				"DeletionProtectionEnabled":        false,
				"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": false},
				"SSESpecification":                 map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": keyRef},
			},
		})
	})
	check(t, "attribute types", func() {
		s.template.AllResourcesProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"AttributeDefinitions": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{"AttributeName": "pk", "AttributeType": "S"})}),
		})
	})
	check(t, "keys rotate", func() {
		s.template.AllResourcesProperties(jsii.String("AWS::KMS::Key"), map[string]any{"EnableKeyRotation": true})
	})
}

func TestQueues(t *testing.T) {
	s := synth(t, nil)
	dlq := s.logicalID(t, "AWS::SQS::Queue", "IntentDlq")
	check(t, "intent queue", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"MessageRetentionPeriod": 3600,
			"VisibilityTimeout":      180, // 6 x claim's 30 s
			"SqsManagedSseEnabled":   true,
			"RedrivePolicy": map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}},
				"maxReceiveCount":     5,
			},
		})
	})
	dispatchDLQ := s.constructID(t, "AWS::SQS::Queue", "DispatchQueueDlq")
	check(t, "dispatch queue", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"MessageRetentionPeriod": 3600,
			"VisibilityTimeout":      360, // 6 x dispatch's 60 s
			"SqsManagedSseEnabled":   true,
			"DelaySeconds":           assertions.Match_Absent(), // wake-ups carry their own delay
			"RedrivePolicy": map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{dispatchDLQ, "Arn"}},
				"maxReceiveCount":     5,
			},
		})
	})
	// A message outlives its longest delay and every receive before the DLQ: it is dead-lettered,
	// never dropped by retention.
	if maxWakeDelay+dispatchQueueMaxReceiveCount*dispatchQueueVisibility >= dispatchQueueRetention {
		t.Errorf("dispatch queue retention %v does not outlast a %v delay plus %d receives of %v",
			dispatchQueueRetention, maxWakeDelay, dispatchQueueMaxReceiveCount, dispatchQueueVisibility)
	}
	for _, id := range []string{dlq, s.logicalID(t, "AWS::SQS::Queue", "StreamFailureDlq"), dispatchDLQ} {
		q := props(s.resources("AWS::SQS::Queue")[id])
		if q["MessageRetentionPeriod"] != 1209600.0 || q["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: retention %v, SSE %v; want 14 days, SQS-managed SSE", id, q["MessageRetentionPeriod"], q["SqsManagedSseEnabled"])
		}
	}
	// Every queue denies non-TLS access.
	check(t, "TLS only", func() {
		s.template.ResourcePropertiesCountIs(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Effect": "Deny", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
			})})},
		}, jsii.Number(5))
	})
}

func TestEventSources(t *testing.T) {
	s := synth(t, nil)
	claimFn := s.logicalID(t, "AWS::Lambda::Function", "ClaimFunction")
	dispatchFn := s.logicalID(t, "AWS::Lambda::Function", "DispatchFunction")
	check(t, "claim SQS mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":          map[string]any{"Ref": claimFn},
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "IntentQueue"), "Arn"}},
			"BatchSize":             10,
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			"ScalingConfig":         map[string]any{"MaximumConcurrency": 10},
		})
	})
	check(t, "dispatch queue mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":          map[string]any{"Ref": dispatchFn},
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{s.constructID(t, "AWS::SQS::Queue", "DispatchQueue"), "Arn"}},
			"BatchSize":             10,
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			"ScalingConfig":         map[string]any{"MaximumConcurrency": 5},
		})
	})
	var inserted, fromHeld any
	for pattern, dst := range map[string]*any{
		`{"eventName":["INSERT"],"dynamodb":{"NewImage":{"state":{"S":["claimed"]}}}}`:                                     &inserted,
		`{"eventName":["MODIFY"],"dynamodb":{"NewImage":{"state":{"S":["claimed"]}},"OldImage":{"state":{"S":["held"]}}}}`: &fromHeld,
	} {
		if err := json.Unmarshal([]byte(pattern), dst); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "dispatch stream mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":               map[string]any{"Ref": dispatchFn},
			"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable"), "StreamArn"}},
			"StartingPosition":           "TRIM_HORIZON",
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       3,
			"MaximumRecordAgeInSeconds":  3600,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"FilterCriteria": map[string]any{"Filters": []any{
				map[string]any{"Pattern": assertions.Match_SerializedJson(inserted)},
				map[string]any{"Pattern": assertions.Match_SerializedJson(fromHeld)},
			}},
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{
				"Destination": map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "StreamFailureDlq"), "Arn"}},
			}},
		})
	})
	for _, name := range []string{"Reconcile", "Expire"} {
		fn := s.logicalID(t, "AWS::Lambda::Function", name+"Function")
		check(t, name+" schedule", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"ScheduleExpression": "rate(1 minute)",
				"State":              "ENABLED",
				"Targets": []any{map[string]any{
					"Arn":         map[string]any{"Fn::GetAtt": []any{fn, "Arn"}},
					"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0},
				}},
			})
		})
		check(t, name+" no async retry", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
				"FunctionName": map[string]any{"Ref": fn}, "MaximumRetryAttempts": 0,
			})
		})
	}
}

// TestSweepsCannotOverlap: a sweep times out before its next tick, one runs at a time, and a
// tick throttled by a running sweep is dropped when the next one is due.
func TestSweepsCannotOverlap(t *testing.T) {
	for _, rates := range [][2]time.Duration{{time.Minute, time.Minute}, {5 * time.Minute, 2 * time.Minute}} {
		s := synth(t, func(p *LedgerStackProps) { p.ReconcileRate, p.ExpireRate = rates[0], rates[1] })
		for i, name := range []settings.Role{settings.Reconcile, settings.Expire} {
			fn := s.function(t, name)
			if fn["Timeout"] != 50.0 || fn["Timeout"].(float64) >= rates[i].Seconds() {
				t.Errorf("%s timeout %v, want 50 (below the %v rate)", name, fn["Timeout"], rates[i])
			}
			if fn["ReservedConcurrentExecutions"] != 1.0 {
				t.Errorf("%s reserved concurrency = %v, want 1", name, fn["ReservedConcurrentExecutions"])
			}
			id := s.logicalID(t, "AWS::Lambda::Function", title(name)+"Function")
			check(t, string(name)+" event age", func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
					"FunctionName": map[string]any{"Ref": id}, "MaximumRetryAttempts": 0,
					"MaximumEventAgeInSeconds": rates[i].Seconds(),
				})
			})
		}
		for _, name := range []settings.Role{settings.Claim, settings.Dispatch} {
			if v, ok := s.function(t, name)["ReservedConcurrentExecutions"]; ok {
				t.Errorf("%s reserves concurrency %v", name, v)
			}
		}
	}
}

// TestRemovalPolicyMatchesDeletionProtection: a resource CloudFormation may not delete is
// retained (else a stack delete or a replacement fails on it), with and without protection.
func TestRemovalPolicyMatchesDeletionProtection(t *testing.T) {
	for _, protect := range []bool{true, false} {
		s := synth(t, func(p *LedgerStackProps) { p.DeletionProtection, p.PointInTimeRecovery = protect, protect })
		want := map[bool]string{true: "Retain", false: "Delete"}[protect]
		content := s.logicalID(t, "AWS::DynamoDB::Table", "ContentTable")
		budget := s.logicalID(t, "AWS::DynamoDB::Table", "BudgetTable")
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
			// Content: secrets for minutes; budget: derived rate state. Neither is evidence: never
			// retained, never protected.
			if id == content || id == budget {
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

// TestLeastPrivilege pins every permission each role gets: a new or widened grant fails here.
func TestLeastPrivilege(t *testing.T) {
	tableKey := []string{"kms:Decrypt on LedgerKey", "kms:DescribeKey on LedgerKey", "kms:Encrypt on LedgerKey", "kms:GenerateDataKey on LedgerKey"}
	logs := func(fn string) []string {
		return []string{"logs:CreateLogStream on " + fn + "Logs", "logs:PutLogEvents on " + fn + "Logs"}
	}
	send := []string{
		"kms:Decrypt on ContentKey",
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:identity/mail.example.com",
		"sms-voice:SendTextMessage on arn:AWS::Partition:sms-voice:AWS::Region:AWS::AccountId:*",
		"ses:GetAccount on *", // no sendRateEmail: the email budget is the SES account's MaxSendRate
	}
	want := map[string][]string{
		"Claim": join(tableKey, logs("Claim"),
			[]string{"dynamodb:GetItem on LedgerTable", "dynamodb:PutItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:PutItem on ContentTable",
				"sqs:DeleteMessage on IntentQueue", "sqs:GetQueueAttributes on IntentQueue", "sqs:ReceiveMessage on IntentQueue"}),
		"Dispatch": join(tableKey, logs("Dispatch"), send,
			[]string{"dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:GetItem on ContentTable", "dynamodb:DeleteItem on ContentTable",
				"dynamodb:DescribeStream on LedgerTable.StreamArn", "dynamodb:GetRecords on LedgerTable.StreamArn",
				"dynamodb:GetShardIterator on LedgerTable.StreamArn", "dynamodb:ListStreams on *",
				"kms:Decrypt on LedgerKey", "kms:DescribeKey on LedgerKey", // the stream binding's key grant
				"sqs:SendMessage on StreamFailureDlq",
				"dynamodb:GetItem on BudgetTable", "dynamodb:UpdateItem on BudgetTable",
				"sqs:DeleteMessage on DispatchQueue", "sqs:GetQueueAttributes on DispatchQueue", "sqs:ReceiveMessage on DispatchQueue",
				"sqs:SendMessage on DispatchQueue"}),
		"Reconcile": join(tableKey, logs("Reconcile"),
			[]string{"kms:Decrypt on ContentKey", "dynamodb:BatchGetItem on LedgerTable",
				"dynamodb:Query on LedgerTable/index/open", "dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable",
				"dynamodb:GetItem on ContentTable", "dynamodb:DeleteItem on ContentTable", "sqs:SendMessage on DispatchQueue"}),
		"Expire": join(tableKey, logs("Expire"),
			[]string{"dynamodb:Query on LedgerTable/index/open", "dynamodb:BatchGetItem on LedgerTable",
				"dynamodb:GetItem on LedgerTable", "dynamodb:UpdateItem on LedgerTable", "dynamodb:DeleteItem on ContentTable"}),
	}
	got := synth(t, nil).grants(t)
	for role, w := range want {
		sort.Strings(w)
		if !slices.Equal(got[role], w) {
			t.Errorf("%s grants:\n got  %q\n want %q", role, got[role], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("roles with policies = %d, want %d", len(got), len(want))
	}
}

func join(parts ...[]string) []string { return slices.Concat(parts...) }

func TestSendPermissionConditions(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.Functions.SESConfigurationSet = "reset"
		p.Functions.SMSOrigination = "arn:aws:sms-voice:us-east-1:111122223333:pool/pool-abc"
	})
	check(t, "ses scoped to the from address", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action":    "ses:SendEmail",
				"Condition": map[string]any{"StringEquals": map[string]any{"ses:FromAddress": "no-reply@mail.example.com"}},
			})})},
		})
	})
	grants := s.grants(t)
	for _, want := range []string{
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:identity/mail.example.com",
		"ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:configuration-set/reset",
	} {
		if !slices.Contains(grants["Dispatch"], want) {
			t.Errorf("Dispatch lacks %s: %q", want, grants["Dispatch"])
		}
	}
	// Reconcile retries only through transports that honor an idempotency key
	// (the webhook): it must not be able to send through SES or SMS.
	for _, g := range grants["Reconcile"] {
		if strings.HasPrefix(g, "ses:") || strings.HasPrefix(g, "sms-voice:") {
			t.Errorf("Reconcile may send: %s", g)
		}
	}
	check(t, "sms scoped to the origination identity", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action": "sms-voice:SendTextMessage", "Resource": "arn:aws:sms-voice:us-east-1:111122223333:pool/pool-abc",
			})})},
		})
	})
	check(t, "table key use only through DynamoDB", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action":    assertions.Match_ArrayWith(&[]any{"kms:Encrypt"}),
				"Condition": map[string]any{"StringEquals": map[string]any{"kms:ViaService": assertions.Match_AnyValue()}},
			})})},
		})
	})
	noNagErrors(t, s)
}

// TestSendRates: a configured rate reaches dispatch's environment; ses:GetAccount is granted only
// when dispatch must read the email rate from the SES account (SES email, no sendRateEmail).
func TestSendRates(t *testing.T) {
	for _, tc := range []struct {
		name           string
		mutate         func(*LedgerStackProps)
		email, sms     any // nil: the variable is absent
		readsSESRate   bool
		nagSuppression bool
	}{
		{"defaults", nil, nil, nil, true, true},
		{"both configured", func(p *LedgerStackProps) {
			p.Functions.SendRates[ledger.Email], p.Functions.SendRates[ledger.SMS] = 12.5, 1
		}, "12.5", "1", false, false},
		{"webhook email", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.Email], p.Functions.WebhookURL, p.Functions.SESFrom = settings.TransportWebhook, "https://gw.example.com/send", ""
		}, nil, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			vars := s.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars["SEND_RATE_EMAIL"] != tc.email || vars["SEND_RATE_SMS"] != tc.sms {
				t.Errorf("SEND_RATE_EMAIL, SEND_RATE_SMS = %v, %v; want %v, %v", vars["SEND_RATE_EMAIL"], vars["SEND_RATE_SMS"], tc.email, tc.sms)
			}
			for _, name := range []settings.Role{settings.Claim, settings.Reconcile, settings.Expire} {
				for k := range s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any) {
					if strings.HasPrefix(k, "SEND_RATE_") || strings.HasPrefix(k, "BUDGET_") || strings.HasPrefix(k, "RETRY_BACKOFF_") {
						t.Errorf("%s gets dispatch's %s", name, k)
					}
				}
			}
			grants := s.grants(t)
			if got := slices.Contains(grants["Dispatch"], "ses:GetAccount on *"); got != tc.readsSESRate {
				t.Errorf("dispatch ses:GetAccount = %v, want %v", got, tc.readsSESRate)
			}
			for role, g := range grants {
				if role != "Dispatch" && slices.ContainsFunc(g, func(g string) bool { return strings.HasPrefix(g, "ses:GetAccount") }) {
					t.Errorf("%s may call ses:GetAccount", role)
				}
			}
			role := s.resources("AWS::IAM::Role")[s.logicalID(t, "AWS::IAM::Role", "DispatchRole")]
			if got := strings.Contains(mustJSON(role["Metadata"]), "ses:GetAccount"); got != tc.nagSuppression {
				t.Errorf("dispatch role's IAM5 reason names ses:GetAccount: %v, want %v", got, tc.nagSuppression)
			}
			noNagErrors(t, s)
		})
	}
}

func TestContentKeyDecryptIsExclusive(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.ProducerPrincipalArns = []string{"arn:aws:iam::111122223333:role/account-service"}
	})
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "ContentKey")])
	var deny map[string]any
	var producer []string
	for _, st := range list(key["KeyPolicy"].(map[string]any)["Statement"]) {
		stmt := st.(map[string]any)
		if stmt["Effect"] == "Deny" {
			deny = stmt
		}
		if fmt.Sprint(stmt["Principal"]) == "map[AWS:arn:aws:iam::111122223333:role/account-service]" {
			for _, a := range list(stmt["Action"]) {
				producer = append(producer, a.(string))
			}
		}
	}
	if deny == nil || deny["Action"] != "kms:Decrypt" {
		t.Fatalf("content key has no Deny on kms:Decrypt: %v", key["KeyPolicy"])
	}
	var exempt []string
	for _, r := range list(deny["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"]) {
		exempt = append(exempt, label(r))
	}
	sort.Strings(exempt)
	if !slices.Equal(exempt, []string{"DispatchRole", "ReconcileRole"}) {
		t.Errorf("decrypt exempt = %v, want the dispatch and reconcile roles", exempt)
	}
	sort.Strings(producer)
	if !slices.Equal(producer, []string{"kms:Encrypt", "kms:GenerateDataKey"}) {
		t.Errorf("producer key actions = %v, want encrypt only", producer)
	}
	check(t, "producer may send intents", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Effect": "Allow", "Principal": map[string]any{"AWS": "arn:aws:iam::111122223333:role/account-service"},
				"Action": assertions.Match_ArrayWith(&[]any{"sqs:SendMessage"}),
			})})},
		})
	})
}

// alarmsByName returns the template's alarms by name without the stage prefix.
func (s *synthesized) alarmsByName() map[string]map[string]any {
	alarms := map[string]map[string]any{}
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		alarms[strings.TrimPrefix(props(a)["AlarmName"].(string), "resetledger-test-")] = props(a)
	}
	return alarms
}

func TestAlarmsAndDashboard(t *testing.T) {
	s := synth(t, nil)
	alarms := s.alarmsByName()
	state := func(st string) []any { return []any{map[string]any{"Name": "State", "Value": st}} }
	sweep := func(name string) []any { return []any{map[string]any{"Name": "Sweep", "Value": name}} }
	fnDim := func(name settings.Role) []any {
		return []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": s.logicalID(t, "AWS::Lambda::Function", title(name)+"Function")}}}
	}
	const gte, gt, lt = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold", "LessThanThreshold"
	want := map[string]map[string]any{
		// Open states (defaults: lease 2m, rates 1m, longest challenge 15m).
		"OldestHeldAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("held"),
			"Statistic": "Maximum", "Threshold": 1020.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
		"OldestClaimedAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("claimed"),
			"Statistic": "Maximum", "Threshold": 1020.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
		"OldestDispatchingAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("dispatching"),
			"Statistic": "Maximum", "Threshold": 240.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
		"UnknownClaims": {"Namespace": "ResetLedger", "MetricName": "OpenClaims", "Dimensions": state("unknown"),
			"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "missing"},
		"QuarantinedClaims": {"Namespace": "ResetLedger", "MetricName": "OpenClaims", "Dimensions": state("quarantined"),
			"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "missing"},
		"OpenClaimFiguresMissing": {"Namespace": "ResetLedger", "MetricName": "OpenClaims", "Dimensions": state("held"),
			"Statistic": "SampleCount", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": lt, "TreatMissingData": "breaching"},
		// Sweeps.
		"ReconcileHeartbeat": {"Namespace": "ResetLedger", "MetricName": "SweepHeartbeat", "Dimensions": sweep("reconcile"),
			"Statistic": "SampleCount", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": lt, "TreatMissingData": "breaching"},
		"ExpireHeartbeat": {"Namespace": "ResetLedger", "MetricName": "SweepHeartbeat", "Dimensions": sweep("expire"),
			"Statistic": "SampleCount", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": lt, "TreatMissingData": "breaching"},
		"ReconcileSweepErrors": {"Namespace": "ResetLedger", "MetricName": "SweepErrors", "Dimensions": sweep("reconcile"),
			"Statistic": "Sum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		"ExpireSweepErrors": {"Namespace": "ResetLedger", "MetricName": "SweepErrors", "Dimensions": sweep("expire"),
			"Statistic": "Sum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		// Triggers and queues.
		"DispatchIteratorAge": {"Namespace": "AWS/Lambda", "MetricName": "IteratorAge", "Dimensions": fnDim(settings.Dispatch),
			"Statistic": "Maximum", "Threshold": 60000.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
		"IntentQueueOldestAge": {"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
			"Statistic": "Maximum", "Threshold": 360.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
		"IntentDlqDepth": {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		"StreamFailureDlqDepth": {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		"ContentMismatch": {"Namespace": "ResetLedger", "MetricName": "ContentMismatch", "Statistic": "Sum",
			"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
		// Liveness under provider throttling.
		"DispatchQueueDlqDepth": {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		"DispatchQueueOldestAge": {"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
			"Statistic": "Maximum", "Period": 300.0, "Threshold": 940.0, // 15 min delay + 2 x 20 s re-drive
			"ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
	}
	for _, ch := range []string{"email", "sms"} {
		want["ExpiredUnsent"+title(ch)] = map[string]any{"Namespace": "ResetLedger", "MetricName": "ExpiredUnsent",
			"Dimensions": []any{map[string]any{"Name": "Channel", "Value": ch}}, "Statistic": "Sum", "Period": 300.0,
			"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	}
	want["OldestDeferredAge"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds",
		"Dimensions": state("deferred"), "Statistic": "Maximum", "Threshold": 1020.0, "ComparisonOperator": gt,
		"TreatMissingData": "missing"}
	for _, name := range settings.Functions {
		for _, m := range []string{"Errors", "Throttles"} {
			want[title(name)+m] = map[string]any{"Namespace": "AWS/Lambda", "MetricName": m, "Dimensions": fnDim(name),
				"Statistic": "Sum", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
		}
	}
	for name, w := range want {
		a, ok := alarms[name]
		if !ok {
			t.Errorf("no alarm %s", name)
			continue
		}
		for k, v := range w {
			if b1, b2 := mustJSON(a[k]), mustJSON(v); b1 != b2 {
				t.Errorf("%s.%s = %s, want %s", name, k, b1, b2)
			}
		}
		if a["EvaluationPeriods"] != 1.0 {
			t.Errorf("%s evaluation periods = %v", name, a["EvaluationPeriods"])
		}
		for _, actions := range []string{"AlarmActions", "OKActions"} {
			if got := list(a[actions]); len(got) != 1 || label(got[0]) != testTopic {
				t.Errorf("%s %s = %v, want the alarm topic", name, actions, a[actions])
			}
		}
		if desc, _ := a["AlarmDescription"].(string); !strings.Contains(desc, "Runbook") || !strings.Contains(desc, name) {
			t.Errorf("%s description does not point at its runbook row: %q", name, desc)
		}
	}
	for name, a := range alarms {
		if _, ok := want[name]; !ok {
			t.Errorf("alarm %s is not pinned by this test", name)
		}
		if _, ok := a["Metrics"]; ok {
			t.Errorf("%s uses metric math, which the local emulator's CloudFormation rejects", name)
		}
	}
	queueOf := func(name string) string {
		return label(list(alarms[name]["Dimensions"])[0].(map[string]any)["Value"])
	}
	for alarm, queue := range map[string]string{"StreamFailureDlqDepth": "StreamFailureDlq.QueueName",
		"IntentDlqDepth": "IntentDlq.QueueName", "IntentQueueOldestAge": "IntentQueue.QueueName",
		"DispatchQueueDlqDepth": "DispatchQueueDlq.QueueName", "DispatchQueueOldestAge": "DispatchQueue.QueueName"} {
		if got := queueOf(alarm); got != queue {
			t.Errorf("%s watches %s, want %s", alarm, got, queue)
		}
	}
	body := s.dashboardBody()
	for _, want := range []string{
		`["AWS/Lambda","IteratorAge","FunctionName","`, `["AWS/SQS","ApproximateAgeOfOldestMessage","QueueName","`,
		`["ResetLedger","SweepHeartbeat","Sweep","reconcile"`, `["ResetLedger","SweepErrors","Sweep","expire"`,
		`"type":"alarm"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	for _, name := range settings.Functions {
		for _, m := range []string{"Errors", "Throttles"} {
			if want := fmt.Sprintf(`["AWS/Lambda","%s","FunctionName","%sFunction`, m, title(name)); !strings.Contains(body, want) {
				t.Errorf("dashboard lacks %s", want)
			}
		}
	}
	// Dispatch under provider throttling.
	for _, want := range []string{
		`SEARCH('{ResetLedger,Channel,Code} MetricName=\"NotSent\"', 'Sum', 300)`,
		`["ResetLedger","Redriven","State","claimed"`, `["ResetLedger","WakeFailures"`,
		`"title":"Dispatch queue depth"`, `["AWS/SQS","ApproximateNumberOfMessagesDelayed","QueueName","`,
		`"label":"dispatch queue DLQ"`, `"title":"Oldest message in the dispatch queue (s)"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	for _, ch := range []string{"email", "sms"} {
		for _, m := range []string{"Retries", "BudgetWaitMilliseconds", "BudgetDeferrals", "ExpiredUnsent"} {
			if want := fmt.Sprintf(`["ResetLedger","%s","Channel","%s"`, m, ch); !strings.Contains(body, want) {
				t.Errorf("dashboard lacks %s", want)
			}
		}
		if want := fmt.Sprintf(`["ResetLedger","BudgetWaitMilliseconds","Channel","%s",{"label":"%s p99","stat":"p99"}]`, ch, ch); !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
}

func (s *synthesized) dashboardBody() string {
	var body string
	for _, d := range s.resources("AWS::CloudWatch::Dashboard") {
		body = label(props(d)["DashboardBody"])
	}
	return body
}

// TestEveryOpenStateIsWatched: every open state of the domain has its count and age series on the
// dashboard and an alarm on one of them, so a new open state cannot be left out.
func TestEveryOpenStateIsWatched(t *testing.T) {
	s := synth(t, nil)
	body := s.dashboardBody()
	watched := map[string]string{}
	for name, a := range s.alarmsByName() {
		if a["Namespace"] != "ResetLedger" || (a["MetricName"] != "OpenClaims" && a["MetricName"] != "OpenClaimOldestAgeSeconds") ||
			a["Statistic"] != "Maximum" {
			continue
		}
		for _, d := range list(a["Dimensions"]) {
			if d := d.(map[string]any); d["Name"] == "State" {
				watched[d["Value"].(string)] = name
			}
		}
	}
	var open int
	for _, st := range ledger.States {
		if !st.Open() {
			if name, ok := watched[string(st)]; ok {
				t.Errorf("closed state %s has alarm %s", st, name)
			}
			continue
		}
		open++
		for _, metric := range []string{"OpenClaims", "OpenClaimOldestAgeSeconds"} {
			if want := fmt.Sprintf(`["ResetLedger","%s","State","%s"`, metric, st); !strings.Contains(body, want) {
				t.Errorf("open state %s: dashboard lacks %s", st, want)
			}
		}
		if _, ok := watched[string(st)]; !ok {
			t.Errorf("open state %s has no alarm", st)
		}
	}
	if open < 5 {
		t.Errorf("ledger.States has %d open states, want at least held, claimed, dispatching, unknown, quarantined", open)
	}
}

// TestAlarmThresholdsFollowProps: the age bounds move with the lease, the rates and the longest
// challenge; the sweep alarms' periods cover two runs of a slow schedule.
func TestAlarmThresholdsFollowProps(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.Functions.Policy.Lease, p.ReconcileRate, p.ExpireRate = 5*time.Minute, 10*time.Minute, 3*time.Minute
		p.MaxChallengeLifetime, p.DispatchLagLimit, p.IntentVisibilityTimeout = 30*time.Minute, 20*time.Second, 90*time.Second
	})
	alarms := s.alarmsByName()
	for name, want := range map[string][2]float64{ // threshold, period
		"OldestDispatchingAge":    {(5 + 2*10) * 60, 1200},
		"OldestClaimedAge":        {(30 + 2*3) * 60, 1200},
		"OldestHeldAge":           {(30 + 2*3) * 60, 1200},
		"OpenClaimFiguresMissing": {1, 1200},
		"ReconcileHeartbeat":      {1, 1200},
		"ExpireHeartbeat":         {1, 360},
		"DispatchIteratorAge":     {20000, 300},
		"IntentQueueOldestAge":    {180, 300},
	} {
		if got := [2]any{alarms[name]["Threshold"], alarms[name]["Period"]}; got != [2]any{want[0], want[1]} {
			t.Errorf("%s threshold, period = %v, want %v", name, got, want)
		}
	}
}

// TestRunbookCoversEveryAlarm: every alarm has a row in the README's runbook table.
func TestRunbookCoversEveryAlarm(t *testing.T) {
	runbook := readmeSection(t, "### Alarms and what to do")
	rows := map[string]bool{}
	for _, cells := range tableRows(runbook, regexp.MustCompile("`")) {
		if len(cells) >= 3 && cells[1] != "" && cells[2] != "" {
			for _, name := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(cells[0], -1) {
				rows[name[1]] = true
			}
		}
	}
	alarms := synth(t, nil).alarmsByName()
	for name := range alarms {
		if !rows[name] {
			t.Errorf("alarm %s has no runbook row (| `%s` | means | do |) in README.md", name, name)
		}
	}
	// A row may also name an open-state alarm whose state the domain does not have yet.
	ruled := map[string]bool{}
	for _, a := range testProps(t).openStateRules() {
		ruled[a.ID] = true
	}
	for name := range rows {
		if _, ok := alarms[name]; !ok && !ruled[name] {
			t.Errorf("runbook row %s names no alarm", name)
		}
	}
}

// TestOpenStateRules: every open state the domain has has an alarm rule; a deferred row is bounded like a claimed one, by the longest challenge plus two
// expire sweeps, not counted (a surge defers rows by design).
func TestOpenStateRules(t *testing.T) {
	p := testProps(t)
	p.MaxChallengeLifetime, p.ExpireRate = 20*time.Minute, 2*time.Minute
	rules := p.openStateRules()
	for _, st := range ledger.States {
		if _, ok := rules[st]; st.Open() != ok {
			t.Errorf("state %s (open %v) has rule %v", st, st.Open(), ok)
		}
	}
	d, ok := rules[ledger.Deferred]
	if !ok || d.ID != "OldestDeferredAge" || d.Metric != "OpenClaimOldestAgeSeconds" || d.Threshold != (20+2*2)*60 ||
		d.Operator != awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD {
		t.Errorf("deferred rule = %+v, ok %v", d, ok)
	}
	if _, err := p.openStateAlarms(); err != nil {
		t.Error(err)
	}
}

// TestAlarmTopicRequired: a stage that requires an alarm topic refuses to synthesize without one.
func TestAlarmTopicRequired(t *testing.T) {
	ctx := cdkContext(t)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
	p := testProps(t)
	p.AlarmTopicArn = ""
	if _, err := NewLedgerStack(app, "NoTopic", p); err == nil || !strings.Contains(err.Error(), "AlarmTopicArn") {
		t.Errorf("NewLedgerStack without a topic = %v, want an error naming AlarmTopicArn", err)
	}
	// Opting out (the emulator's stage) deploys the alarms without actions.
	s := synth(t, func(p *LedgerStackProps) { p.AlarmTopicArn, p.RequireAlarmTopic = "", false })
	for name, a := range s.alarmsByName() {
		if _, ok := a["AlarmActions"]; ok {
			t.Errorf("%s has actions without a topic: %v", name, a["AlarmActions"])
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestOutputs(t *testing.T) {
	s := synth(t, nil)
	for _, name := range []string{"IntentQueueUrl", "IntentDlqUrl", "LedgerTableName", "ContentTableName", "ContentKeyArn",
		"BudgetTableName", "DispatchQueueUrl", "DispatchQueueDlqUrl",
		"ClaimFunctionName", "DispatchFunctionName", "ReconcileFunctionName", "ExpireFunctionName"} {
		check(t, "output "+name, func() { s.template.HasOutput(jsii.String(name), map[string]any{}) })
	}
}

// noNagErrors fails on any unsuppressed cdk-nag AwsSolutions error and checks every suppression's reason.
func noNagErrors(t *testing.T, s *synthesized) {
	t.Helper()
	for _, m := range *assertions.Annotations_FromStack(s.stack).FindError(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))) {
		t.Errorf("cdk-nag %s: %v", *m.Id, m.Entry.Data)
	}
	for id, r := range s.json["Resources"].(map[string]any) {
		md, _ := r.(map[string]any)["Metadata"].(map[string]any)
		nag, _ := md["cdk_nag"].(map[string]any)
		for _, sup := range list(nag["rules_to_suppress"]) {
			if sup == nil {
				continue
			}
			reason, _ := sup.(map[string]any)["reason"].(string)
			if len(reason) < 60 {
				t.Errorf("%s: suppression %v has no real reason", id, sup)
			}
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

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*LedgerStackProps)
		want   string
	}{
		{"missing bootstrap", func(p *LedgerStackProps) { os.Remove(filepath.Join(p.AssetDir, string(settings.Expire), "bootstrap")) }, "expire/bootstrap"},
		{"ses without from address", func(p *LedgerStackProps) { p.Functions.SESFrom = "" }, "SES_FROM_ADDRESS"},
		{"webhook without url", func(p *LedgerStackProps) { p.Functions.Transports[ledger.SMS] = settings.TransportWebhook }, "WEBHOOK_URL"},
		{"plain http webhook off loopback", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "http://gateway.internal/send"
		}, "WEBHOOK_URL"},
		{"zero sweep limit", func(p *LedgerStackProps) { p.Functions.SweepLimit = 0 }, "SWEEP_LIMIT"},
		{"unknown transport", func(p *LedgerStackProps) { p.Functions.Transports[ledger.Email] = "smtp" }, "EMAIL_TRANSPORT"},
		{"sub-minute rate", func(p *LedgerStackProps) { p.ReconcileRate = 30 * time.Second }, "ReconcileRate"},
		{"odd log retention", func(p *LedgerStackProps) { p.LogRetentionDays = 31 }, "LogRetentionDays"},
		{"zero lease", func(p *LedgerStackProps) { p.Functions.Policy.Lease = 0 }, "LEASE_DURATION"},
		{"webhook timeout too long", func(p *LedgerStackProps) { p.Functions.WebhookTimeout = time.Minute }, "WEBHOOK_TIMEOUT"},
		{"no architecture", func(p *LedgerStackProps) { p.Architecture = nil }, "Architecture"},
		{"visibility below claim timeout", func(p *LedgerStackProps) { p.IntentVisibilityTimeout = 10 * time.Second }, "IntentVisibilityTimeout"},
		{"intent age alarm after retention", func(p *LedgerStackProps) {
			p.IntentVisibilityTimeout, p.IntentRetention = 20*time.Minute, 30*time.Minute
		}, "IntentVisibilityTimeout"},
		{"sweep timeout at the reconcile rate", func(p *LedgerStackProps) { p.SweepTimeout = time.Minute }, "SweepTimeout"},
		{"sweep timeout above the expire rate", func(p *LedgerStackProps) {
			p.ReconcileRate, p.SweepTimeout = 5*time.Minute, 90*time.Second
		}, "below ExpireRate"},
		{"tiny sweep timeout", func(p *LedgerStackProps) { p.SweepTimeout = time.Second }, "SweepTimeout"},
		{"claim concurrency 1", func(p *LedgerStackProps) { p.ClaimMaxConcurrency = 1 }, "ClaimMaxConcurrency"},
		{"claim concurrency 1001", func(p *LedgerStackProps) { p.ClaimMaxConcurrency = 1001 }, "ClaimMaxConcurrency"},
		{"no alarm topic", func(p *LedgerStackProps) { p.AlarmTopicArn = "" }, "AlarmTopicArn"},
		{"required alarms skipped", func(p *LedgerStackProps) { p.SkipObservability = true }, "SkipObservability"},
		{"topic is not an SNS ARN", func(p *LedgerStackProps) { p.AlarmTopicArn = "arn:aws:sqs:us-east-1:111122223333:q" }, "AlarmTopicArn"},
		{"no challenge lifetime", func(p *LedgerStackProps) { p.MaxChallengeLifetime = 0 }, "MaxChallengeLifetime"},
		{"lag limit past the record age", func(p *LedgerStackProps) { p.DispatchLagLimit = 2 * time.Hour }, "DispatchLagLimit"},
		{"negative email rate", func(p *LedgerStackProps) { p.Functions.SendRates[ledger.Email] = -1 }, "SEND_RATE_EMAIL"},
		{"infinite sms rate", func(p *LedgerStackProps) { p.Functions.SendRates[ledger.SMS] = math.Inf(1) }, "SEND_RATE_SMS"},
		{"zero budget wait", func(p *LedgerStackProps) { p.Functions.Policy.BudgetWait = 0 }, "BUDGET_MAX_WAIT"},
		{"budget wait near the dispatch timeout", func(p *LedgerStackProps) { p.Functions.Policy.BudgetWait = 45 * time.Second }, "BUDGET_MAX_WAIT"},
		{"zero backoff base", func(p *LedgerStackProps) { p.Functions.Policy.RetryBase = 0 }, "RETRY_BACKOFF_BASE"},
		{"backoff max below base", func(p *LedgerStackProps) {
			p.Functions.Policy.RetryBase, p.Functions.Policy.RetryMax = time.Minute, time.Second
		}, "RETRY_BACKOFF_MAX"},
		{"backoff past the SQS delay limit", func(p *LedgerStackProps) { p.Functions.Policy.RetryMax = 20 * time.Minute }, "RETRY_BACKOFF_MAX"},
		{"zero redrive", func(p *LedgerStackProps) { p.Functions.Policy.RedriveAfter = 0 }, "REDRIVE_AFTER"},
		{"dispatch queue concurrency 1", func(p *LedgerStackProps) { p.DispatchQueueMaxConcurrency = 1 }, "DispatchQueueMaxConcurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProps(t)
			if err := p.Validate(); err != nil {
				t.Fatalf("valid props rejected: %v", err)
			}
			tc.mutate(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestConfigFromContext(t *testing.T) {
	from := func(ctx map[string]any) func(string) any {
		return func(k string) any { return ctx[k] }
	}
	cfg, err := configFromContext(from(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stage != "dev" || cfg.Props.Prefix != "resetledger-dev" || !cfg.Nag || cfg.Props.AssetDir != "../dist" ||
		*cfg.Props.Architecture.Name() != "arm64" || !cfg.Props.DeletionProtection || !cfg.Props.PointInTimeRecovery {
		t.Errorf("defaults = %+v", cfg.Props)
	}
	cfg, err = configFromContext(from(map[string]any{
		"stage": "local", "arch": "x86_64", "pitr": "false", "deletionProtection": false, "reconcileRate": "2m",
		"maxReceiveCount": "7", "emailTransport": "webhook", "webhookUrl": "http://127.0.0.1:1/x", "observability": "false",
		"nag": "false", "producerArns": "arn:a, arn:b", "leaseDuration": "90s", "intentVisibilityTimeout": "30s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Props
	if p.Prefix != "resetledger-local" || *p.Architecture.Name() != "x86_64" || p.PointInTimeRecovery || p.DeletionProtection ||
		p.ReconcileRate != 2*time.Minute || p.MaxReceiveCount != 7 || p.Functions.Transports[ledger.Email] != "webhook" || !p.SkipObservability ||
		cfg.Nag || !slices.Equal(p.ProducerPrincipalArns, []string{"arn:a", "arn:b"}) || p.Functions.Policy.Lease != 90*time.Second ||
		p.IntentVisibilityTimeout != 30*time.Second {
		t.Errorf("overrides = %+v", p)
	}
	// Every stage but dev must name the topic its alarms notify; a throw-away stage may opt out.
	assets := stubAssets(t)
	for _, tc := range []struct {
		ctx     map[string]any
		wantErr bool
	}{
		{map[string]any{"stage": "prod"}, true},
		{map[string]any{"stage": "prod", "alarmTopicArn": testTopic}, false},
		{map[string]any{"stage": "dev"}, false},
		{map[string]any{"stage": "local", "requireAlarmTopic": "false"}, false},
		{map[string]any{"stage": "dev", "requireAlarmTopic": "true"}, true},
	} {
		tc.ctx["assetDir"], tc.ctx["sesFromAddress"] = assets, "no-reply@mail.example.com"
		cfg, err := configFromContext(from(tc.ctx))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Props.Validate(); (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), "AlarmTopicArn") {
			t.Errorf("context %v: Validate() = %v, want error %v", tc.ctx, err, tc.wantErr)
		}
	}
	cfg, err = configFromContext(from(map[string]any{"claimMaxConcurrency": "25", "sweepTimeout": "40s",
		"maxChallengeLifetime": "10m", "dispatchLagLimit": "30s"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Props; p.ClaimMaxConcurrency != 25 || p.SweepTimeout != 40*time.Second || p.MaxChallengeLifetime != 10*time.Minute ||
		p.DispatchLagLimit != 30*time.Second {
		t.Errorf("observability overrides = %+v", p)
	}
	cfg, err = configFromContext(from(map[string]any{"sendRateEmail": "12.5", "sendRateSms": 1, "budgetMaxWait": "500ms",
		"retryBackoffBase": "1s", "retryBackoffMax": "30s", "redriveAfter": "45s", "dispatchQueueMaxConcurrency": "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Props; p.Functions.SendRates[ledger.Email] != 12.5 || p.Functions.SendRates[ledger.SMS] != 1 ||
		p.Functions.Policy.BudgetWait != 500*time.Millisecond || p.Functions.Policy.RetryBase != time.Second ||
		p.Functions.Policy.RetryMax != 30*time.Second || p.Functions.Policy.RedriveAfter != 45*time.Second ||
		p.DispatchQueueMaxConcurrency != 8 {
		t.Errorf("liveness overrides = %+v", p)
	}
	if p := DefaultLedgerStackProps("x"); p.Functions.SendRates[ledger.Email] != 0 || p.Functions.SendRates[ledger.SMS] != 0 {
		t.Errorf("default send rates = %v; want unset", p.Functions.SendRates)
	}
	for _, bad := range []map[string]any{
		{"sendRateEmail": "0"}, {"sendRateSms": "-3"}, {"sendRateEmail": "fast"}, {"sendRateSms": "+Inf"}, {"sendRateEmail": "NaN"},
		{"budgetMaxWait": "2"}, {"redriveAfter": "soon"}, {"dispatchQueueMaxConcurrency": "lots"},
		{"arch": "mips"}, {"requireAlarmTopic": "perhaps"}, {"sweepTimeout": "soon"}, {"claimMaxConcurrency": "many"}, {"pitr": "maybe"}, {"reconcileRate": "often"}, {"maxReceiveCount": "five"}, {"stage": "Prod_1"},
		{"intentVisibilityTimeout": "soon"}, {"logLevel": "trace"},
	} {
		if _, err := configFromContext(from(bad)); err == nil {
			t.Errorf("context %v accepted", bad)
		}
	}
}

func TestCDKJSON(t *testing.T) {
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["app"] != "go run ." {
		t.Errorf("app = %v", cfg["app"])
	}
}

// TestDispatchFilterIsGenerated: the stream mapping's filter patterns are exactly the ones
// dynamostore.DispatchFilter generates from the trigger rule (internal/pipeline's
// TestDispatchTriggerAgrees evaluates them over every state change).
func TestDispatchFilterIsGenerated(t *testing.T) {
	s := synth(t, nil)
	var got []string
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if fc, ok := props(m)["FilterCriteria"].(map[string]any); ok {
			for _, f := range list(fc["Filters"]) {
				got = append(got, f.(map[string]any)["Pattern"].(string))
			}
		}
	}
	var want []string
	for _, p := range dynamostore.DispatchFilter() {
		want = append(want, mustJSON(p))
	}
	if len(got) != len(want) {
		t.Fatalf("stream filters %q, want %q", got, want)
	}
	for i := range want {
		var g, w any
		if json.Unmarshal([]byte(got[i]), &g) != nil || json.Unmarshal([]byte(want[i]), &w) != nil || mustJSON(g) != mustJSON(w) {
			t.Errorf("filter %d = %s, want %s", i, got[i], want[i])
		}
	}
}
