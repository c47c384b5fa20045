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
	for _, cond := range []string{`{"NumericLessThan":{"k":"1"}}`, `{"ForAnyValue:StringEquals":{"k":"1"}}`} {
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
