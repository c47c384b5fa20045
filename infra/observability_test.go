package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

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

// alarmsByName returns the template's alarms by name without the stage prefix.
func (s *synthesized) alarmsByName() map[string]map[string]any {
	alarms := map[string]map[string]any{}
	for _, a := range s.resources("AWS::CloudWatch::Alarm") {
		alarms[strings.TrimPrefix(props(a)["AlarmName"].(string), "resetledger-test-")] = props(a)
	}
	return alarms
}

// mathAlarms are the alarms on metric math: the system's own bounce and complaint rates.
var mathAlarms = map[string]bool{"EmailBounceRate": true, "EmailComplaintRate": true}

// TestRateAlarms: each rate is count per SES-reported email send over an hour, and 0 below 100
// sends, so a handful of sends cannot page.
func TestRateAlarms(t *testing.T) {
	alarms := synth(t, nil).alarmsByName()
	for name, count := range map[string]string{
		"EmailBounceRate":    `{"Dimensions":[{"Name":"BounceType","Value":"Permanent"},{"Name":"Stage","Value":"resetledger-test"}],"MetricName":"Bounces","Namespace":"ResetLedger"}`,
		"EmailComplaintRate": `{"Dimensions":[{"Name":"Stage","Value":"resetledger-test"}],"MetricName":"Complaints","Namespace":"ResetLedger"}`,
	} {
		byID := map[string]map[string]any{}
		for _, m := range list(alarms[name]["Metrics"]) {
			byID[m.(map[string]any)["Id"].(string)] = m.(map[string]any)
		}
		if got := byID["expr_1"]; got == nil {
			var ids []string
			for id := range byID {
				ids = append(ids, id)
			}
			t.Fatalf("%s: no expression among metrics %v", name, ids)
		}
		if got := byID["expr_1"]["Expression"]; got != "IF(sends >= 100, n / sends, 0)" {
			t.Errorf("%s expression = %v", name, got)
		}
		sends := byID["sends"]["MetricStat"].(map[string]any)
		if got := mustJSON(sends["Metric"]); got != `{"Dimensions":[{"Name":"Channel","Value":"email"},{"Name":"Kind","Value":"provider_sent"},{"Name":"Stage","Value":"resetledger-test"}],"MetricName":"ProviderEvents","Namespace":"ResetLedger"}` {
			t.Errorf("%s sends = %s", name, got)
		}
		n := byID["n"]["MetricStat"].(map[string]any)
		if got := mustJSON(n["Metric"]); got != count {
			t.Errorf("%s count = %s, want %s", name, got, count)
		}
		for id, m := range map[string]map[string]any{"sends": sends, "n": n} {
			if m["Period"] != 3600.0 || m["Stat"] != "Sum" {
				t.Errorf("%s %s: period/stat = %v/%v, want 3600/Sum", name, id, m["Period"], m["Stat"])
			}
		}
	}

	local := synth(t, func(p *LedgerStackProps) { p.SkipMathAlarms = true }).alarmsByName()
	webhook := synth(t, func(p *LedgerStackProps) {
		p.Functions.Transports[ledger.Email] = settings.TransportWebhook
		p.Functions.WebhookURL = "https://hooks.example.com/send"
	}).alarmsByName()
	for name := range mathAlarms {
		if _, ok := local[name]; ok {
			t.Errorf("mathAlarms=false keeps %s", name)
		}
	}
	for _, name := range []string{"EmailBounceRate", "EmailComplaintRate", "SesBounceRate", "SesComplaintRate"} {
		if _, ok := webhook[name]; ok {
			t.Errorf("email through a webhook keeps the SES alarm %s", name)
		}
	}
	if _, ok := local["SesBounceRate"]; !ok {
		t.Error("mathAlarms=false drops the SES account alarm, which is a plain metric alarm")
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	s := synth(t, nil)
	alarms := s.alarmsByName()
	want := wantedAlarms(alarmDimensions{t, s})
	checkAlarms(t, alarms, want)
	checkAlarmQueues(t, alarms)
	checkDashboard(t, s.dashboardBody())
}

// alarmDimensions builds the dimensions the wanted alarms carry.
type alarmDimensions struct {
	t *testing.T
	s *synthesized
}

func (alarmDimensions) state(st string) []any {
	return []any{map[string]any{"Name": "State", "Value": st}}
}

func (alarmDimensions) sweep(name string) []any {
	return []any{map[string]any{"Name": "Sweep", "Value": name}}
}

func (d alarmDimensions) function(name settings.Role) []any {
	return []any{map[string]any{"Name": "FunctionName", "Value": map[string]any{"Ref": d.s.logicalID(d.t, "AWS::Lambda::Function", title(name)+"Function")}}}
}

// wantedAlarms is every alarm the stack should have, by name, with the
// fields this test pins.
func wantedAlarms(d alarmDimensions) map[string]map[string]any {
	want := stateSweepAndQueueAlarms(d)
	addProviderAndLimitAlarms(want)
	addDigestAndFunctionAlarms(d, want)
	return want
}

// stateSweepAndQueueAlarms: open states past due, sweeps, triggers and
// queues, liveness under provider throttling.
func stateSweepAndQueueAlarms(d alarmDimensions) map[string]map[string]any {
	state, sweep, fnDim := d.state, d.sweep, d.function
	const gte, gt, lt = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold", "LessThanThreshold"
	return map[string]map[string]any{
		// Open states, past due (defaults: rates 1m, longest challenge 15m).
		"OldestHeldAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("held"),
			"Statistic": "Maximum", "Threshold": 120.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
		"OldestClaimedAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("claimed"),
			"Statistic": "Maximum", "Threshold": 120.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
		"OldestDispatchingAge": {"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds", "Dimensions": state("dispatching"),
			"Statistic": "Maximum", "Threshold": 120.0, "ComparisonOperator": gt, "TreatMissingData": "missing"},
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
		"IntentSealRefused": {"Namespace": "ResetLedger", "MetricName": "RejectedIntents", "Statistic": "Sum",
			"Dimensions": []any{map[string]any{"Name": "Reason", "Value": "intent_mac"}},
			"Threshold":  0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
		// Liveness under provider throttling.
		"DispatchQueueDlqDepth": {"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
			"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"},
		"DispatchQueueOldestAge": {"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
			"Statistic": "Maximum", "Period": 300.0, "Threshold": 940.0, // 15 min delay + 2 x 20 s re-drive
			"ComparisonOperator": gt, "TreatMissingData": "notBreaching"},
	}
}

// addProviderAndLimitAlarms: provider events, expired unsent, send limits
// and SMS spend.
func addProviderAndLimitAlarms(want map[string]map[string]any) {
	const gte, gt = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold"
	// Provider events: the SES account's reputation (SES reviews at 5% / 0.1%, alarms at half that).
	want["SesBounceRate"] = map[string]any{"Namespace": "AWS/SES", "MetricName": "Reputation.BounceRate", "Statistic": "Maximum",
		"Period": 3600.0, "Threshold": 0.025, "ComparisonOperator": gt, "TreatMissingData": "missing"}
	want["SesComplaintRate"] = map[string]any{"Namespace": "AWS/SES", "MetricName": "Reputation.ComplaintRate", "Statistic": "Maximum",
		"Period": 3600.0, "Threshold": 0.0005, "ComparisonOperator": gt, "TreatMissingData": "missing"}
	want["EmailBounceRate"] = map[string]any{"Threshold": 0.025, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	want["EmailComplaintRate"] = map[string]any{"Threshold": 0.0005, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	want["ProviderEventsDlqDepth"] = map[string]any{"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
		"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
	want["ProviderEventsQueueOldestAge"] = map[string]any{"Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
		"Statistic": "Maximum", "Threshold": 360.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	for name, reason := range map[string]string{"ProviderEventsUnmatched": "unmatched", "ProviderEventsChannelMismatch": "channel_mismatch", "ProviderEventsUnproven": "unproven"} {
		want[name] = map[string]any{"Namespace": "ResetLedger", "MetricName": "ProviderEventsRefused",
			"Dimensions": []any{map[string]any{"Name": "Reason", "Value": reason}}, "Statistic": "Sum", "Period": 300.0,
			"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	}
	for _, ch := range []string{"email", "sms"} {
		want["ExpiredUnsent"+title(ch)] = map[string]any{"Namespace": "ResetLedger", "MetricName": "ExpiredUnsent",
			"Dimensions": []any{map[string]any{"Name": "Channel", "Value": ch}}, "Statistic": "Sum", "Period": 300.0,
			"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	}
	// Send limits: each limit's stops over an hour; the global SMS cap pages on its first stop.
	for name, rule := range map[string]string{"LimitStopsDestination": "destination", "LimitStopsSubject": "subject",
		"LimitStopsSmsCountry": "sms-country", "LimitStopsSmsNumberKind": "sms-number-kind", "LimitStopsSmsCountryCap": "sms-country-cap"} {
		want[name] = map[string]any{"Namespace": "ResetLedger", "MetricName": "LimitStops",
			"Dimensions": []any{map[string]any{"Name": "Rule", "Value": rule}}, "Statistic": "Sum", "Period": 3600.0,
			"Threshold": 50.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	}
	want["LimitSMSGlobal"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "LimitStops",
		"Dimensions": []any{map[string]any{"Name": "Rule", "Value": "sms-global"}}, "Statistic": "Sum", "Period": 300.0,
		"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	// SMS spend: the daily pace of smsMonthlyMessages (30000 / 30), spend.go.
	want["SmsDailyMessages"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "Transitions", "Statistic": "Sum",
		"Period": 86400.0, "Threshold": 1000.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
}

// addDigestAndFunctionAlarms: undelivered security events, the signed
// digests, deferred entries and every function's errors and throttles.
func addDigestAndFunctionAlarms(d alarmDimensions, want map[string]map[string]any) {
	state, fnDim := d.state, d.function
	const gte, gt = "GreaterThanOrEqualToThreshold", "GreaterThanThreshold"
	// Deliveries of the security rules' events that failed (audit.go).
	for _, rule := range securityRuleNames {
		want[rule+"Undelivered"] = map[string]any{"Namespace": "AWS/Events", "MetricName": "FailedInvocations", "Statistic": "Sum",
			"Period": 300.0, "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
	}
	// The signed digests (digest.go): gaps and failures page at once, the lag an hour before the
	// stream's 24 h retention would lose records; the heartbeat is metric math (TestDigestHeartbeat).
	want["DigestGaps"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "DigestGaps", "Statistic": "Sum", "Period": 300.0,
		"Threshold": 0.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	// Forged events: any event the table contradicts pages (dispatch and the digest function count them).
	want["ContradictedRecords"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "ContradictedRecords", "Statistic": "Sum",
		"Period": 300.0, "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
	want["DigestFailures"] = map[string]any{"Namespace": "AWS/Lambda", "MetricName": "Errors", "Dimensions": fnDim(settings.Digest),
		"Statistic": "Sum", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
	want["DigestFailureDlqDepth"] = map[string]any{"Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
		"Statistic": "Maximum", "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
	want["DigestIteratorAge"] = map[string]any{"Namespace": "AWS/Lambda", "MetricName": "IteratorAge", "Dimensions": fnDim(settings.Digest),
		"Statistic": "Maximum", "Period": 300.0, "Threshold": 3600000.0, "ComparisonOperator": gt, "TreatMissingData": "notBreaching"}
	// No digest in three intervals (15 min by default), quiet table or not: the tick writes one.
	want["DigestHeartbeat"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "DigestsWritten", "Statistic": "SampleCount",
		"Period": 900.0, "Threshold": 1.0, "ComparisonOperator": "LessThanThreshold", "TreatMissingData": "breaching"}
	want["OldestDeferredAge"] = map[string]any{"Namespace": "ResetLedger", "MetricName": "OpenClaimOldestAgeSeconds",
		"Dimensions": state("deferred"), "Statistic": "Maximum", "Threshold": 3720.0, "ComparisonOperator": gt,
		"TreatMissingData": "missing"}
	for _, name := range settings.Functions {
		for _, m := range []string{"Errors", "Throttles"} {
			want[title(name)+m] = map[string]any{"Namespace": "AWS/Lambda", "MetricName": m, "Dimensions": fnDim(name),
				"Statistic": "Sum", "Period": 300.0, "Threshold": 1.0, "ComparisonOperator": gte, "TreatMissingData": "notBreaching"}
		}
	}
}

// checkAlarms: each wanted alarm exists with its pinned fields, one
// evaluation period unless pinned, the alarm topic and a runbook row; and
// no alarm is left unpinned.
func checkAlarms(t *testing.T, alarms, want map[string]map[string]any) {
	t.Helper()
	for name, w := range want {
		a, ok := alarms[name]
		if !ok {
			t.Errorf("no alarm %s", name)
			continue
		}
		if _, pinned := w["Dimensions"]; w["Namespace"] == "ResetLedger" && pinned {
			w["Dimensions"] = withStage(w["Dimensions"])
		} else if w["Namespace"] == "ResetLedger" && !strings.Contains(mustJSON(a["Dimensions"]), `{"Name":"Stage","Value":"resetledger-test"}`) {
			t.Errorf("%s does not name the stage: dimensions %s", name, mustJSON(a["Dimensions"]))
		}
		for k, v := range w {
			if b1, b2 := mustJSON(a[k]), mustJSON(v); b1 != b2 {
				t.Errorf("%s.%s = %s, want %s", name, k, b1, b2)
			}
		}
		if _, pinned := w["EvaluationPeriods"]; !pinned && a["EvaluationPeriods"] != 1.0 {
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
		// The local emulator's CloudFormation rejects metric math: only the rate alarms use it,
		// and mathAlarms=false (the local stage) leaves them out.
		if _, ok := a["Metrics"]; ok != mathAlarms[name] {
			t.Errorf("%s: uses metric math = %v, want %v", name, ok, mathAlarms[name])
		}
	}
}

// withStage is dims, a list of {Name, Value}, with the test stage's Stage dimension in its place
// (CDK renders dimensions sorted by name): every alarm on a metric of the functions names the
// stage, so another stage's metric of the same name cannot mask it.
func withStage(dims any) []any {
	out := []any{}
	added := false
	var ds []any
	if dims != nil {
		ds = list(dims)
	}
	for _, d := range ds {
		if !added && d.(map[string]any)["Name"].(string) > "Stage" {
			out, added = append(out, map[string]any{"Name": "Stage", "Value": "resetledger-test"}), true
		}
		out = append(out, d)
	}
	if !added {
		out = append(out, map[string]any{"Name": "Stage", "Value": "resetledger-test"})
	}
	return out
}

// checkAlarmQueues: each queue alarm watches its own queue.
func checkAlarmQueues(t *testing.T, alarms map[string]map[string]any) {
	t.Helper()
	queueOf := func(name string) string {
		return label(list(alarms[name]["Dimensions"])[0].(map[string]any)["Value"])
	}
	for alarm, queue := range map[string]string{"StreamFailureDlqDepth": "StreamFailureDlq.QueueName",
		"IntentDlqDepth": "IntentDlq.QueueName", "IntentQueueOldestAge": "IntentQueue.QueueName",
		"DispatchQueueDlqDepth": "DispatchQueueDlq.QueueName", "DispatchQueueOldestAge": "DispatchQueue.QueueName",
		"DigestFailureDlqDepth":  "DigestFailureDlq.QueueName",
		"ProviderEventsDlqDepth": "ProviderEventsDlq.QueueName", "ProviderEventsQueueOldestAge": "ProviderEventsQueue.QueueName"} {
		if got := queueOf(alarm); got != queue {
			t.Errorf("%s watches %s, want %s", alarm, got, queue)
		}
	}
}

// checkDashboard: the dashboard shows the triggers, queues, sweeps, alarms,
// every function's errors and throttles, and dispatch under throttling.
func checkDashboard(t *testing.T, body string) {
	t.Helper()
	for _, want := range []string{
		`["AWS/Lambda","IteratorAge","FunctionName","`, `["AWS/SQS","ApproximateAgeOfOldestMessage","QueueName","`,
		`["ResetLedger","SweepHeartbeat","Stage","resetledger-test","Sweep","reconcile"`,
		`["ResetLedger","SweepErrors","Stage","resetledger-test","Sweep","expire"`,
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
		`SEARCH('{ResetLedger,Channel,Code,Stage} Stage=\"resetledger-test\" MetricName=\"NotSent\"', 'Sum', 300)`,
		`["ResetLedger","Redriven","Stage","resetledger-test","State","claimed"`, `["ResetLedger","WakeFailures","Stage","resetledger-test"`,
		`"title":"Dispatch queue depth"`, `["AWS/SQS","ApproximateNumberOfMessagesDelayed","QueueName","`,
		`"label":"dispatch queue DLQ"`, `"title":"Oldest message in the dispatch queue (s)"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard lacks %s", want)
		}
	}
	for _, ch := range []string{"email", "sms"} {
		for _, m := range []string{"Retries", "BudgetWaitMilliseconds", "BudgetDeferrals", "ExpiredUnsent"} {
			if want := fmt.Sprintf(`["ResetLedger","%s","Channel","%s","Stage","resetledger-test"`, m, ch); !strings.Contains(body, want) {
				t.Errorf("dashboard lacks %s", want)
			}
		}
		if want := fmt.Sprintf(`["ResetLedger","BudgetWaitMilliseconds","Channel","%s","Stage","resetledger-test",{"label":"%s p99","stat":"p99"}]`, ch, ch); !strings.Contains(body, want) {
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
			if want := fmt.Sprintf(`["ResetLedger","%s","Stage","resetledger-test","State","%s"`, metric, st); !strings.Contains(body, want) {
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
		p.Functions.Policy.MaxChallengeLifetime, p.DispatchLagLimit, p.IntentVisibilityTimeout = 30*time.Minute, 20*time.Second, 90*time.Second
	})
	alarms := s.alarmsByName()
	for name, want := range map[string][2]float64{ // threshold, period
		"OldestDispatchingAge":    {2 * 10 * 60, 1200},
		"OldestClaimedAge":        {2 * 3 * 60, 1200},
		"OldestHeldAge":           {2 * 3 * 60, 1200},
		"OldestDeferredAge":       {(30 + 2*3) * 60, 1200},
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

// TestRunbookCoversEveryAlarm: every alarm has a row in the runbook table of docs/operations.md.
func TestRunbookCoversEveryAlarm(t *testing.T) {
	const runbookDoc = "docs/operations.md"
	runbook := docSection(t, runbookDoc, "## Alarms and what to do")
	rows := map[string]bool{}
	for _, cells := range tableRows(runbook, regexp.MustCompile("`")) {
		if len(cells) >= 3 && cells[1] != "" && cells[2] != "" {
			for _, name := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(cells[0], -1) {
				rows[name[1]] = true
			}
		}
	}
	s := synth(t, nil)
	alarms := s.alarmsByName()
	// The EventBridge rules that notify on-call (audit.go) point at their rows like the alarms.
	for _, r := range s.resources("AWS::Events::Rule") {
		desc, _ := props(r)["Description"].(string)
		if m := regexp.MustCompile(`Alarms and what to do, ([A-Za-z]+)\.`).FindStringSubmatch(desc); m != nil {
			alarms[m[1]] = props(r)
		}
	}
	for name := range alarms {
		if !rows[name] {
			t.Errorf("alarm %s has no runbook row (| `%s` | means | do |) in %s", name, name, runbookDoc)
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
	p.Functions.Policy.MaxChallengeLifetime, p.ExpireRate = 20*time.Minute, 2*time.Minute
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

// TestEveryCustomMetricAlarmNamesTheStage: every alarm on a metric the functions write (namespace
// ResetLedger), and every such metric in a math alarm, names this stage's Stage dimension, which
// every record carries (internal/metrics): a stage's alarm reads its own stage's datapoints only,
// so another stage in the same account and Region cannot hold it OK (or set it off).
func TestEveryCustomMetricAlarmNamesTheStage(t *testing.T) {
	const stage = `{"Name":"Stage","Value":"resetledger-test"}`
	n := 0
	for name, a := range synth(t, nil).alarmsByName() {
		metrics := []any{a}
		for _, m := range list(a["Metrics"]) {
			if m, ok := m.(map[string]any); !ok {
				continue
			} else if ms, ok := m["MetricStat"].(map[string]any); ok {
				metrics = append(metrics, ms["Metric"])
			}
		}
		for _, m := range metrics {
			if m := m.(map[string]any); m["Namespace"] == "ResetLedger" {
				n++
				if !strings.Contains(mustJSON(m["Dimensions"]), stage) {
					t.Errorf("%s reads %s without the stage: %s", name, m["MetricName"], mustJSON(m["Dimensions"]))
				}
			}
		}
	}
	if n < 20 {
		t.Errorf("%d custom metrics in alarms, want the heartbeats, gaps, limits, rates...", n)
	}
}
