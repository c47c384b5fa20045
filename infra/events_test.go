package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestProviderEventsRoute: SES and SMS configuration sets -> encrypted topic -> queue (raw
// delivery) with its DLQ -> the events function.
func TestProviderEventsRoute(t *testing.T) {
	s := synth(t, nil)
	topicID := s.logicalID(t, "AWS::SNS::Topic", "ProviderEventsTopic")
	topic := props(s.resources("AWS::SNS::Topic")[topicID])
	if got := label(topic["KmsMasterKeyId"]); got != "ProviderEventsKey" {
		t.Errorf("topic key = %s, want ProviderEventsKey", got)
	}

	subs := s.resources("AWS::SNS::Subscription")
	if len(subs) != 1 {
		t.Fatalf("subscriptions = %d, want 1", len(subs))
	}
	for _, sub := range subs {
		sp := props(sub)
		if sp["Protocol"] != "sqs" || label(sp["Endpoint"]) != "ProviderEventsQueue" || sp["RawMessageDelivery"] != true ||
			mustJSON(sp["RedrivePolicy"]) != `{"deadLetterTargetArn":{"Fn::GetAtt":["`+s.constructID(t, "AWS::SQS::Queue", "ProviderEventsDlq")+`","Arn"]}}` ||
			label(sp["TopicArn"]) != "ProviderEventsTopic" {
			t.Errorf("subscription = %s, want the topic to ProviderEventsQueue with raw delivery", mustJSON(sp))
		}
	}

	queue := props(s.resources("AWS::SQS::Queue")[s.constructID(t, "AWS::SQS::Queue", "ProviderEventsQueue")])
	dlq := props(s.resources("AWS::SQS::Queue")[s.constructID(t, "AWS::SQS::Queue", "ProviderEventsDlq")])
	if queue["VisibilityTimeout"] != 180.0 || label(queue["KmsMasterKeyId"]) != "ProviderEventsQueueKey" ||
		queue["MessageRetentionPeriod"] != 345600.0 {
		t.Errorf("queue = %s, want visibility 180 (6 x the events timeout), ProviderEventsQueueKey, 4 days", mustJSON(queue))
	}
	redrive := queue["RedrivePolicy"].(map[string]any)
	if label(redrive["deadLetterTargetArn"]) != "ProviderEventsDlq" || redrive["maxReceiveCount"] != 5.0 {
		t.Errorf("redrive = %s, want ProviderEventsDlq after 5 receives", mustJSON(redrive))
	}
	// The DLQ keeps an event one day past the queue's 4 days (SQS counts from the first enqueue).
	if dlq["MessageRetentionPeriod"] != 432000.0 || label(dlq["KmsMasterKeyId"]) != "ProviderEventsQueueKey" {
		t.Errorf("DLQ = %s, want 5 days, ProviderEventsQueueKey", mustJSON(dlq))
	}

	mapping := props(s.resources("AWS::Lambda::EventSourceMapping")[s.logicalID(t, "AWS::Lambda::EventSourceMapping", "ProviderEventsSource")])
	if label(mapping["EventSourceArn"]) != "ProviderEventsQueue" || label(mapping["FunctionName"]) != "EventsFunction" ||
		mapping["BatchSize"] != 10.0 || mustJSON(mapping["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` ||
		mustJSON(mapping["ScalingConfig"]) != `{"MaximumConcurrency":5}` {
		t.Errorf("event source = %s", mustJSON(mapping))
	}

	checkProviderEventSources(t, s)

	checkProviderEventPolicies(t, s)
	noNagErrors(t, s)
}

// checkProviderEventPolicies: only SES (for this set) and End User Messaging
// SMS of this account publish to the topic, over TLS, and may use its key.
func checkProviderEventPolicies(t *testing.T, s *synthesized) {
	t.Helper()
	// Topic policy: only SES (for this set) and End User Messaging SMS of this account publish; TLS only.
	policies := s.resources("AWS::SNS::TopicPolicy")
	if len(policies) != 1 {
		t.Fatalf("topic policies = %d, want 1", len(policies))
	}
	for _, pol := range policies {
		doc := mustJSON(props(pol)["PolicyDocument"])
		for _, want := range []string{`"aws:SecureTransport":"false"`, `"Service":"ses.amazonaws.com"`, `"Service":"sms-voice.amazonaws.com"`,
			`"aws:SourceAccount":{"Ref":"AWS::AccountId"}`, `:configuration-set/resetledger-test-events"`} {
			if !strings.Contains(doc, want) {
				t.Errorf("topic policy lacks %s: %s", want, doc)
			}
		}
	}
	onlyOursPolicies(t, s, "resetledger-test-events", "resetledger-test-events")
	// Key policy: the publishing services may use the topic key, from this account only.
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "ProviderEventsKey")])
	doc := mustJSON(key["KeyPolicy"])
	for _, want := range []string{`"Sid":"ProvidersPublishEncrypted"`, `"kms:GenerateDataKey*"`, `"ses.amazonaws.com"`,
		`"sms-voice.amazonaws.com"`, `"aws:SourceAccount":{"Ref":"AWS::AccountId"}`} {
		if !strings.Contains(doc, want) {
			t.Errorf("topic key policy lacks %s: %s", want, doc)
		}
	}
	if key["EnableKeyRotation"] != true {
		t.Error("topic key rotation is off")
	}
}

// checkProviderEventSources: the SES and SMS configuration sets send their
// events to the provider events topic.
func checkProviderEventSources(t *testing.T, s *synthesized) {
	t.Helper()
	set := props(s.resources("AWS::SES::ConfigurationSet")[s.logicalID(t, "AWS::SES::ConfigurationSet", "SesConfigurationSet")])
	if set["Name"] != "resetledger-test-events" {
		t.Errorf("SES set = %s", mustJSON(set))
	}
	dest := props(s.resources("AWS::SES::ConfigurationSetEventDestination")[s.logicalID(t, "AWS::SES::ConfigurationSetEventDestination", "SesEventDestination")])
	ed := dest["EventDestination"].(map[string]any)
	wantEvents := []string{"bounce", "complaint", "delivery", "deliveryDelay", "reject", "renderingFailure", "send"}
	var gotEvents []string
	for _, e := range list(ed["MatchingEventTypes"]) {
		gotEvents = append(gotEvents, e.(string))
	}
	slices.Sort(gotEvents)
	if !slices.Equal(gotEvents, wantEvents) || label(ed["SnsDestination"].(map[string]any)["TopicARN"]) != "ProviderEventsTopic" ||
		ed["Enabled"] != true || label(dest["ConfigurationSetName"]) != "SesConfigurationSet" {
		t.Errorf("SES destination = %s, want %v to the topic", mustJSON(dest), wantEvents)
	}

	sms := props(s.resources("AWS::SMSVOICE::ConfigurationSet")[s.logicalID(t, "AWS::SMSVOICE::ConfigurationSet", "SmsConfigurationSet")])
	smsDest := list(sms["EventDestinations"])
	if sms["ConfigurationSetName"] != "resetledger-test-events" || len(smsDest) != 1 ||
		mustJSON(smsDest[0].(map[string]any)["MatchingEventTypes"]) != `["TEXT_ALL"]` ||
		label(smsDest[0].(map[string]any)["SnsDestination"].(map[string]any)["TopicArn"]) != "ProviderEventsTopic" {
		t.Errorf("SMS set = %s", mustJSON(sms))
	}
}

// TestConfigurationSetsFromContext: a set named in context is used, not created; SES still gets
// the stack's event destination, SMS gets none (the operator adds it); a channel that does not go
// through SES or SMS gets no set at all.
func TestConfigurationSetsFromContext(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) {
		p.Functions.SESConfigurationSet, p.Functions.SMSConfigurationSet = "shared-ses", "shared-sms"
	})
	for typ, n := range map[string]float64{"AWS::SES::ConfigurationSet": 0, "AWS::SES::ConfigurationSetEventDestination": 1,
		"AWS::SMSVOICE::ConfigurationSet": 0} {
		check(t, typ, func() { s.template.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}
	for _, d := range s.resources("AWS::SES::ConfigurationSetEventDestination") {
		if props(d)["ConfigurationSetName"] != "shared-ses" {
			t.Errorf("destination on %v, want shared-ses", props(d)["ConfigurationSetName"])
		}
	}
	vars := s.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars["SES_CONFIGURATION_SET"] != "shared-ses" || vars["SMS_CONFIGURATION_SET"] != "shared-sms" {
		t.Errorf("dispatch env sets = %v, %v", vars["SES_CONFIGURATION_SET"], vars["SMS_CONFIGURATION_SET"])
	}
	if g := s.grants(t)["Dispatch"]; !slices.Contains(g, "ses:SendEmail on arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:configuration-set/shared-ses") {
		t.Errorf("dispatch may not send with shared-ses: %q", g)
	}

	web := synth(t, func(p *LedgerStackProps) {
		p.Functions.Transports[ledger.Email], p.Functions.Transports[ledger.SMS] = settings.TransportWebhook, settings.TransportWebhook
		p.Functions.WebhookURL, p.Functions.SESFrom = "https://gw.example.com/send", ""
	})
	for _, typ := range []string{"AWS::SES::ConfigurationSet", "AWS::SES::ConfigurationSetEventDestination", "AWS::SMSVOICE::ConfigurationSet"} {
		check(t, typ, func() { web.template.ResourceCountIs(jsii.String(typ), jsii.Number(0)) })
	}
	vars = web.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if _, ok := vars["SES_CONFIGURATION_SET"]; ok {
		t.Errorf("webhook email still gets SES_CONFIGURATION_SET")
	}
	// The route itself stays (the local tests publish to it: the emulator enforces no IAM), but on
	// AWS nothing may publish to it.
	check(t, "topic", func() { web.template.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(1)) })
	onlyOursPolicies(t, s, "shared-ses", "shared-sms")
	onlyOursPolicies(t, web, "", "")
}

// onlyOursPolicies checks the Denies that keep forged provider events out: the events queue and its
// DLQ refuse every sender but the topic, and the topic every publisher but SES for sesSet and End
// User Messaging SMS for smsSet ("" when the channel does not go through them; with neither, every
// publish is denied). SMS's own Allow names its set as well.
func onlyOursPolicies(t *testing.T, s *synthesized, sesSet, smsSet string) {
	t.Helper()
	topic := s.logicalID(t, "AWS::SNS::Topic", "ProviderEventsTopic")
	for _, q := range []string{"ProviderEventsQueue", "ProviderEventsDlq"} {
		deny := policyStatement(t, queuePolicy(t, s, q), "OnlyTopicDelivers")
		if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sqs:SendMessage" ||
			mustJSON(deny["Condition"]) != `{"ArnNotEquals":{"aws:SourceArn":{"Ref":"`+topic+`"}}}` {
			t.Errorf("%s: OnlyTopicDelivers = %s, want a Deny of sqs:SendMessage to all but the topic", q, mustJSON(deny))
		}
	}
	var pol map[string]any
	for _, tp := range s.resources("AWS::SNS::TopicPolicy") {
		pol = props(tp)["PolicyDocument"].(map[string]any)
	}
	deny := policyStatement(t, pol, "OnlyProvidersPublish")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sns:Publish" {
		t.Errorf("OnlyProvidersPublish = %s, want a Deny of sns:Publish to all", mustJSON(deny))
	}
	var want []string
	if sesSet != "" {
		want = append(want, "arn:AWS::Partition:ses:AWS::Region:AWS::AccountId:configuration-set/"+sesSet)
	}
	if smsSet != "" {
		want = append(want, "arn:AWS::Partition:sms-voice:AWS::Region:AWS::AccountId:configuration-set/"+smsSet)
	}
	var got []string
	if cond, ok := deny["Condition"].(map[string]any); ok {
		for _, arn := range list(cond["ArnNotEquals"].(map[string]any)["aws:SourceArn"]) {
			got = append(got, label(arn))
		}
		if len(cond) != 1 {
			t.Errorf("OnlyProvidersPublish conditions = %s, want ArnNotEquals aws:SourceArn only", mustJSON(cond))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("OnlyProvidersPublish exempts publishes from %q, want %q (none: every publish denied)", got, want)
	}
	if smsSet != "" {
		allow := policyStatement(t, pol, "SmsPublishes")
		cond := allow["Condition"].(map[string]any)["StringEquals"].(map[string]any)
		if got := label(cond["aws:SourceArn"]); got != want[len(want)-1] {
			t.Errorf("SmsPublishes aws:SourceArn = %s, want %s", got, want[len(want)-1])
		}
	}
}

// TestProviderEventsLeaveOnlyByTheRoute: the topic denies every subscription but the stack's own
// (SQS to ProviderEventsQueue, exactly the endpoint and protocol of the subscription the stack
// creates, so the deploy itself is not denied), and ProviderEventsQueue, alone of the stack's
// queues, denies a purge to every principal (events.go argues why the others do not).
func TestProviderEventsLeaveOnlyByTheRoute(t *testing.T) {
	s := synth(t, nil)
	queueID := s.constructID(t, "AWS::SQS::Queue", "ProviderEventsQueue")
	queueArn := `{"Fn::GetAtt":["` + queueID + `","Arn"]}`
	var pol map[string]any
	for _, tp := range s.resources("AWS::SNS::TopicPolicy") {
		pol = props(tp)["PolicyDocument"].(map[string]any)
	}
	for sid, cond := range map[string]string{
		"OnlyOurSubscription": `{"StringNotEquals":{"sns:Endpoint":` + queueArn + `}}`,
		"OnlySqsSubscription": `{"StringNotEquals":{"sns:Protocol":"sqs"}}`,
	} {
		deny := policyStatement(t, pol, sid)
		if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "sns:Subscribe" ||
			label(deny["Resource"]) != "ProviderEventsTopic" || mustJSON(deny["Condition"]) != cond {
			t.Errorf("%s = %s, want a Deny of sns:Subscribe to all, condition %s", sid, mustJSON(deny), cond)
		}
	}
	for _, sub := range s.resources("AWS::SNS::Subscription") {
		if sp := props(sub); mustJSON(sp["Endpoint"]) != queueArn || sp["Protocol"] != "sqs" {
			t.Errorf("the stack's subscription (%s, %v) is not the one the topic exempts (%s, sqs)", mustJSON(sp["Endpoint"]), sp["Protocol"], queueArn)
		}
	}

	// The provider events queue (NoPurgeOfEvidence) and the intent queue (NoPurgeOfIntents,
	// queuepolicies.go) deny every purge; the DLQs do not (argued in events.go).
	purgeSids := map[string]string{
		mustJSON(map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "ProviderEventsQueue"), "Arn"}}): "NoPurgeOfEvidence",
		mustJSON(map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "IntentQueue"), "Arn"}}):         "NoPurgeOfIntents",
	}
	var carriers []string
	for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
		doc := props(qp)["PolicyDocument"].(map[string]any)
		for _, st := range list(doc["Statement"]) {
			if stmt := st.(map[string]any); strings.Contains(mustJSON(stmt["Action"]), "sqs:PurgeQueue") {
				on := mustJSON(stmt["Resource"])
				carriers = append(carriers, purgeSids[on])
				if sid := purgeSids[on]; sid == "" || stmt["Sid"] != sid || stmt["Effect"] != "Deny" || mustJSON(stmt["Principal"]) != `{"AWS":"*"}` ||
					stmt["Action"] != "sqs:PurgeQueue" || stmt["Condition"] != nil {
					t.Errorf("purge statement = %s, want %s: a Deny of sqs:PurgeQueue to all", mustJSON(stmt), sid)
				}
			}
		}
	}
	policyStatement(t, queuePolicy(t, s, "ProviderEventsQueue"), "NoPurgeOfEvidence")
	policyStatement(t, queuePolicy(t, s, "IntentQueue"), "NoPurgeOfIntents")
	if sort.Strings(carriers); !slices.Equal(carriers, []string{"NoPurgeOfEvidence", "NoPurgeOfIntents"}) {
		t.Errorf("purge Denies: %v, want the provider events queue's and the intent queue's only (the DLQs are argued in events.go)", carriers)
	}
}

// TestProviderEventsDlqDepthSaysWhatCanBeDone: the ProviderEventsDlqDepth alarm and its runbook
// row send the on-call to what can be read, the events function's log lines (whose messages and
// fields they name as the handler writes them), not to the DLQ, which no one can read
// (OnlyEventsReads) or redrive (OnlyTopicDelivers); both say when the events expire.
func TestProviderEventsDlqDepthSaysWhatCanBeDone(t *testing.T) {
	days := fmt.Sprintf("%d days", int(providerEventsDLQRetention.Hours()/24))
	desc, _ := synth(t, nil).alarmsByName()["ProviderEventsDlqDepth"]["AlarmDescription"].(string)
	for _, want := range []string{"only the events role may decrypt", "redrive", "events function's log", "dedupe key", days} {
		if !strings.Contains(desc, want) {
			t.Errorf("ProviderEventsDlqDepth description lacks %q: %q", want, desc)
		}
	}
	if strings.Contains(desc, "inspect") {
		t.Errorf("ProviderEventsDlqDepth description sends the on-call to inspect the DLQ, which no one can read: %q", desc)
	}

	rows := tableRows(docSection(t, "docs/operations.md", "## Alarms and what to do"), regexp.MustCompile("^`ProviderEventsDlqDepth`$"))
	if len(rows) != 1 || len(rows[0]) < 3 {
		t.Fatalf("runbook rows for ProviderEventsDlqDepth: %v", rows)
	}
	do := rows[0][2]
	for _, want := range []string{"`OnlyEventsReads`", "`OnlyTopicDelivers`", days} {
		if !strings.Contains(do, want) {
			t.Errorf("ProviderEventsDlqDepth runbook row lacks %s: %s", want, do)
		}
	}
	// The log lines (message, then fields) the row names are the events handler's own.
	src, err := os.ReadFile(filepath.Join("..", "internal", "handler", "events.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, logged := range []string{"provider event refused", "recording the provider event failed", "will_dead_letter", "reason",
		"dedupe_key", "error", "sqs_message_id"} {
		if !strings.Contains(do, "`"+logged+"`") {
			t.Errorf("ProviderEventsDlqDepth runbook row does not name `%s`: %s", logged, do)
		}
		if !strings.Contains(string(src), `"`+logged) {
			t.Errorf("the runbook row names %q, which internal/handler/events.go does not log", logged)
		}
	}
}

// policyStatement is the statement of a policy document with the given Sid.
func policyStatement(t *testing.T, doc map[string]any, sid string) map[string]any {
	t.Helper()
	for _, st := range list(doc["Statement"]) {
		if stmt := st.(map[string]any); stmt["Sid"] == sid {
			return stmt
		}
	}
	t.Fatalf("no statement %s in %s", sid, mustJSON(doc))
	return nil
}

// queuePolicy is the policy document of the queue with construct name queue.
func queuePolicy(t *testing.T, s *synthesized, queue string) map[string]any {
	t.Helper()
	id := s.constructID(t, "AWS::SQS::Queue", queue)
	for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
		for _, q := range list(props(qp)["Queues"]) {
			if mustJSON(q) == `{"Ref":"`+id+`"}` {
				return props(qp)["PolicyDocument"].(map[string]any)
			}
		}
	}
	t.Fatalf("no queue policy on %s", queue)
	return nil
}

// TestProviderEventsQueueKey: the provider events queue and DLQ hold personal data under a
// customer-managed key (rotated, 30 days' deletion window) that SNS may use only for this topic,
// the events role may decrypt only through SQS, and every other principal is denied Decrypt on;
// the linters' "queues hold opaque ids" skip does not reach these two queues.
func TestProviderEventsQueueKey(t *testing.T) {
	s := synth(t, nil)
	keyID := s.logicalID(t, "AWS::KMS::Key", "ProviderEventsQueueKey")
	key := props(s.resources("AWS::KMS::Key")[keyID])
	if key["EnableKeyRotation"] != true || key["PendingWindowInDays"] != 30.0 {
		t.Errorf("queue key = %s, want rotation on and a 30-day deletion window", mustJSON(key))
	}
	policy := key["KeyPolicy"].(map[string]any)
	topic := s.logicalID(t, "AWS::SNS::Topic", "ProviderEventsTopic")
	sns := 0
	for _, st := range list(policy["Statement"]) {
		stmt := st.(map[string]any)
		if mustJSON(stmt["Principal"]) != `{"Service":"sns.amazonaws.com"}` {
			continue
		}
		sns++
		if stmt["Effect"] != "Allow" || mustJSON(stmt["Action"]) != `["kms:Decrypt","kms:GenerateDataKey"]` ||
			mustJSON(stmt["Condition"]) != `{"ArnEquals":{"aws:SourceArn":{"Ref":"`+topic+`"}}}` {
			t.Errorf("SNS on the queue key = %s, want GenerateDataKey and Decrypt for this topic only", mustJSON(stmt))
		}
	}
	if sns != 1 {
		t.Errorf("queue key policy has %d statements for SNS, want 1: %s", sns, mustJSON(policy))
	}
	deny := policyStatement(t, policy, "OnlyEventsReads")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "kms:Decrypt" ||
		mustJSON(deny["Condition"]) != `{"ArnNotEquals":{"aws:PrincipalArn":{"Fn::GetAtt":["`+
			s.logicalID(t, "AWS::IAM::Role", "EventsRole")+`","Arn"]}},"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}` {
		t.Errorf("OnlyEventsReads = %s, want a Deny of kms:Decrypt to every IAM principal but the events role", mustJSON(deny))
	}
	for role, grants := range s.grants(t) {
		want := []string(nil)
		if role == "Events" {
			want = []string{"kms:Decrypt on ProviderEventsQueueKey"}
		}
		var got []string
		for _, g := range grants {
			if strings.HasSuffix(g, " on ProviderEventsQueueKey") {
				got = append(got, g)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s on the queue key: %q, want %q", role, got, want)
		}
	}
	check(t, "events decrypts only through SQS", func() {
		s.template.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
			"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
				"Action": "kms:Decrypt", "Resource": map[string]any{"Fn::GetAtt": []any{keyID, "Arn"}},
				"Condition": map[string]any{"StringEquals": map[string]any{"kms:ViaService": map[string]any{
					"Fn::Sub": "sqs.${AWS::Region}.${AWS::URLSuffix}"}}},
			})})},
		})
	})
	for _, q := range []string{"ProviderEventsQueue", "ProviderEventsDlq"} {
		id := s.constructID(t, "AWS::SQS::Queue", q)
		if _, ok := linterMetadata(t, id, s.resources("AWS::SQS::Queue")[id])["CKV_AWS_27"]; ok {
			t.Errorf("%s, under a customer-managed key, carries the CKV_AWS_27 skip", q)
		}
	}
	noNagErrors(t, s)
}

// TestAttemptProofKey: an HMAC_256 key (KMS rotates none), 30 days' deletion window; dispatch
// alone may generate a MAC (its grant, and the key policy's Deny for everyone else), events alone
// verifies, reconcile and the rest hold nothing on it.
func TestAttemptProofKey(t *testing.T) {
	s := synth(t, nil)
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "AttemptProofKey")])
	if key["KeySpec"] != "HMAC_256" || key["KeyUsage"] != "GENERATE_VERIFY_MAC" || key["EnableKeyRotation"] == true ||
		key["PendingWindowInDays"] != 30.0 {
		t.Errorf("attempt proof key = %s, want HMAC_256 for GENERATE_VERIFY_MAC, no rotation, 30 days", mustJSON(key))
	}
	deny := policyStatement(t, key["KeyPolicy"].(map[string]any), "OnlySendersSign")
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Action"] != "kms:GenerateMac" ||
		mustJSON(deny["Condition"]) != `{"ArnNotEquals":{"aws:PrincipalArn":{"Fn::GetAtt":["`+
			s.logicalID(t, "AWS::IAM::Role", "DispatchRole")+`","Arn"]}}}` {
		t.Errorf("OnlySendersSign = %s, want a Deny of kms:GenerateMac to all but dispatch's role", mustJSON(deny))
	}
	want := map[string][]string{"Dispatch": {"kms:GenerateMac on AttemptProofKey"}, "Events": {"kms:VerifyMac on AttemptProofKey"}}
	for role, grants := range s.grants(t) {
		var got []string
		for _, g := range grants {
			if strings.HasSuffix(g, " on AttemptProofKey") {
				got = append(got, g)
			}
		}
		if !slices.Equal(got, want[role]) {
			t.Errorf("%s on the attempt proof key: %q, want %q", role, got, want[role])
		}
	}
	for _, name := range []settings.Role{settings.Dispatch, settings.Reconcile, settings.Events} {
		vars := s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any)
		if got := label(vars["ATTEMPT_PROOF_KEY_ARN"]); got != "AttemptProofKey" {
			t.Errorf("%s ATTEMPT_PROOF_KEY_ARN = %s, want the attempt proof key", name, got)
		}
	}
}

func TestValidateEvents(t *testing.T) {
	for name, mutate := range map[string]func(p *LedgerStackProps){
		"concurrency 1":    func(p *LedgerStackProps) { p.EventsMaxConcurrency = 1 },
		"concurrency 2000": func(p *LedgerStackProps) { p.EventsMaxConcurrency = 2000 },
		"SES set name":     func(p *LedgerStackProps) { p.Functions.SESConfigurationSet = "has space" },
		"SMS set name":     func(p *LedgerStackProps) { p.Functions.SMSConfigurationSet = strings.Repeat("x", 65) },
	} {
		p := testProps(t)
		mutate(p)
		if err := p.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := testProps(t).Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}
