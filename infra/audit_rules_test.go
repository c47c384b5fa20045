package main

import (
	"fmt"
	"hash/crc32"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// The security rules' patterns (audit.go) are checked by matching sample CloudTrail events against
// them, as EventBridge would: each rule must match a call on its own resource, however the caller
// spelled it, and not the same call on another resource, nor a read of its own. ministack does not
// deliver CloudTrail events, so the matching is done here, by matchPattern: the subset of
// EventBridge's pattern language the rules use (exact strings, prefix, suffix, wildcard, $or).

// securityRuleNames are the EventBridge rules a stage with an alarm topic has (audit.go), with SES
// email and End User Messaging SMS (its configuration set and protect configuration).
var securityRuleNames = []string{"KeyStateOrPolicyChanged", "LedgerResourcePolicyChanged", "QueueChanged",
	"ProviderEventsTopicChanged", "BucketChanged", "FunctionChanged", "RolePassedToFunction", "RoleChanged", "SesConfigurationSetChanged",
	"SmsConfigurationSetChanged", "SmsProtectConfigurationChanged", "DataEventsTrailChanged",
	// What lies under the digests, and the watchers (watchers.go).
	"DigestMappingChanged", "LedgerTableChanged", watcherRulesID, watcherTargetsID, "AlarmsChanged", "TrailChanged",
	"BackupVaultChanged"}

const (
	testAccount = "111122223333"
	testRegion  = "us-east-1"
)

// physical is what a resource's Ref and attributes resolve to in the samples: the name the
// template gives it, or one made from its logical id.
func (s *synthesized) physical(id, attr string) string {
	r, ok := s.json["Resources"].(map[string]any)[id].(map[string]any)
	if !ok {
		panic("no resource " + id)
	}
	p := props(r)
	// A generated name as long as CloudFormation makes them: the stack's name (a long stage's),
	// the logical id and a random suffix, cut to 64 characters; a key's id is a UUID.
	name := ("resetledger-abcdefghijklmnopqrstuvwxy-" + id + "-ABCDEFGHIJKLM")[:64]
	switch r["Type"] {
	case "AWS::S3::Bucket":
		name = strings.ToLower(name[:63])
	case "AWS::KMS::Key":
		name = fmt.Sprintf("%08x-0000-4000-8000-%012x", len(id), len(id)*7919)
	case "AWS::Lambda::EventSourceMapping": // a mapping's Ref is its UUID
		name = fmt.Sprintf("%08x-1111-4222-8333-%012x", crc32.ChecksumIEEE([]byte(id)), len(id))
	}
	for _, k := range []string{"FunctionName", "RoleName", "BucketName", "TableName", "QueueName", "TrailName", "ConfigurationSetName"} {
		if v, ok := p[k].(string); ok {
			name = v
		}
	}
	if v, ok := p["Name"].(string); ok && r["Type"] == "AWS::Events::Rule" {
		name = v
	}
	arn := func(service, resource string) string {
		return "arn:aws:" + service + ":" + testRegion + ":" + testAccount + ":" + resource
	}
	switch typ := r["Type"]; {
	case attr == "" && typ == "AWS::SNS::Topic":
		return arn("sns", name)
	case attr == "" || attr == "QueueName":
		return name
	case attr != "Arn":
		return name + "-" + strings.ToLower(attr)
	case typ == "AWS::Lambda::Function":
		return arn("lambda", "function:"+name)
	case typ == "AWS::DynamoDB::Table":
		return arn("dynamodb", "table/"+name)
	case typ == "AWS::KMS::Key":
		return arn("kms", "key/"+name)
	case typ == "AWS::IAM::Role":
		return "arn:aws:iam::" + testAccount + ":role/" + name
	}
	return arn("x", name)
}

// resolve replaces CloudFormation's intrinsics in a pattern by what they resolve to in the samples.
func (s *synthesized) resolve(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.resolve(e)
		}
		return out
	case map[string]any:
		if ref, ok := x["Ref"].(string); ok && len(x) == 1 {
			switch ref {
			case "AWS::AccountId":
				return testAccount
			case "AWS::Region":
				return testRegion
			case "AWS::Partition":
				return "aws"
			case "AWS::URLSuffix":
				return "amazonaws.com"
			}
			return s.physical(ref, "")
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(x) == 1 {
			return s.physical(ga[0].(string), ga[1].(string))
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(x) == 1 {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, s.resolve(p).(string))
			}
			return strings.Join(parts, j[0].(string))
		}
		out := map[string]any{}
		for k, e := range x {
			out[k] = s.resolve(e)
		}
		return out
	}
	return v
}

// matchPattern reports whether event matches an EventBridge pattern made of nested fields, lists
// of exact strings and prefix, suffix and wildcard matches, and $or.
func matchPattern(pattern, event map[string]any) bool {
	for k, pv := range pattern {
		if k == "$or" {
			hit := false
			for _, sub := range pv.([]any) {
				hit = hit || matchPattern(sub.(map[string]any), event)
			}
			if !hit {
				return false
			}
			continue
		}
		switch p := pv.(type) {
		case map[string]any:
			ev, ok := event[k].(map[string]any)
			if !ok || !matchPattern(p, ev) {
				return false
			}
		case []any:
			if !matchField(p, event[k]) {
				return false
			}
		default:
			panic(fmt.Sprintf("pattern field %s: %v is not a list or an object", k, pv))
		}
	}
	return true
}

// matchField matches a field's value: a string, or a list of them, which matches if any element
// does (as EventBridge matches an array in an event).
func matchField(alternatives []any, v any) bool {
	switch x := v.(type) {
	case string:
		return matchValue(alternatives, x)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok && matchValue(alternatives, s) {
				return true
			}
		}
	}
	return false
}

func matchValue(alternatives []any, v string) bool {
	for _, a := range alternatives {
		switch m := a.(type) {
		case string:
			if m == v {
				return true
			}
		case map[string]any:
			for op, arg := range m {
				s, _ := arg.(string)
				fold := false
				if ic, ok := arg.(map[string]any); ok && (op == "prefix" || op == "suffix") {
					// {"suffix": {"equals-ignore-case": "..."}}: the same match, ignoring case.
					s, fold = ic["equals-ignore-case"].(string), true
				}
				cased := func(x string) string {
					if fold {
						return strings.ToLower(x)
					}
					return x
				}
				switch op {
				case "prefix":
					if strings.HasPrefix(cased(v), cased(s)) {
						return true
					}
				case "suffix":
					if strings.HasSuffix(cased(v), cased(s)) {
						return true
					}
				case "equals-ignore-case":
					if strings.EqualFold(v, s) {
						return true
					}
				case "wildcard":
					re := "^" + strings.ReplaceAll(regexp.QuoteMeta(s), `\*`, ".*") + "$"
					if regexp.MustCompile(re).MatchString(v) {
						return true
					}
				default:
					panic("match operator " + op + " is not in this matcher")
				}
			}
		default:
			panic(fmt.Sprintf("match %v is not a string or an operator", a))
		}
	}
	return false
}

// TestMatchPattern: the matcher itself, so that a rule test cannot pass through a matcher that
// accepts everything.
func TestMatchPattern(t *testing.T) {
	pattern := map[string]any{"source": []any{"aws.s3"}, "detail": map[string]any{
		"eventName": []any{map[string]any{"prefix": "Put"}},
		"$or": []any{
			map[string]any{"requestParameters": map[string]any{"a": []any{"x", map[string]any{"suffix": "/y"}}}},
			map[string]any{"requestParameters": map[string]any{"b": []any{map[string]any{"wildcard": "*:f:z:*"}}}},
			map[string]any{"requestParameters": map[string]any{"c": []any{map[string]any{"suffix": map[string]any{"equals-ignore-case": "/Role-A"}}}}},
			map[string]any{"requestParameters": map[string]any{"d": []any{map[string]any{"equals-ignore-case": "abc"}}}},
		},
	}}
	ev := func(source, name, field, value string) map[string]any {
		return map[string]any{"source": source, "detail": map[string]any{"eventName": name,
			"requestParameters": map[string]any{field: value}}}
	}
	for _, tc := range []struct {
		event map[string]any
		want  bool
	}{
		{ev("aws.s3", "PutX", "a", "x"), true},
		{ev("aws.s3", "PutX", "a", "arn/y"), true},
		{ev("aws.s3", "PutX", "b", "arn:f:z:1"), true},
		{ev("aws.s3", "PutX", "b", "arn:f:z"), false},
		{ev("aws.s3", "PutX", "a", "xx"), false},
		{ev("aws.s3", "GetX", "a", "x"), false},
		{ev("aws.sqs", "PutX", "a", "x"), false},
		{ev("aws.s3", "PutX", "c", "x"), false},
		{ev("aws.s3", "PutX", "c", "arn:r:role/ROLE-a"), true},
		{ev("aws.s3", "PutX", "c", "arn:r:role/x-role-a"), false},
		{ev("aws.s3", "PutX", "a", "arn/Y"), false},
		{ev("aws.s3", "PutX", "d", "AbC"), true},
		{ev("aws.s3", "PutX", "d", "abcd"), false},
		{map[string]any{"source": "aws.s3", "detail": map[string]any{"eventName": "PutX",
			"requestParameters": map[string]any{"a": []any{"z", "x"}}}}, true},
		{map[string]any{"source": "aws.s3", "detail": map[string]any{"eventName": "PutX",
			"requestParameters": map[string]any{"a": []any{"z", "xx"}}}}, false},
	} {
		if got := matchPattern(pattern, tc.event); got != tc.want {
			t.Errorf("match %v = %v, want %v", tc.event, got, tc.want)
		}
	}
}

// cloudTrailCall is a CloudTrail management event as EventBridge delivers it.
func cloudTrailCall(source, eventSource, eventName string, params map[string]any) map[string]any {
	return map[string]any{
		"source": source, "detail-type": "AWS API Call via CloudTrail", "account": testAccount, "region": testRegion,
		"detail": map[string]any{"eventSource": eventSource, "eventName": eventName, "requestParameters": params},
	}
}

// TestSecurityRulesMatch: every rule on the boundary matches a call on its resource of this stack,
// as a caller may name it, and matches neither the same call on another resource nor a read.
func TestSecurityRulesMatch(t *testing.T) {
	s := synth(t, nil)
	patterns := securityRulePatterns(t, s)
	for _, tc := range securityRuleCases(t, s) {
		checkSecurityRule(t, s, patterns, tc)
	}
}

// securityRulePatterns is each security rule's event pattern by rule name,
// after checking that the stack has exactly securityRuleNames.
func securityRulePatterns(t *testing.T, s *synthesized) map[string]map[string]any {
	t.Helper()
	patterns := map[string]map[string]any{}
	for id, r := range s.resources("AWS::Events::Rule") {
		if p := props(r)["EventPattern"]; p != nil {
			patterns[logicalSuffix.ReplaceAllString(id, "")] = s.resolve(p).(map[string]any)
		}
	}
	var names []string
	for name := range patterns {
		names = append(names, name)
	}
	if sort.Strings(names); !slices.Equal(names, slices.Sorted(slices.Values(securityRuleNames))) {
		t.Errorf("security rules = %v, want %v", names, securityRuleNames)
	}
	return patterns
}

// ruleCall is one CloudTrail-recorded call, by event name and request parameters.
type ruleCall struct {
	name   string
	params map[string]any
}

// securityRuleCase is a rule with the calls it must match (ours) and the
// same calls elsewhere, or reads of ours, that it must not (others).
type securityRuleCase struct {
	rule, source, eventSource string
	ours, others              []ruleCall
}

// securityRuleCases is long because it is one table: each rule with the
// calls it must match and must not, after the few names its lines share.
func securityRuleCases(t *testing.T, s *synthesized) []securityRuleCase {
	ref := func(typ, construct string) string { return s.physical(s.constructID(t, typ, construct), "") }
	arnOf := func(typ, construct string) string { return s.physical(s.constructID(t, typ, construct), "Arn") }
	fnName := func(name string) string { return "resetledger-test-" + name }
	fnArn := func(name string) string {
		return "arn:aws:lambda:" + testRegion + ":" + testAccount + ":function:" + fnName(name)
	}
	queueURL := func(name string) string {
		return "https://sqs." + testRegion + ".amazonaws.com/" + testAccount + "/" + name
	}
	claimRole := s.physical(s.constructID(t, "AWS::IAM::Role", "ClaimRole"), "")
	operatorRole := s.physical(s.constructID(t, "AWS::IAM::Role", "LedgerOperatorRole"), "")
	protectID := s.physical(s.logicalID(t, "AWS::SMSVOICE::ProtectConfiguration", "SmsProtectConfiguration"), "ProtectConfigurationId")
	smsSet := "resetledger-test-events"
	return []securityRuleCase{
		{"KeyStateOrPolicyChanged", "aws.kms", "kms.amazonaws.com",
			[]ruleCall{{"PutKeyPolicy", map[string]any{"keyId": arnOf("AWS::KMS::Key", "LedgerKey")}},
				{"ScheduleKeyDeletion", map[string]any{"keyId": ref("AWS::KMS::Key", "DataEventsTrailKey")}}},
			[]ruleCall{{"PutKeyPolicy", map[string]any{"keyId": "arn:aws:kms:us-east-1:111122223333:key/0000"}},
				{"DescribeKey", map[string]any{"keyId": arnOf("AWS::KMS::Key", "LedgerKey")}}}},
		{"LedgerResourcePolicyChanged", "aws.dynamodb", "dynamodb.amazonaws.com",
			[]ruleCall{{"DeleteResourcePolicy", map[string]any{"resourceArn": arnOf("AWS::DynamoDB::Table", "LedgerTable")}}},
			[]ruleCall{{"DeleteResourcePolicy", map[string]any{"resourceArn": arnOf("AWS::DynamoDB::Table", "ContentTable")}}}},
		{"QueueChanged", "aws.sqs", "sqs.amazonaws.com",
			[]ruleCall{{"SetQueueAttributes", map[string]any{"queueUrl": queueURL(ref("AWS::SQS::Queue", "IntentQueue"))}},
				{"PurgeQueue", map[string]any{"queueUrl": "https://queue.amazonaws.com/" + testAccount + "/" + ref("AWS::SQS::Queue", "ProviderEventsQueue")}}},
			[]ruleCall{{"SetQueueAttributes", map[string]any{"queueUrl": queueURL("other-queue")}},
				{"GetQueueAttributes", map[string]any{"queueUrl": queueURL(ref("AWS::SQS::Queue", "IntentQueue"))}}}},
		{"ProviderEventsTopicChanged", "aws.sns", "sns.amazonaws.com",
			[]ruleCall{{"Subscribe", map[string]any{"topicArn": ref("AWS::SNS::Topic", "ProviderEventsTopic")}},
				{"Unsubscribe", map[string]any{"subscriptionArn": ref("AWS::SNS::Topic", "ProviderEventsTopic") + ":0f1e"}}},
			[]ruleCall{{"Subscribe", map[string]any{"topicArn": "arn:aws:sns:us-east-1:111122223333:other"}},
				{"GetTopicAttributes", map[string]any{"topicArn": ref("AWS::SNS::Topic", "ProviderEventsTopic")}}}},
		{"BucketChanged", "aws.s3", "s3.amazonaws.com",
			[]ruleCall{{"PutBucketPolicy", map[string]any{"bucketName": ref("AWS::S3::Bucket", "DataEventsTrailBucket")}},
				{"PutObjectLockConfiguration", map[string]any{"bucketName": ref("AWS::S3::Bucket", "DataEventsTrailBucket")}},
				{"PutBucketLifecycle", map[string]any{"bucketName": ref("AWS::S3::Bucket", "DataEventsTrailBucket")}},
				{"DeleteBucketPolicy", map[string]any{"bucketName": ref("AWS::S3::Bucket", "DataEventsTrailBucket")}}},
			[]ruleCall{{"PutBucketPolicy", map[string]any{"bucketName": "someone-elses-bucket"}},
				{"GetBucketPolicy", map[string]any{"bucketName": ref("AWS::S3::Bucket", "DataEventsTrailBucket")}}}},
		{"FunctionChanged", "aws.lambda", "lambda.amazonaws.com",
			[]ruleCall{{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": fnName("dispatch")}},
				{"UpdateFunctionCode20150331v2", map[string]any{"functionName": fnArn("claim")}},
				{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": testAccount + ":function:" + fnName("reconcile")}},
				{"AddPermission20150331v2", map[string]any{"functionName": fnName("operate") + ":live"}},
				{"RemovePermission20150331v2", map[string]any{"functionName": fnArn("operate") + ":1"}},
				{"PutResourcePolicy", map[string]any{"resourceArn": fnArn("operate")}},
				{"PublishVersion20150331", map[string]any{"functionName": fnName("dispatch")}},
				{"CreateAlias20150331", map[string]any{"functionName": fnArn("claim")}},
				{"DeleteFunction20150331", map[string]any{"functionName": fnName("events")}}},
			[]ruleCall{{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": "resetledger-test2-dispatch"}},
				{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": "x" + fnName("dispatch")}},
				{"UpdateFunctionCode20150331v2", map[string]any{"functionName": "arn:aws:lambda:us-east-1:111122223333:function:resetledger-tester-claim"}},
				{"UpdateFunctionCode20150331v2", map[string]any{"functionName": "arn:aws:lambda:us-east-1:111122223333:function:other"}},
				{"PutResourcePolicy", map[string]any{"resourceArn": "arn:aws:lambda:us-east-1:111122223333:function:other"}},
				{"GetFunctionConfiguration20150331v2", map[string]any{"functionName": fnName("dispatch")}},
				{"Invoke", map[string]any{"functionName": fnName("operate")}}}},
		// Every function role of the stack, and the others, in every spelling a caller may pass: the
		// ARN as CloudFormation made it, another partition, a path, another case; not a role whose
		// name ends the same, nor a read, nor a function created with a role of its own.
		{"RolePassedToFunction", "aws.lambda", "lambda.amazonaws.com",
			append(rolePassedCalls(t, s), []ruleCall{
				{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws-us-gov:iam::" + testAccount + ":role/" + claimRole}},
				{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws:iam::" + testAccount + ":role/team/" + claimRole}},
				{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": "other", "role": "arn:aws:iam::" + testAccount + ":role/" + strings.ToUpper(claimRole)}},
				{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws:iam::" + testAccount + ":role/" + operatorRole}},
			}...),
			[]ruleCall{{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws:iam::" + testAccount + ":role/insider"}},
				{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws:iam::" + testAccount + ":role/x" + claimRole}},
				{"CreateFunction20150331", map[string]any{"functionName": "insider", "role": "arn:aws:iam::" + testAccount + ":role/" + claimRole + "-copy"}},
				{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": "other", "timeout": 30}},
				{"GetFunction20150331v2", map[string]any{"functionName": fnName("claim"), "role": "arn:aws:iam::" + testAccount + ":role/" + claimRole}}}},
		{"RoleChanged", "aws.iam", "iam.amazonaws.com",
			[]ruleCall{{"PutRolePolicy", map[string]any{"roleName": claimRole, "policyName": "more"}},
				{"AttachRolePolicy", map[string]any{"roleName": claimRole}},
				{"UpdateAssumeRolePolicy", map[string]any{"roleName": operatorRole}}},
			[]ruleCall{{"PutRolePolicy", map[string]any{"roleName": "someone-else"}},
				{"GetRolePolicy", map[string]any{"roleName": claimRole}}}},
		{"SesConfigurationSetChanged", "aws.ses", "ses.amazonaws.com",
			[]ruleCall{{"UpdateConfigurationSetEventDestination", map[string]any{"configurationSetName": "resetledger-test-events"}},
				{"DeleteConfigurationSet", map[string]any{"configurationSetName": "resetledger-test-events"}},
				{"PutConfigurationSetSuppressionOptions", map[string]any{"configurationSetName": "resetledger-test-events"}}},
			[]ruleCall{{"UpdateConfigurationSetEventDestination", map[string]any{"configurationSetName": "other"}},
				{"GetConfigurationSetEventDestinations", map[string]any{"configurationSetName": "resetledger-test-events"}}}},
		{"SmsConfigurationSetChanged", "aws.sms-voice", "sms-voice.amazonaws.com",
			[]ruleCall{{"DeleteEventDestination", map[string]any{"configurationSetName": smsSet}},
				{"UpdateEventDestination", map[string]any{"configurationSetName": "arn:aws:sms-voice:us-east-1:111122223333:configuration-set/" + smsSet}}},
			[]ruleCall{{"DeleteEventDestination", map[string]any{"configurationSetName": "other"}},
				{"DescribeConfigurationSets", map[string]any{"configurationSetName": smsSet}}}},
		{"SmsProtectConfigurationChanged", "aws.sms-voice", "sms-voice.amazonaws.com",
			[]ruleCall{{"UpdateProtectConfigurationCountryRuleSet", map[string]any{"protectConfigurationId": protectID}},
				{"DeleteProtectConfiguration", map[string]any{"protectConfigurationId": "arn:aws:sms-voice:us-east-1:111122223333:protect-configuration/" + protectID}},
				{"DisassociateProtectConfiguration", map[string]any{"configurationSetName": smsSet, "protectConfigurationId": protectID}}},
			[]ruleCall{{"UpdateProtectConfigurationCountryRuleSet", map[string]any{"protectConfigurationId": "protect-other"}},
				{"GetProtectConfigurationCountryRuleSet", map[string]any{"protectConfigurationId": protectID}}}},
		{"DataEventsTrailChanged", "aws.cloudtrail", "cloudtrail.amazonaws.com",
			[]ruleCall{{"StopLogging", map[string]any{"name": testTrail}},
				{"DeleteTrail", map[string]any{"name": "arn:aws:cloudtrail:us-east-1:111122223333:trail/" + testTrail}},
				{"PutEventSelectors", map[string]any{"trailName": testTrail, "name": testTrail}}},
			[]ruleCall{{"StopLogging", map[string]any{"name": "organization-trail"}},
				{"GetTrailStatus", map[string]any{"name": testTrail}}}},
	}
}

// rolePassedCalls: a function created with each role the stack defines, named by the ARN
// CloudFormation gives it.
func rolePassedCalls(t *testing.T, s *synthesized) []ruleCall {
	t.Helper()
	var calls []ruleCall
	for id := range s.resources("AWS::IAM::Role") {
		calls = append(calls, ruleCall{"CreateFunction20150331", map[string]any{"functionName": "insider-" + id, "role": s.physical(id, "Arn")}})
	}
	if len(calls) < 9 {
		t.Fatalf("roles in the template: %d", len(calls))
	}
	return calls
}

// checkSecurityRule: the rule matches its calls and not the others, and has
// its alarm on lost deliveries, its target and its runbook row.
func checkSecurityRule(t *testing.T, s *synthesized, patterns map[string]map[string]any, tc securityRuleCase) {
	t.Helper()
	pattern, ok := patterns[tc.rule]
	if !ok {
		t.Errorf("no rule %s", tc.rule)
		return
	}
	for _, c := range tc.ours {
		if ev := cloudTrailCall(tc.source, tc.eventSource, c.name, c.params); !matchPattern(pattern, ev) {
			t.Errorf("%s does not match %s %v\npattern %s", tc.rule, c.name, c.params, mustJSON(pattern))
		}
	}
	for _, c := range tc.others {
		if ev := cloudTrailCall(tc.source, tc.eventSource, c.name, c.params); matchPattern(pattern, ev) {
			t.Errorf("%s matches %s %v, which is not this stack's or changes nothing", tc.rule, c.name, c.params)
		}
	}
	// A rule counts only through its alarm on lost deliveries and its runbook row (TestSecurityEvents,
	// TestRunbookCoversEveryAlarm); here, that each new one has both.
	if _, ok := s.alarmsByName()[tc.rule+"Undelivered"]; !ok {
		t.Errorf("%s has no %sUndelivered alarm", tc.rule, tc.rule)
	}
	r := props(s.resources("AWS::Events::Rule")[s.logicalID(t, "AWS::Events::Rule", tc.rule)])
	if targets := list(r["Targets"]); len(targets) != 1 || targets[0].(map[string]any)["Arn"] != testTopic ||
		label(targets[0].(map[string]any)["RoleArn"]) != "SecurityEventsRole" {
		t.Errorf("%s targets = %s, want the alarm topic through SecurityEventsRole", tc.rule, mustJSON(r["Targets"]))
	}
	if !strings.Contains(r["Description"].(string), "Runbook: docs/operations.md, Alarms and what to do, "+tc.rule+".") {
		t.Errorf("%s description does not point at its runbook row: %v", tc.rule, r["Description"])
	}
}

// TestRoleRuleRegionWarning: the synth warns that RoleChanged sees IAM calls only in us-east-1.
func TestRoleRuleRegionWarning(t *testing.T) {
	s := synth(t, nil)
	found := 0
	for range *assertions.Annotations_FromStack(s.stack).FindWarning(jsii.String("*"),
		assertions.Match_StringLikeRegexp(jsii.String("RoleChanged sees IAM calls only"))) {
		found++
	}
	if found != 1 {
		t.Errorf("warnings on RoleChanged's Region = %d, want 1", found)
	}
	deploy, err := os.ReadFile("../docs/deploy.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(deploy), "## The boundary moving is seen") {
		t.Error("docs/deploy.md has no section The boundary moving is seen, which the warning points at")
	}
}

// TestOperatorArnsAndTrailRequired: a stage other than the local one does not synthesize without
// operatorArns or without dataEventsTrail, and the error names the missing one, whether the
// props are built in code or read from context as `cdk synth` reads them; operatorArns takes IAM
// role, user and session ARNs only; the local stage synthesizes without either, as
// deploy-local.sh deploys it; and the Makefile's synth of a non-local stage names both.
func TestOperatorArnsAndTrailRequired(t *testing.T) {
	for _, missing := range []string{"operatorArns", "dataEventsTrail"} {
		for _, stage := range []string{"dev", "prod"} {
			p := testProps(t)
			p.Prefix = "resetledger-" + stage
			ctx := baseContext(t)
			ctx["stage"] = stage
			delete(ctx, missing)
			switch missing {
			case "operatorArns":
				p.OperatorPrincipalArns = nil
			case "dataEventsTrail":
				p.DataEventsTrail = ""
			}
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), missing+" is not set") {
				t.Errorf("stage %s without %s: Validate = %v, want an error naming %s", stage, missing, err, missing)
			}
			if _, err := stageFrom(ctx); err == nil || !strings.Contains(err.Error(), missing+" is not set") {
				t.Errorf("stage %s from context without %s: %v, want an error naming %s", stage, missing, err, missing)
			}
			if strings.Contains(fmt.Sprint(err), "producerArns") {
				t.Errorf("stage %s without %s also reports producerArns: %v", stage, missing, err)
			}
		}
	}
	for _, arn := range []string{"*", "arn:aws:iam::111122223333:root", "111122223333", "arn:aws:iam::*:role/oncall"} {
		p := testProps(t)
		p.OperatorPrincipalArns = []string{oncallARN, arn}
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "operatorArns") {
			t.Errorf("operatorArns %q: Validate = %v, want an error naming operatorArns", arn, err)
		}
	}
	for _, arn := range []string{"arn:aws:iam::111122223333:user/alice", "arn:aws:sts::111122223333:assumed-role/oncall/alice",
		"arn:aws:iam::111122223333:role/team/oncall"} {
		p := testProps(t)
		p.OperatorPrincipalArns = []string{arn}
		if err := p.Validate(); err != nil {
			t.Errorf("operatorArns %q: Validate = %v", arn, err)
		}
	}
	open := testProps(t)
	open.SkipOperatorDenies = true
	if err := open.Validate(); err == nil || !strings.Contains(err.Error(), "operatorDenies=false") {
		t.Errorf("a non-local stage with operatorDenies=false: Validate = %v, want an error naming it", err)
	}

	local := synth(t, func(p *LedgerStackProps) {
		p.OperatorPrincipalArns, p.DataEventsTrail, p.LocalStage, p.SkipOperatorDenies = nil, "", true, true
	})
	if n := len(local.resources("AWS::CloudTrail::Trail")); n != 0 {
		t.Errorf("local stage without dataEventsTrail: %d trails", n)
	}
	lc := localContext(t)
	if lc["localStage"] != "true" || lc["operatorArns"] != "" || lc["dataEventsTrail"] != "" {
		t.Errorf("deploy-local.sh context %v: want localStage=true and neither operatorArns nor dataEventsTrail", lc)
	}

	raw, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"synth", "lint-template"} {
		_, recipe, ok := strings.Cut(string(raw), "\n"+target+":")
		if recipe, _, _ = strings.Cut(recipe, "\n\n"); !ok {
			t.Fatalf("Makefile has no %s target", target)
		}
		for _, key := range []string{"producerArns", "operatorArns", "dataEventsTrail"} {
			if !strings.Contains(recipe, "-c "+key+"=") {
				t.Errorf("make %s synthesizes a non-local stage without -c %s=", target, key)
			}
		}
	}
}

// TestSecurityRulePatternSizes: every rule's pattern, with its names resolved at the longest a
// stage name and CloudFormation's generated names make them, stays within EventBridge's default
// event pattern size of 2048 characters (a quota increase can raise it to 4096; a deploy must not
// depend on one). FunctionChanged matches the functions by the stack's prefix, not one by one.
func TestSecurityRulePatternSizes(t *testing.T) {
	stage := "abcdefghijklmnopqrstuvwxy" // the longest stage name context accepts (stageName)
	if !stageName.MatchString(stage) || stageName.MatchString(stage+"z") {
		t.Fatalf("stage %q is not the longest stage name", stage)
	}
	s := synth(t, func(p *LedgerStackProps) { p.Prefix = "resetledger-" + stage })
	n := 0
	for id, r := range s.resources("AWS::Events::Rule") {
		p := props(r)["EventPattern"]
		if p == nil {
			continue
		}
		n++
		if size := len(mustJSON(s.resolve(p))); size > 2048 {
			t.Errorf("%s: pattern of %d characters, over EventBridge's default 2048", id, size)
		}
		if strings.HasPrefix(id, "FunctionChanged") {
			if got := mustJSON(p.(map[string]any)["detail"].(map[string]any)["$or"]); strings.Contains(got, "Ref") {
				t.Errorf("FunctionChanged names functions one by one: %s", got)
			}
		}
	}
	if n != len(securityRuleNames) {
		t.Errorf("%d security rules, want %d", n, len(securityRuleNames))
	}
}
