package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// TestDataEventsTrail: dataEventsTrail=<name> creates that trail, logging the ledger table's write
// data events only, with log file validation, into its own encrypted, private bucket; without it
// there is no trail.
func TestDataEventsTrail(t *testing.T) {
	// Only the local stage may go without a trail.
	if n := len(synth(t, func(p *LedgerStackProps) { p.DataEventsTrail, p.LocalStage = "", true }).resources("AWS::CloudTrail::Trail")); n != 0 {
		t.Errorf("trails without dataEventsTrail = %d, want 0", n)
	}

	s := synth(t, nil) // the test stage names testTrail
	trails := s.resources("AWS::CloudTrail::Trail")
	if len(trails) != 1 {
		t.Fatalf("trails = %d, want 1", len(trails))
	}
	var trail map[string]any
	for _, tr := range trails {
		trail = props(tr)
	}
	for k, want := range map[string]string{
		"TrailName":               `"` + testTrail + `"`,
		"EnableLogFileValidation": `true`,
		"IsMultiRegionTrail":      `false`,
		"IsLogging":               `true`,
		"AdvancedEventSelectors": `[{"FieldSelectors":[{"Equals":["Data"],"Field":"eventCategory"},` +
			`{"Equals":["AWS::DynamoDB::Table"],"Field":"resources.type"},` +
			`{"Equals":[{"Fn::GetAtt":["` + s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable") + `","Arn"]}],"Field":"resources.ARN"},` +
			`{"Equals":["false"],"Field":"readOnly"}],"Name":"Writes to the ledger table"}]`,
	} {
		if got := mustJSON(trail[k]); got != want {
			t.Errorf("trail %s = %s, want %s", k, got, want)
		}
	}
	// Advanced selectors alone: a basic selector would add management events (or replace them).
	if _, ok := trail["EventSelectors"]; ok {
		t.Errorf("trail has basic event selectors too: %s", mustJSON(trail["EventSelectors"]))
	}
	if got := label(trail["KMSKeyId"]); got != "DataEventsTrailKey" {
		t.Errorf("trail key = %s, want DataEventsTrailKey", got)
	}
	if got := label(trail["S3BucketName"]); got != "DataEventsTrailBucket" {
		t.Errorf("trail bucket = %s, want DataEventsTrailBucket", got)
	}
	bucket := s.resources("AWS::S3::Bucket")[s.constructID(t, "AWS::S3::Bucket", "DataEventsTrailBucket")]
	enc := mustJSON(props(bucket)["BucketEncryption"])
	if !strings.Contains(enc, `"SSEAlgorithm":"aws:kms"`) || !strings.Contains(enc, "DataEventsTrailKey") {
		t.Errorf("trail bucket encryption = %s, want the trail's key", enc)
	}
	if got := mustJSON(props(bucket)["PublicAccessBlockConfiguration"]); got !=
		`{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}` {
		t.Errorf("trail bucket public access block = %s", got)
	}
	if bucket["DeletionPolicy"] != "Retain" {
		t.Errorf("trail bucket DeletionPolicy = %v, want Retain: the log outlives the stack", bucket["DeletionPolicy"])
	}
	// Each log file is locked as delivered, in COMPLIANCE mode, for the history retention (issue 43);
	// who may delete or write one is TestBoundaries' (NoTrailLogDeletes, OnlyThisTrailWrites).
	if got, want := mustJSON(props(bucket)["ObjectLockConfiguration"]),
		fmt.Sprintf(`{"ObjectLockEnabled":"Enabled","Rule":{"DefaultRetention":{"Days":%v,"Mode":"COMPLIANCE"}}}`, testProps(t).digestRetentionDays()); got != want {
		t.Errorf("trail bucket object lock = %s, want %s", got, want)
	}
	if props(bucket)["ObjectLockEnabled"] != true || !strings.Contains(mustJSON(props(bucket)["VersioningConfiguration"]), "Enabled") {
		t.Errorf("trail bucket: ObjectLockEnabled %v, versioning %s", props(bucket)["ObjectLockEnabled"], mustJSON(props(bucket)["VersioningConfiguration"]))
	}
	key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", "DataEventsTrailKey")])
	if policy := mustJSON(key["KeyPolicy"]); !strings.Contains(policy, `"Sid":"CloudTrailEncryptsThisTrail"`) ||
		!strings.Contains(policy, `:trail/resetledger-test-ledger-writes"`) {
		t.Errorf("trail key policy does not let CloudTrail encrypt for this trail only: %s", policy)
	}
	noNagErrors(t, s)
	// Synth names the shape the trail's log files are kept in.
	if n := len(*assertions.Annotations_FromStack(s.stack).FindInfo(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("trailLogsInThisAccount: .* locked .*log-archive account")))); n != 1 {
		t.Errorf("synth infos naming the trail logs' shape = %d, want 1", n)
	}

	p := testProps(t)
	p.DataEventsTrail = "-bad name"
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "DataEventsTrail") {
		t.Errorf("Validate() with a bad trail name = %v", err)
	}
}

// TestSecurityEvents: with an alarm topic, EventBridge rules send to it every DisableKey,
// ScheduleKeyDeletion and PutKeyPolicy on any key of the stack, every change of the ledger
// table's resource policy, every change of any queue's attributes or permissions and every purge
// or deletion of one (matched by the end of its URL, whatever endpoint the caller spelled), and
// every change of the provider events topic's attributes or permissions, subscription to it or
// change of its subscriptions; each rule's failed deliveries alarm; without a topic there are none.
func TestSecurityEvents(t *testing.T) {
	s := synth(t, nil)
	rules := map[string]map[string]any{}
	for id, r := range s.resources("AWS::Events::Rule") {
		if p := props(r); p["EventPattern"] != nil {
			rules[logicalSuffix.ReplaceAllString(id, "")] = p
		}
	}
	keyIDs, queueEnds := securityEventResources(t, s)
	topic := map[string]any{"Ref": s.logicalID(t, "AWS::SNS::Topic", "ProviderEventsTopic")}
	for name, want := range map[string]struct {
		source, eventSource string
		names               []any
		param               string
		resources           []string
	}{
		"KeyStateOrPolicyChanged": {"aws.kms", "kms.amazonaws.com", []any{"DisableKey", "ScheduleKeyDeletion", "PutKeyPolicy"}, "keyId", keyIDs},
		"LedgerResourcePolicyChanged": {"aws.dynamodb", "dynamodb.amazonaws.com", []any{"PutResourcePolicy", "DeleteResourcePolicy"}, "resourceArn",
			[]string{mustJSON(map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable"), "Arn"}})}},
		"QueueChanged": {"aws.sqs", "sqs.amazonaws.com", []any{"SetQueueAttributes", "AddPermission", "RemovePermission", "PurgeQueue", "DeleteQueue"},
			"queueUrl", queueEnds},
		// The topic's own calls name it in topicArn; its subscriptions' calls in subscriptionArn,
		// which is the topic's ARN, ":" and the subscription's id.
		"ProviderEventsTopicChanged": {"aws.sns", "sns.amazonaws.com", []any{"SetTopicAttributes", "AddPermission", "RemovePermission",
			"Subscribe", "DeleteTopic", "SetSubscriptionAttributes", "Unsubscribe"}, "$or", []string{mustJSON([]any{
			map[string]any{"requestParameters": map[string]any{"topicArn": []any{topic}}},
			map[string]any{"requestParameters": map[string]any{"subscriptionArn": []any{
				map[string]any{"prefix": map[string]any{"Fn::Join": []any{"", []any{topic, ":"}}}}}}},
		})}},
	} {
		r, ok := rules[name]
		if !ok {
			t.Errorf("no rule %s among %v", name, rules)
			continue
		}
		pattern := r["EventPattern"].(map[string]any)
		detail := pattern["detail"].(map[string]any)
		if mustJSON(pattern["source"]) != mustJSON([]any{want.source}) || mustJSON(pattern["detail-type"]) != `["AWS API Call via CloudTrail"]` ||
			mustJSON(detail["eventSource"]) != mustJSON([]any{want.eventSource}) || mustJSON(detail["eventName"]) != mustJSON(want.names) {
			t.Errorf("%s pattern = %s", name, mustJSON(pattern))
		}
		var got []string
		if want.param == "$or" {
			got = []string{mustJSON(detail["$or"])}
		} else {
			for _, v := range list(detail["requestParameters"].(map[string]any)[want.param]) {
				got = append(got, mustJSON(v))
			}
		}
		sort.Strings(got)
		sort.Strings(want.resources)
		if !slices.Equal(got, want.resources) {
			t.Errorf("%s watches %s %v, want %v", name, want.param, got, want.resources)
		}
		targets := list(r["Targets"])
		if len(targets) != 1 {
			t.Fatalf("%s targets = %v", name, targets)
		}
		target := targets[0].(map[string]any)
		if target["Arn"] != testTopic || label(target["RoleArn"]) != "SecurityEventsRole" {
			t.Errorf("%s target = %s, want the alarm topic through SecurityEventsRole", name, mustJSON(target))
		}
		if !strings.Contains(r["Description"].(string), "Runbook: docs/operations.md, Alarms and what to do, "+name+".") {
			t.Errorf("%s description does not point at its runbook row: %v", name, r["Description"])
		}
		a, ok := s.alarmsByName()[name+"Undelivered"]
		if !ok || a["Namespace"] != "AWS/Events" || a["MetricName"] != "FailedInvocations" ||
			label(list(a["Dimensions"])[0].(map[string]any)["Value"]) != name {
			t.Errorf("%sUndelivered alarm = %s", name, mustJSON(a))
		}
	}
	if got := s.grants(t)["SecurityEvents"]; !slices.Equal(got, []string{"sns:Publish on " + testTopic}) {
		t.Errorf("SecurityEventsRole grants = %v, want sns:Publish on the alarm topic only", got)
	}
	noNagErrors(t, s)

	checkNoRulesWithoutAlarmTopic(t)
}

// securityEventResources is how the security rules name the stack's keys (by
// Ref and by ARN) and its queues (by the end of their URL).
func securityEventResources(t *testing.T, s *synthesized) (keyIDs, queueEnds []string) {
	t.Helper()
	for id := range s.resources("AWS::KMS::Key") {
		keyIDs = append(keyIDs, mustJSON(map[string]any{"Ref": id}), mustJSON(map[string]any{"Fn::GetAtt": []any{id, "Arn"}}))
	}
	if len(keyIDs) < 8 { // ledger, content, backup vault, trail, and the provider events keys
		t.Fatalf("keys in the template: %v", keyIDs)
	}
	for id := range s.resources("AWS::SQS::Queue") {
		queueEnds = append(queueEnds, mustJSON(map[string]any{"suffix": map[string]any{"Fn::Join": []any{"", []any{
			"/", map[string]any{"Ref": "AWS::AccountId"}, "/", map[string]any{"Fn::GetAtt": []any{id, "QueueName"}}}}}}))
	}
	if len(queueEnds) != 8 {
		t.Fatalf("queues in the template: %v", queueEnds)
	}
	return keyIDs, queueEnds
}

// checkNoRulesWithoutAlarmTopic: a stack without an alarm topic has no security
// rules.
func checkNoRulesWithoutAlarmTopic(t *testing.T) {
	t.Helper()
	s := synth(t, func(p *LedgerStackProps) { p.AlarmTopicArn, p.RequireAlarmTopic = "", false })
	for id, r := range s.resources("AWS::Events::Rule") {
		if props(r)["EventPattern"] != nil {
			t.Errorf("rule %s without an alarm topic", id)
		}
	}
}
