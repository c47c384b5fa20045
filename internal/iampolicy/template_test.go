package iampolicy

import (
	"errors"
	"strings"
	"testing"
)

// A template with each kind of resource policy the loader reads: a key
// policy, a queue policy, a topic policy and a table's resource policy, and a
// role with an inline policy and one of the template's managed policies.
const testTemplate = `{"Resources":{
 "TopicAB12CD34":{"Type":"AWS::SNS::Topic","Properties":{}},
 "SetAB12CD34":{"Type":"AWS::SES::ConfigurationSet","Properties":{"Name":"stage-events"}},
 "TopicPolicyAB12CD34":{"Type":"AWS::SNS::TopicPolicy","Properties":{
   "Topics":[{"Ref":"TopicAB12CD34"}],
   "PolicyDocument":{"Statement":[
     {"Sid":"SesPublishes","Effect":"Allow","Principal":{"Service":"ses.amazonaws.com"},"Action":"sns:Publish","Resource":{"Ref":"TopicAB12CD34"},
      "Condition":{"StringEquals":{"aws:SourceArn":{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":ses:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":configuration-set/",{"Ref":"SetAB12CD34"}]]}}}},
     {"Sid":"OnlyProvidersPublish","Effect":"Deny","Principal":"*","Action":"sns:Publish","Resource":{"Ref":"TopicAB12CD34"},
      "Condition":{"ArnNotEquals":{"aws:SourceArn":{"Fn::Join":["",["arn:aws:ses:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":configuration-set/",{"Ref":"SetAB12CD34"}]]}}}}]}}},
 "TableAB12CD34":{"Type":"AWS::DynamoDB::Table","Properties":{
   "ResourcePolicy":{"PolicyDocument":{"Statement":[
     {"Sid":"OnlyLedgerWriters","Effect":"Deny","Principal":{"AWS":"*"},"Action":["dynamodb:PutItem","dynamodb:UpdateItem","dynamodb:Query"],"Resource":"*",
      "Condition":{"ArnNotEquals":{"aws:PrincipalArn":[{"Fn::GetAtt":["WriterRoleAB12CD34","Arn"]}]}}}]}}}},
 "KeyAB12CD34":{"Type":"AWS::KMS::Key","Properties":{"KeyPolicy":{"Statement":[
   {"Effect":"Allow","Principal":{"AWS":{"Fn::Join":["",["arn:aws:iam::",{"Ref":"AWS::AccountId"},":root"]]}},"Action":"kms:*","Resource":"*"}]}}},
 "QueueAB12CD34":{"Type":"AWS::SQS::Queue","Properties":{}},
 "QueuePolicyAB12CD34":{"Type":"AWS::SQS::QueuePolicy","Properties":{"Queues":[{"Ref":"QueueAB12CD34"}],
   "PolicyDocument":{"Statement":[{"Sid":"OnlyTopicDelivers","Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"*",
     "Condition":{"ArnNotEquals":{"aws:SourceArn":{"Ref":"TopicAB12CD34"}}}}]}}},
 "OperatorPolicyAB12CD34":{"Type":"AWS::IAM::ManagedPolicy","Properties":{"PolicyDocument":{"Statement":[
   {"Effect":"Allow","Action":["dynamodb:GetItem","dynamodb:UpdateItem"],"Resource":{"Fn::GetAtt":["TableAB12CD34","Arn"]}}]}}},
 "WriterRoleAB12CD34":{"Type":"AWS::IAM::Role","Properties":{
   "ManagedPolicyArns":[{"Ref":"OperatorPolicyAB12CD34"}],
   "Policies":[{"PolicyName":"p","PolicyDocument":{"Statement":[{"Effect":"Allow","Action":"dynamodb:PutItem","Resource":"*"}]}}]}}
}}`

var pseudo = Pseudo{Region: "us-east-1", Account: account}

func mustLoad(t *testing.T, tpl string) *Stack {
	t.Helper()
	s, err := LoadTemplate([]byte(tpl), pseudo)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLoadResourcePolicies(t *testing.T) {
	s := mustLoad(t, testTemplate)
	const (
		topic  = "arn:aws:sns:us-east-1:111122223333:Topic"
		queue  = "arn:aws:sqs:us-east-1:111122223333:Queue"
		tbl    = "arn:aws:dynamodb:us-east-1:111122223333:table/Table"
		writer = "arn:aws:iam::111122223333:role/WriterRole"
		sesSet = "arn:aws:ses:us-east-1:111122223333:configuration-set/stage-events"
	)
	everything := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":["sqs:*","sns:*","dynamodb:*"],"Resource":"*"}]}`)
	ses := func(source string) Request {
		return Request{Service: "ses.amazonaws.com", Action: "sns:Publish", Resource: topic,
			Context: map[string]string{"aws:SourceArn": source, "aws:SourceAccount": account}}
	}
	attacker := func(action, resource string) Request {
		return Request{Principal: "arn:aws:iam::111122223333:role/attacker", Account: account, Action: action, Resource: resource}
	}
	tests := []struct {
		name     string
		req      Request
		identity []Policy
		want     bool
	}{
		// The configuration set's Ref resolves to its Name, not its construct name.
		{"SES publishes for its configuration set", ses(sesSet), nil, true},
		{"SES publishes for another set", ses(strings.Replace(sesSet, "stage-events", "other", 1)), nil, false},
		{"the topic policy's deny meets another publisher", attacker("sns:Publish", topic), []Policy{everything}, false},
		{"the topic policy does not cover other actions", attacker("sns:Subscribe", topic), []Policy{everything}, true},
		{"the queue policy's deny meets another sender", attacker("sqs:SendMessage", queue), []Policy{everything}, false},
		{"the table's resource policy denies another writer", attacker("dynamodb:PutItem", tbl), []Policy{everything}, false},
		{"the table's resource policy governs its indexes", attacker("dynamodb:Query", tbl+"/index/open"), []Policy{everything}, false},
		{"the table's resource policy allows what it does not deny", attacker("dynamodb:GetItem", tbl), []Policy{everything}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := s.Authorize(tc.req, tc.identity)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tc.want {
				t.Fatalf("allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
		})
	}
	// The writer role has its inline policy and the template's managed policy.
	for action, want := range map[string]bool{"dynamodb:PutItem": true, "dynamodb:UpdateItem": true, "dynamodb:GetItem": true, "dynamodb:DeleteItem": false} {
		d, err := s.Decide(writer, action, tbl, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want {
			t.Errorf("writer %s: allowed = %v (%s), want %v", action, d.Allowed, d.Reason, want)
		}
	}
	for typ, name := range map[string]string{"AWS::SNS::Topic": "Topic", "AWS::SQS::Queue": "Queue", "AWS::DynamoDB::Table": "Table", "AWS::IAM::Role": "WriterRole"} {
		arn, err := s.ARN(typ, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]string{"Topic": topic, "Queue": queue, "Table": tbl, "WriterRole": writer}[name]; arn != want {
			t.Errorf("ARN(%s, %s) = %s, want %s", typ, name, arn, want)
		}
	}
	if _, err := s.ARN("AWS::KMS::Key", "Missing"); err == nil {
		t.Error("ARN of a missing resource: no error")
	}
}

func TestWithoutStatement(t *testing.T) {
	s := mustLoad(t, testTemplate)
	const queue = "arn:aws:sqs:us-east-1:111122223333:Queue"
	everything := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":"sqs:*","Resource":"*"}]}`)
	req := Request{Principal: "arn:aws:iam::111122223333:role/attacker", Account: account, Action: "sqs:SendMessage", Resource: queue}
	without, err := s.WithoutStatement(queue, "OnlyTopicDelivers")
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		s    *Stack
		want bool
	}{"with the deny": {s, false}, "without it": {without, true}} {
		d, err := tc.s.Authorize(req, []Policy{everything})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != tc.want {
			t.Errorf("%s: allowed = %v (%s), want %v", name, d.Allowed, d.Reason, tc.want)
		}
	}
	if _, err := s.WithoutStatement(queue, "NoSuchSid"); !errors.Is(err, ErrNoStatement) {
		t.Errorf("missing Sid: err = %v, want ErrNoStatement", err)
	}
	if _, err := s.WithoutStatement("arn:aws:sqs:us-east-1:111122223333:Nothing", "OnlyTopicDelivers"); !errors.Is(err, ErrNoStatement) {
		t.Errorf("resource without a policy: err = %v, want ErrNoStatement", err)
	}
}

// What the loader cannot evaluate is an error: a policy document it does not
// have, or two policies where CloudFormation keeps one.
func TestLoadUnsupported(t *testing.T) {
	for name, tpl := range map[string]string{
		"two queue policies on one queue": `{"Resources":{"Q":{"Type":"AWS::SQS::Queue","Properties":{}},
			"P1":{"Type":"AWS::SQS::QueuePolicy","Properties":{"Queues":[{"Ref":"Q"}],"PolicyDocument":{"Statement":[]}}},
			"P2":{"Type":"AWS::SQS::QueuePolicy","Properties":{"Queues":[{"Ref":"Q"}],"PolicyDocument":{"Statement":[]}}}}}`,
		"two topic policies on one topic": `{"Resources":{"T":{"Type":"AWS::SNS::Topic","Properties":{}},
			"P1":{"Type":"AWS::SNS::TopicPolicy","Properties":{"Topics":[{"Ref":"T"}],"PolicyDocument":{"Statement":[]}}},
			"P2":{"Type":"AWS::SNS::TopicPolicy","Properties":{"Topics":[{"Ref":"T"}],"PolicyDocument":{"Statement":[]}}}}}`,
	} {
		if _, err := LoadTemplate([]byte(tpl), pseudo); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

// A role with an AWS managed policy loads (the rest of the template can be
// evaluated), but its own requests cannot be decided.
func TestAWSManagedPolicy(t *testing.T) {
	s := mustLoad(t, `{"Resources":{"BackupRoleAB12CD34":{"Type":"AWS::IAM::Role","Properties":{
		"ManagedPolicyArns":[{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup"]]}],
		"Policies":[{"PolicyName":"p","PolicyDocument":{"Statement":[{"Effect":"Allow","Action":"dynamodb:GetItem","Resource":"*"}]}}]}}}}`)
	_, err := s.Decide("arn:aws:iam::111122223333:role/BackupRole", "dynamodb:GetItem", "arn:aws:dynamodb:us-east-1:111122223333:table/t", nil)
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("a request of a role with an AWS managed policy: err = %v, want ErrUnsupported", err)
	}
}

// TestLoadLambdaPolicies: a function's AWS::Lambda::ResourcePolicy is its resource policy, Denies
// included; AWS::Lambda::Permission resources add one Allow each, with the conditions their
// FunctionUrlAuthType, InvokedViaFunctionUrl and SourceArn set.
func TestLoadLambdaPolicies(t *testing.T) {
	const tpl = `{"Resources":{
 "CallerAB12CD34":{"Type":"AWS::IAM::Role","Properties":{"Policies":[{"PolicyName":"p","PolicyDocument":{"Statement":[
   {"Effect":"Allow","Action":"lambda:*","Resource":"*"}]}}]}},
 "FnAB12CD34":{"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"op","Role":{"Fn::GetAtt":["CallerAB12CD34","Arn"]}}},
 "FnPolicyAB12CD34":{"Type":"AWS::Lambda::ResourcePolicy","Properties":{"ResourceArn":{"Fn::GetAtt":["FnAB12CD34","Arn"]},
   "PolicyDocument":{"Statement":[
     {"Sid":"OnlyThroughTheUrl","Effect":"Deny","Principal":{"AWS":"*"},"Action":"lambda:InvokeFunction","Resource":{"Fn::GetAtt":["FnAB12CD34","Arn"]},
      "Condition":{"BoolIfExists":{"lambda:InvokedViaFunctionUrl":"false"}}}]}}},
 "OtherAB12CD34":{"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"other","Role":{"Fn::GetAtt":["CallerAB12CD34","Arn"]}}},
 "RuleAB12CD34":{"Type":"AWS::Events::Rule","Properties":{}},
 "PermAB12CD34":{"Type":"AWS::Lambda::Permission","Properties":{"FunctionName":{"Fn::GetAtt":["OtherAB12CD34","Arn"]},
   "Action":"lambda:InvokeFunction","Principal":"events.amazonaws.com","SourceArn":{"Fn::GetAtt":["RuleAB12CD34","Arn"]}}},
 "UrlPermAB12CD34":{"Type":"AWS::Lambda::Permission","Properties":{"FunctionName":{"Fn::GetAtt":["OtherAB12CD34","Arn"]},
   "Action":"lambda:InvokeFunctionUrl","Principal":"arn:aws:iam::` + account + `:role/oncall","FunctionUrlAuthType":"AWS_IAM"}}
}}`
	s, err := LoadTemplate([]byte(tpl), pseudo)
	if err != nil {
		t.Fatal(err)
	}
	fn := "arn:aws:lambda:us-east-1:" + account + ":function:op"
	role := "arn:aws:iam::" + account + ":role/Caller"
	for _, tc := range []struct {
		ctx     map[string]string
		allowed bool
	}{
		{nil, false}, // a direct invocation: denied whatever the role allows
		{map[string]string{"lambda:InvokedViaFunctionUrl": "true"}, true},
	} {
		d, err := s.Decide(role, "lambda:InvokeFunction", fn, tc.ctx)
		if err != nil || d.Allowed != tc.allowed {
			t.Errorf("InvokeFunction %v: %+v %v, want allowed=%v", tc.ctx, d, err, tc.allowed)
		}
	}
	other := "arn:aws:lambda:us-east-1:" + account + ":function:other"
	rule := "arn:aws:events:us-east-1:" + account + ":rule/Rule"
	for _, tc := range []struct {
		req     Request
		allowed bool
	}{
		{Request{Service: "events.amazonaws.com", Action: "lambda:InvokeFunction", Resource: other, Context: map[string]string{"aws:SourceArn": rule}}, true},
		{Request{Service: "events.amazonaws.com", Action: "lambda:InvokeFunction", Resource: other, Context: map[string]string{"aws:SourceArn": rule + "-x"}}, false},
		{Request{Principal: "arn:aws:iam::" + account + ":role/oncall", Account: account, Action: "lambda:InvokeFunctionUrl", Resource: other,
			Context: map[string]string{"lambda:FunctionUrlAuthType": "AWS_IAM"}}, true},
		{Request{Principal: "arn:aws:iam::" + account + ":role/oncall", Account: account, Action: "lambda:InvokeFunctionUrl", Resource: other,
			Context: map[string]string{"lambda:FunctionUrlAuthType": "NONE"}}, false},
	} {
		d, err := s.Authorize(tc.req, nil)
		if err != nil || d.Allowed != tc.allowed {
			t.Errorf("%s %s %v: %+v %v, want allowed=%v", tc.req.Principal+tc.req.Service, tc.req.Action, tc.req.Context, d, err, tc.allowed)
		}
	}
}

// TestLoadBucketPolicies: an AWS::S3::BucketPolicy is its bucket's resource policy, and governs
// the bucket's objects (arn:aws:s3:::<bucket>/<key>): its Deny wins over a role's s3:*.
func TestLoadBucketPolicies(t *testing.T) {
	const tpl = `{"Resources":{
 "CallerAB12CD34":{"Type":"AWS::IAM::Role","Properties":{"Policies":[{"PolicyName":"p","PolicyDocument":{"Statement":[
   {"Effect":"Allow","Action":"s3:*","Resource":"*"}]}}]}},
 "BucketAB12CD34":{"Type":"AWS::S3::Bucket","Properties":{}},
 "BucketPolicyAB12CD34":{"Type":"AWS::S3::BucketPolicy","Properties":{"Bucket":{"Ref":"BucketAB12CD34"},
   "PolicyDocument":{"Statement":[
     {"Sid":"NoDeletes","Effect":"Deny","Principal":{"AWS":"*"},"Action":"s3:DeleteObject",
      "Resource":{"Fn::Join":["",[{"Fn::GetAtt":["BucketAB12CD34","Arn"]},"/*"]]}}]}}}
}}`
	s, err := LoadTemplate([]byte(tpl), pseudo)
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := s.ARN("AWS::S3::Bucket", "Bucket")
	if err != nil || bucket != "arn:aws:s3:::Bucket" {
		t.Fatalf("bucket ARN = %q, %v", bucket, err)
	}
	role := "arn:aws:iam::" + account + ":role/Caller"
	for _, tc := range []struct {
		action, resource string
		allowed          bool
	}{
		{"s3:DeleteObject", bucket + "/digests/1.json", false},
		{"s3:GetObject", bucket + "/digests/1.json", true},
		{"s3:DeleteObject", "arn:aws:s3:::other/digests/1.json", true},
	} {
		d, err := s.Decide(role, tc.action, tc.resource, nil)
		if err != nil || d.Allowed != tc.allowed {
			t.Errorf("%s %s: %+v %v, want allowed=%v", tc.action, tc.resource, d, err, tc.allowed)
		}
	}
	without, err := s.WithoutStatement(bucket, "NoDeletes")
	if err != nil {
		t.Fatal(err)
	}
	if d, err := without.Decide(role, "s3:DeleteObject", bucket+"/digests/1.json", nil); err != nil || !d.Allowed {
		t.Errorf("without NoDeletes: %+v %v, want allowed", d, err)
	}
}

// A function whose resource policy denies every invocation by an IAM
// principal, once on the unqualified ARN only and once on the function and
// its qualifiers; and a role that denies everything asked for by a function
// other than its own (lambda:SourceFunctionArn) when the key is there.
const lambdaTemplate = `{"Resources":{
 "OneRoleAB12CD34":{"Type":"AWS::IAM::Role","Properties":{"Policies":[
   {"PolicyName":"own","PolicyDocument":{"Statement":[{"Sid":"OnlyThroughItsFunction","Effect":"Deny","Action":"*","Resource":"*",
     "Condition":{"ArnNotEquals":{"lambda:SourceFunctionArn":{"Fn::Join":["",["arn:aws:lambda:",{"Ref":"AWS::Region"},":",{"Ref":"AWS::AccountId"},":function:one"]]}},
       "Null":{"lambda:SourceFunctionArn":"false"}}}]}},
   {"PolicyName":"grants","PolicyDocument":{"Statement":[{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}]}}]}},
 "OneAB12CD34":{"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"one","Role":{"Fn::GetAtt":["OneRoleAB12CD34","Arn"]}}},
 "TwoAB12CD34":{"Type":"AWS::Lambda::Function","Properties":{"FunctionName":"two","Role":{"Fn::GetAtt":["OneRoleAB12CD34","Arn"]}}},
 "OnePolicyAB12CD34":{"Type":"AWS::Lambda::ResourcePolicy","Properties":{"ResourceArn":{"Fn::GetAtt":["OneAB12CD34","Arn"]},
   "PolicyDocument":{"Statement":[{"Sid":"NoInvoke","Effect":"Deny","Principal":"*","Action":"lambda:InvokeFunction",
     "Resource":[{"Fn::GetAtt":["OneAB12CD34","Arn"]},{"Fn::Join":["",[{"Fn::GetAtt":["OneAB12CD34","Arn"]},":*"]]}],
     "Condition":{"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}}]}}},
 "TwoPolicyAB12CD34":{"Type":"AWS::Lambda::ResourcePolicy","Properties":{"ResourceArn":{"Fn::GetAtt":["TwoAB12CD34","Arn"]},
   "PolicyDocument":{"Statement":[{"Sid":"NoInvoke","Effect":"Deny","Principal":"*","Action":"lambda:InvokeFunction",
     "Resource":{"Fn::GetAtt":["TwoAB12CD34","Arn"]}}]}}}
}}`

// TestQualifiedInvocation: an invocation of function:F:Q meets F's policy with
// the qualified ARN as its resource, so a Deny naming only the unqualified ARN
// does not stop it, and one that also names F:* does.
func TestQualifiedInvocation(t *testing.T) {
	s, err := LoadTemplate([]byte(lambdaTemplate), pseudo)
	if err != nil {
		t.Fatal(err)
	}
	invoker := []Policy{{Source: "invoker", Statements: []Statement{{Effect: Allow, Action: []string{"lambda:InvokeFunction"}, Resource: []string{"*"}}}}}
	fn := "arn:aws:lambda:us-east-1:" + account + ":function:"
	for _, tc := range []struct {
		resource string
		allowed  bool
	}{
		{fn + "one", false}, {fn + "one:$LATEST", false}, {fn + "one:7", false},
		{fn + "two", false}, {fn + "two:$LATEST", true},
		{fn + "three", true},
	} {
		req := Request{Principal: "arn:aws:iam::" + account + ":role/insider", Account: account, Action: "lambda:InvokeFunction", Resource: tc.resource}
		d, err := s.Authorize(req, invoker)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != tc.allowed {
			t.Errorf("invoke %s: allowed %v (%s), want %v", tc.resource, d.Allowed, d.Reason, tc.allowed)
		}
	}
	if p := s.ResourcePolicy(fn + "one:$LATEST"); p == nil || p != s.ResourcePolicy(fn+"one") {
		t.Errorf("the qualified ARN's policy is not the function's")
	}
}

// TestWithoutRoleStatement: the role's Deny on lambda:SourceFunctionArn stops
// a request made by another function's code (the key present, not its own),
// not its own function's nor one without the key (a call Lambda makes with
// the role outside the function); without the statement the other
// function's request is allowed; the stack itself is unchanged.
func TestWithoutRoleStatement(t *testing.T) {
	s, err := LoadTemplate([]byte(lambdaTemplate), pseudo)
	if err != nil {
		t.Fatal(err)
	}
	role := "arn:aws:iam::" + account + ":role/OneRole"
	queue := "arn:aws:sqs:us-east-1:" + account + ":q"
	from := func(fn string) map[string]string {
		if fn == "" {
			return nil
		}
		return map[string]string{"lambda:SourceFunctionArn": "arn:aws:lambda:us-east-1:" + account + ":function:" + fn}
	}
	decide := func(s *Stack, fn string) Decision {
		t.Helper()
		d, err := s.Decide(role, "sqs:SendMessage", queue, from(fn))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for fn, want := range map[string]bool{"one": true, "": true, "two": false, "one-copy": false} {
		if d := decide(s, fn); d.Allowed != want {
			t.Errorf("from function %q: allowed %v (%s), want %v", fn, d.Allowed, d.Reason, want)
		}
	}
	if d := decide(s, "two"); !strings.HasSuffix(d.Reason, " statement OnlyThroughItsFunction") {
		t.Errorf("from another function: %s, want denied by OnlyThroughItsFunction", d.Reason)
	}
	without, err := s.WithoutRoleStatement(role, "OnlyThroughItsFunction")
	if err != nil {
		t.Fatal(err)
	}
	if d := decide(without, "two"); !d.Allowed {
		t.Errorf("without the Deny, from another function: %s, want allowed", d.Reason)
	}
	if d := decide(s, "two"); d.Allowed {
		t.Error("WithoutRoleStatement changed the stack it was called on")
	}
	if _, err := s.WithoutRoleStatement(role, "NoSuchSid"); !errors.Is(err, ErrNoStatement) {
		t.Errorf("missing Sid: %v, want ErrNoStatement", err)
	}
	if _, err := s.WithoutRoleStatement(role+"-other", "OnlyThroughItsFunction"); err == nil {
		t.Error("unknown role: no error")
	}
}
