package iampolicy

import (
	"encoding/json"
	"errors"
	"testing"
)

func mustPolicy(t *testing.T, src string) Policy {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	p, err := ParsePolicy("test", doc)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	role    = "arn:aws:iam::111122223333:role/dispatch"
	other   = "arn:aws:iam::111122223333:role/claim"
	table   = "arn:aws:dynamodb:us-east-1:111122223333:table/ledger"
	keyARN  = "arn:aws:kms:us-east-1:111122223333:key/k1"
	account = "111122223333"
)

// Known allow and deny cases, each as AWS documents the evaluation logic.
func TestEvaluate(t *testing.T) {
	identity := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Action":["dynamodb:GetItem","dynamodb:Update*"],"Resource":"`+table+`"},
		{"Effect":"Allow","Action":"dynamodb:Query","Resource":"`+table+`/index/*"},
		{"Effect":"Allow","Action":"ses:SendEmail","Resource":"arn:aws:ses:us-east-1:111122223333:identity/example.com",
		 "Condition":{"StringEquals":{"ses:FromAddress":"no-reply@example.com"}}},
		{"Effect":"Allow","NotAction":"iam:*","Resource":"arn:aws:sqs:us-east-1:111122223333:q?"},
		{"Effect":"Deny","Action":"dynamodb:UpdateTable","Resource":"*"},
		{"Effect":"Allow","Action":"kms:Decrypt","Resource":"`+keyARN+`"},
		{"Effect":"Allow","Action":"logs:PutLogEvents","Resource":"arn:aws:logs:us-east-1:111122223333:log-group:/aws/lambda/f:*"}
	]}`)
	keyPolicy := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:root"},"Action":"kms:*","Resource":"*"},
		{"Sid":"OnlySenders","Effect":"Deny","Principal":{"AWS":"*"},"Action":"kms:Decrypt","Resource":"*",
		 "Condition":{"ArnNotEquals":{"aws:PrincipalArn":["`+role+`"]}}},
		{"Effect":"Allow","Principal":{"AWS":"`+other+`"},"Action":"kms:GenerateDataKey","Resource":"*",
		 "Condition":{"StringEquals":{"kms:EncryptionContext:purpose":"reset"}}}
	]}`)
	noDelegation := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:role/admin"},"Action":"kms:*","Resource":"*"}]}`)

	tests := []struct {
		name      string
		principal string
		action    string
		resource  string
		ctx       map[string]string
		resPolicy *Policy
		kms       bool
		want      bool
	}{
		{"listed action", role, "dynamodb:GetItem", table, nil, nil, false, true},
		{"action names are case-insensitive", role, "DynamoDB:getitem", table, nil, nil, false, true},
		{"action wildcard", role, "dynamodb:UpdateItem", table, nil, nil, false, true},
		{"action not granted", role, "dynamodb:BatchGetItem", table, nil, nil, false, false},
		{"table grant does not cover an index", role, "dynamodb:GetItem", table + "/index/open", nil, nil, false, false},
		{"index wildcard", role, "dynamodb:Query", table + "/index/open", nil, nil, false, true},
		{"index grant does not cover the table", role, "dynamodb:Query", table, nil, nil, false, false},
		{"other table", role, "dynamodb:GetItem", table + "2", nil, nil, false, false},
		{"explicit deny wins over NotAction allow", role, "dynamodb:UpdateTable", "arn:aws:sqs:us-east-1:111122223333:q1", nil, nil, false, false},
		{"NotAction allows the rest", role, "sqs:SendMessage", "arn:aws:sqs:us-east-1:111122223333:q1", nil, nil, false, true},
		{"NotAction excludes", role, "iam:PassRole", "arn:aws:sqs:us-east-1:111122223333:q1", nil, nil, false, false},
		{"? matches exactly one character", role, "sqs:SendMessage", "arn:aws:sqs:us-east-1:111122223333:q12", nil, nil, false, false},
		{"condition met", role, "ses:SendEmail", "arn:aws:ses:us-east-1:111122223333:identity/example.com",
			map[string]string{"ses:FromAddress": "no-reply@example.com"}, nil, false, true},
		{"condition key names are case-insensitive", role, "ses:SendEmail", "arn:aws:ses:us-east-1:111122223333:identity/example.com",
			map[string]string{"SES:fromaddress": "no-reply@example.com"}, nil, false, true},
		{"condition value differs", role, "ses:SendEmail", "arn:aws:ses:us-east-1:111122223333:identity/example.com",
			map[string]string{"ses:FromAddress": "ceo@example.com"}, nil, false, false},
		{"condition key absent", role, "ses:SendEmail", "arn:aws:ses:us-east-1:111122223333:identity/example.com", nil, nil, false, false},
		{"log stream under the group wildcard", role, "logs:PutLogEvents", "arn:aws:logs:us-east-1:111122223333:log-group:/aws/lambda/f:log-stream:x", nil, nil, false, true},
		{"kms: identity allow and key delegates", role, "kms:Decrypt", keyARN, nil, &keyPolicy, true, true},
		{"kms: key policy deny for other roles", other, "kms:Decrypt", keyARN, nil, &keyPolicy, true, false},
		{"kms: identity allow without key delegation", role, "kms:Decrypt", keyARN, nil, &noDelegation, true, false},
		{"kms: key policy names the principal", other, "kms:GenerateDataKey", keyARN,
			map[string]string{"kms:EncryptionContext:purpose": "reset"}, &keyPolicy, true, true},
		{"kms: key policy condition unmet, no identity allow", other, "kms:GenerateDataKey", keyARN,
			map[string]string{"kms:EncryptionContext:purpose": "other"}, &keyPolicy, true, false},
		{"kms: no key policy statement, no identity allow", other, "kms:Encrypt", keyARN, nil, &keyPolicy, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Evaluate(Request{Principal: tc.principal, Account: account, Action: tc.action, Resource: tc.resource, Context: tc.ctx},
				[]Policy{identity}, tc.resPolicy, tc.kms)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tc.want {
				t.Fatalf("allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
		})
	}
}

func TestConditionOperators(t *testing.T) {
	tests := []struct {
		cond string
		ctx  map[string]string
		want bool
	}{
		{`{"StringEquals":{"k":["a","b"]}}`, map[string]string{"k": "b"}, true},
		{`{"StringNotEquals":{"k":"a"}}`, map[string]string{"k": "b"}, true},
		{`{"StringNotEquals":{"k":"a"}}`, nil, true}, // negated operators hold for an absent key
		{`{"StringLike":{"k":"arn:*:x"}}`, map[string]string{"k": "arn:aws:x"}, true},
		{`{"StringNotLike":{"k":"a*"}}`, map[string]string{"k": "abc"}, false},
		{`{"StringEqualsIfExists":{"k":"a"}}`, nil, true},
		{`{"StringEqualsIfExists":{"k":"a"}}`, map[string]string{"k": "b"}, false},
		{`{"Bool":{"aws:SecureTransport":"false"}}`, map[string]string{"aws:SecureTransport": "true"}, false},
		{`{"ArnLike":{"k":"arn:aws:iam::1:role/*"}}`, map[string]string{"k": "arn:aws:iam::1:role/x"}, true},
		{`{"ArnLike":{"k":"arn:aws:iam::1:role/*"}}`, map[string]string{"k": "arn:aws:iam::2:role/x"}, false},
		{`{"StringEquals":{"a":"1","b":"2"}}`, map[string]string{"a": "1"}, false}, // keys are ANDed
		// ArnNotEquals with several values holds only when none of them matches.
		{`{"ArnNotEquals":{"k":["arn:aws:iam::1:role/a","arn:aws:iam::1:role/b"]}}`, map[string]string{"k": "arn:aws:iam::1:role/b"}, false},
		{`{"ArnNotEquals":{"k":["arn:aws:iam::1:role/a","arn:aws:iam::1:role/b"]}}`, map[string]string{"k": "arn:aws:iam::1:role/c"}, true},
		{`{"ArnNotEquals":{"k":["arn:aws:iam::1:role/a"]}}`, nil, true},
		{`{"ArnEquals":{"k":"arn:aws:iam::1:role/a"}}`, nil, false},
		{`{"ArnNotEqualsIfExists":{"k":"arn:aws:iam::1:role/a"}}`, nil, true},
		{`{"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}`, nil, true},
		{`{"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}`, map[string]string{"aws:PrincipalIsAWSService": "true"}, false},
		{`{"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}`, map[string]string{"aws:PrincipalIsAWSService": "false"}, true},
		{`{"StringEquals":{"kms:EncryptionContext:purpose":"reset"}}`, map[string]string{"kms:EncryptionContext:purpose": "reset"}, true},
		{`{"StringEquals":{"kms:EncryptionContext:purpose":"reset"}}`, map[string]string{"kms:EncryptionContext:purpose": "Reset"}, false},
		{`{"StringEquals":{"kms:ViaService":"sqs.us-east-1.amazonaws.com"}}`, map[string]string{"kms:viaservice": "sqs.us-east-1.amazonaws.com"}, true},
		{`{"StringEquals":{"aws:SourceAccount":"1"},"ArnEquals":{"aws:SourceArn":"arn:aws:sns:r:1:t"}}`,
			map[string]string{"aws:SourceAccount": "1", "aws:SourceArn": "arn:aws:sns:r:1:t"}, true},
		{`{"StringEquals":{"aws:SourceAccount":"1"},"ArnEquals":{"aws:SourceArn":"arn:aws:sns:r:1:t"}}`,
			map[string]string{"aws:SourceAccount": "2", "aws:SourceArn": "arn:aws:sns:r:1:t"}, false}, // operators are ANDed
		{`{"Null":{"k":"true"}}`, nil, true},
		{`{"Null":{"k":"true"}}`, map[string]string{"k": ""}, false},
		{`{"Null":{"k":"false"}}`, map[string]string{"k": "v"}, true},
		{`{"Null":{"k":"false"}}`, nil, false},
	}
	for _, tc := range tests {
		var c map[string]any
		if err := json.Unmarshal([]byte(tc.cond), &c); err != nil {
			t.Fatal(err)
		}
		st, err := parseStatement(map[string]any{"Effect": "Allow", "Action": "x:Y", "Resource": "*", "Condition": c})
		if err != nil {
			t.Fatal(err)
		}
		got, err := conditionsHold(st.Condition, tc.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s with %v: got %v, want %v", tc.cond, tc.ctx, got, tc.want)
		}
	}
}

func TestUnsupportedIsAnError(t *testing.T) {
	for _, cond := range []string{`{"NumericLessThan":{"k":"1"}}`, `{"ForAnyValue:StringEquals":{"k":"1"}}`,
		`{"NullIfExists":{"k":"true"}}`, `{"Null":{"k":"maybe"}}`, `{"Null":{"k":["true","false"]}}`, `{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01"}}`} {
		var c map[string]any
		_ = json.Unmarshal([]byte(cond), &c)
		st, err := parseStatement(map[string]any{"Effect": "Allow", "Action": "x:Y", "Resource": "*", "Condition": c})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Evaluate(Request{Action: "x:Y", Resource: "r"}, []Policy{{Statements: []Statement{st}}}, nil, false)
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", cond, err)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*c", "abbc", true}, {"a*c", "abcd", false}, {"a?c", "abc", true},
		{"a?c", "ac", false}, {"*x*", "axb", true}, {"", "", true}, {"", "a", false},
	} {
		if got := Glob(tc.p, tc.s); got != tc.want {
			t.Errorf("Glob(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

// principalCase is one request and the policies it is decided against.
type principalCase struct {
	name     string
	req      Request
	identity []Policy
	resource *Policy
	kms      bool
	want     bool
}

// Service principals: allowed only by a resource policy statement naming them
// (never through the account root's delegation), with the service's request
// context (aws:PrincipalIsAWSService=true, no aws:PrincipalArn).
func TestServicePrincipals(t *testing.T) {
	const (
		queue    = "arn:aws:sqs:us-east-1:111122223333:events"
		topicARN = "arn:aws:sns:us-east-1:111122223333:events"
		other    = "arn:aws:sns:us-east-1:111122223333:other"
		events   = "arn:aws:iam::111122223333:role/events"
	)
	queuePolicy := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"`+queue+`",
		 "Condition":{"ArnEquals":{"aws:SourceArn":"`+topicARN+`"}}},
		{"Sid":"OnlyTopicDelivers","Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"`+queue+`",
		 "Condition":{"ArnNotEquals":{"aws:SourceArn":"`+topicARN+`"}}}]}`)
	keyPolicy := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:root"},"Action":"kms:*","Resource":"*"},
		{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":["kms:GenerateDataKey*","kms:Decrypt"],"Resource":"*",
		 "Condition":{"ArnEquals":{"aws:SourceArn":"`+topicARN+`"}}},
		{"Sid":"OnlyEventsReads","Effect":"Deny","Principal":{"AWS":"*"},"Action":"kms:Decrypt","Resource":"*",
		 "Condition":{"ArnNotEquals":{"aws:PrincipalArn":["`+events+`","`+role+`"]},"BoolIfExists":{"aws:PrincipalIsAWSService":"false"}}}]}`)
	// Without the BoolIfExists exemption, the principal-ARN deny also catches
	// every service: a service's request has no aws:PrincipalArn, and a
	// negated operator holds for an absent key.
	strictKeyPolicy := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::111122223333:root"},"Action":"kms:*","Resource":"*"},
		{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"kms:Decrypt","Resource":"*"},
		{"Effect":"Deny","Principal":{"AWS":"*"},"Action":"kms:Decrypt","Resource":"*",
		 "Condition":{"ArnNotEquals":{"aws:PrincipalArn":"`+events+`"}}}]}`)
	everything := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":["sqs:*","kms:*"],"Resource":"*"}]}`)
	noDeny := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","Principal":{"Service":"sns.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"`+queue+`",
		 "Condition":{"ArnEquals":{"aws:SourceArn":"`+topicARN+`"}}}]}`)

	src := func(arn string) map[string]string {
		return map[string]string{"aws:SourceArn": arn, "aws:SourceAccount": account}
	}
	sns := func(action, resource string, ctx map[string]string) Request {
		return Request{Service: "sns.amazonaws.com", Action: action, Resource: resource, Context: ctx}
	}
	asRole := func(principal, action, resource string, ctx map[string]string) Request {
		return Request{Principal: principal, Account: account, Action: action, Resource: resource, Context: ctx}
	}
	tests := []principalCase{
		{"the topic delivers", sns("sqs:SendMessage", queue, src(topicARN)), nil, &queuePolicy, false, true},
		{"another topic does not", sns("sqs:SendMessage", queue, src(other)), nil, &queuePolicy, false, false},
		{"another service is not named", Request{Service: "ses.amazonaws.com", Action: "sqs:SendMessage", Resource: queue, Context: src(topicARN)},
			nil, &queuePolicy, false, false},
		{"a service without a resource policy statement", sns("sqs:ReceiveMessage", queue, src(topicARN)), nil, &queuePolicy, false, false},
		{"a role allowing sqs:* is denied by the source deny", asRole(role, "sqs:SendMessage", queue, nil), []Policy{everything}, &queuePolicy, false, false},
		{"the same role without the deny is allowed (same account: identity allow suffices)",
			asRole(role, "sqs:SendMessage", queue, nil), []Policy{everything}, &noDeny, false, true},
		{"a role cannot claim a source ARN it is not given", asRole(role, "sqs:SendMessage", queue, nil), nil, &noDeny, false, false},
		{"kms: the key policy names the service", sns("kms:GenerateDataKey", keyARN, src(topicARN)), nil, &keyPolicy, true, true},
		{"kms: the service decrypts past the principal deny (BoolIfExists)", sns("kms:Decrypt", keyARN, src(topicARN)), nil, &keyPolicy, true, true},
		{"kms: the root's delegation allows no service", sns("kms:Encrypt", keyARN, src(topicARN)), nil, &keyPolicy, true, false},
		{"kms: the service's condition unmet", sns("kms:Decrypt", keyARN, src(other)), nil, &keyPolicy, true, false},
		{"kms: the first listed role decrypts", asRole(events, "kms:Decrypt", keyARN, nil), []Policy{everything}, &keyPolicy, true, true},
		{"kms: the second listed role decrypts", asRole(role, "kms:Decrypt", keyARN, nil), []Policy{everything}, &keyPolicy, true, true},
		{"kms: another role is denied", asRole(other, "kms:Decrypt", keyARN, nil), []Policy{everything}, &keyPolicy, true, false},
		{"kms: another role may use other actions", asRole(other, "kms:Encrypt", keyARN, nil), []Policy{everything}, &keyPolicy, true, true},
		{"kms: without the exemption the principal deny catches the service", sns("kms:Decrypt", keyARN, src(topicARN)), nil, &strictKeyPolicy, true, false},
		{"a service cannot pass a principal ARN in its context",
			sns("kms:Decrypt", keyARN, map[string]string{"aws:PrincipalArn": events, "aws:PrincipalIsAWSService": "false"}), nil, &strictKeyPolicy, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Evaluate(tc.req, tc.identity, tc.resource, tc.kms)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tc.want {
				t.Fatalf("allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
		})
	}
}

// The principal's condition keys come from the request, never from its context.
func TestPrincipalContext(t *testing.T) {
	cond := func(c string) Policy {
		return mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":"x:Y","Resource":"*","Condition":`+c+`}]}`)
	}
	tests := []struct {
		name string
		req  Request
		cond string
		want bool
	}{
		{"a role is no service", Request{Principal: role, Account: account}, `{"Bool":{"aws:PrincipalIsAWSService":"false"}}`, true},
		{"a role has its ARN", Request{Principal: role, Account: account}, `{"ArnEquals":{"aws:PrincipalArn":"` + role + `"}}`, true},
		{"a role cannot pose as a service", Request{Principal: role, Account: account,
			Context: map[string]string{"aws:PrincipalIsAWSService": "true"}}, `{"Bool":{"aws:PrincipalIsAWSService":"true"}}`, false},
		{"a role has no service name", Request{Principal: role, Account: account}, `{"Null":{"aws:PrincipalServiceName":"true"}}`, true},
		{"a service is a service", Request{Service: "sns.amazonaws.com"}, `{"Bool":{"aws:PrincipalIsAWSService":"true"}}`, true},
		{"a service has its name", Request{Service: "sns.amazonaws.com"}, `{"StringEquals":{"aws:PrincipalServiceName":"sns.amazonaws.com"}}`, true},
		{"a service has no principal ARN", Request{Service: "sns.amazonaws.com"}, `{"Null":{"aws:PrincipalArn":"true","aws:PrincipalAccount":"true"}}`, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Action, tc.req.Resource = "x:Y", "r"
			var identity []Policy
			var resource *Policy
			if tc.req.Service != "" { // a service is allowed by a resource policy naming it
				p := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Principal":{"Service":"`+tc.req.Service+`"},"Action":"x:Y","Resource":"*","Condition":`+tc.cond+`}]}`)
				resource = &p
			} else {
				identity = []Policy{cond(tc.cond)}
			}
			d, err := Evaluate(tc.req, identity, resource, false)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tc.want {
				t.Fatalf("allowed = %v (%s), want %v", d.Allowed, d.Reason, tc.want)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	p := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":"x:Y","Resource":"*"}]}`)
	for name, tc := range map[string]struct {
		req      Request
		identity []Policy
	}{
		"a service and a principal":           {Request{Service: "sns.amazonaws.com", Principal: role, Action: "x:Y", Resource: "r"}, nil},
		"a service with identity policies":    {Request{Service: "sns.amazonaws.com", Action: "x:Y", Resource: "r"}, []Policy{p}},
		"a service and a principal's account": {Request{Service: "sns.amazonaws.com", Account: account, Action: "x:Y", Resource: "r"}, nil},
	} {
		if _, err := Evaluate(tc.req, tc.identity, nil, false); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
