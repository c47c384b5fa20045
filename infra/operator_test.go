package main

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
)

// operatorGrants is every permission the LedgerOperator role holds: what ledgerctl's read commands
// (timeline included) call (operatorCalls), the ledger key through DynamoDB to read, and the
// operator function through its URL (resolve). No write of any table, and nothing to send with.
var operatorGrants = []string{
	"dynamodb:GetItem on LedgerTable", "dynamodb:BatchGetItem on LedgerTable", "dynamodb:Scan on LedgerTable",
	"dynamodb:Query on LedgerTable/index/open",
	"dynamodb:Query on LedgerTable/index/subject", "dynamodb:Query on LedgerTable/index/destination",
	"kms:Decrypt on LedgerKey", "kms:DescribeKey on LedgerKey",
	"lambda:InvokeFunction on OperateFunction", "lambda:InvokeFunctionUrl on OperateFunction",
	// ledgerctl verify --digest-bucket --digest-key: every version of every digest, and the public key.
	"s3:ListBucket on DigestBucket", "s3:ListBucketVersions on DigestBucket",
	"s3:GetObject on DigestBucket/digests/*", "s3:GetObjectVersion on DigestBucket/digests/*",
	"kms:GetPublicKey on DigestKey", "kms:Verify on DigestKey", "kms:DescribeKey on DigestKey",
}

// TestOperatorRole: the role reads and invokes the operator function and nothing more; the account
// may assume it on the local stage, which alone may leave operatorArns unset; its ARN is an output.
func TestOperatorRole(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) { p.OperatorPrincipalArns, p.LocalStage = nil, true })
	want := slices.Clone(operatorGrants)
	sort.Strings(want)
	if got := s.grants(t)["LedgerOperator"]; !slices.Equal(got, want) {
		t.Errorf("operator grants:\n got  %q\n want %q", got, want)
	}
	for _, st := range list(s.roleTrust(t, "LedgerOperatorRole")["Statement"]) {
		stmt := st.(map[string]any)
		if got := mustJSON(stmt["Principal"]); got != `{"AWS":{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::",{"Ref":"AWS::AccountId"},":root"]]}}` ||
			stmt["Action"] != "sts:AssumeRole" {
			t.Errorf("default operator trust = %s %v, want the account root", got, stmt["Action"])
		}
	}
	if out, ok := s.json["Outputs"].(map[string]any)["LedgerOperatorRoleArn"].(map[string]any); !ok ||
		label(out["Value"]) != "LedgerOperatorRole" {
		t.Errorf("LedgerOperatorRoleArn output = %v", out)
	}
	noNagErrors(t, s)

	named := []string{"arn:aws:iam::111122223333:role/oncall", "arn:aws:iam::111122223333:role/compliance"}
	s = synth(t, func(p *LedgerStackProps) { p.OperatorPrincipalArns = named })
	var principals []string
	for _, st := range list(s.roleTrust(t, "LedgerOperatorRole")["Statement"]) {
		for _, p := range list(st.(map[string]any)["Principal"].(map[string]any)["AWS"]) {
			principals = append(principals, label(p))
		}
	}
	sort.Strings(principals)
	sort.Strings(named)
	if !slices.Equal(principals, named) {
		t.Errorf("operator trust with operatorArns = %v, want %v", principals, named)
	}
}

// roleTrust returns the assume-role policy of the role whose construct name is name.
func (s *synthesized) roleTrust(t *testing.T, name string) map[string]any {
	t.Helper()
	return props(s.resources("AWS::IAM::Role")[s.constructID(t, "AWS::IAM::Role", name)])["AssumeRolePolicyDocument"].(map[string]any)
}

// TestLedgerWritesOnlyByItsRoles: the ledger table's resource policy denies every item write to
// every principal but the five function roles and the operator function's role; the other tables
// have none.
func TestLedgerWritesOnlyByItsRoles(t *testing.T) {
	s := synth(t, nil)
	tables := s.resources("AWS::DynamoDB::Table")
	ledger := props(tables[s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")])
	policy, _ := ledger["ResourcePolicy"].(map[string]any)
	if policy == nil {
		t.Fatal("the ledger table has no resource policy")
	}
	var deny map[string]any
	for _, st := range list(policy["PolicyDocument"].(map[string]any)["Statement"]) {
		if stmt := st.(map[string]any); stmt["Sid"] == "OnlyLedgerWriters" {
			deny = stmt
		}
	}
	if deny == nil {
		t.Fatalf("no OnlyLedgerWriters statement in %s", mustJSON(policy))
	}
	if deny["Effect"] != "Deny" || mustJSON(deny["Principal"]) != `{"AWS":"*"}` || deny["Resource"] != "*" {
		t.Errorf("OnlyLedgerWriters = %s, want a Deny to every principal on this table", mustJSON(deny))
	}
	var actions []string
	for _, a := range list(deny["Action"]) {
		actions = append(actions, a.(string))
	}
	sort.Strings(actions)
	wantActions := []string{"dynamodb:BatchWriteItem", "dynamodb:DeleteItem", "dynamodb:PartiQLDelete", "dynamodb:PartiQLInsert",
		"dynamodb:PartiQLUpdate", "dynamodb:PutItem", "dynamodb:UpdateItem"}
	if !slices.Equal(actions, wantActions) {
		t.Errorf("OnlyLedgerWriters actions = %v, want %v", actions, wantActions)
	}
	cond, _ := deny["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)
	var writers []string
	for _, r := range list(cond["aws:PrincipalArn"]) {
		writers = append(writers, label(r))
	}
	sort.Strings(writers)
	// The operator role is not among them: it writes through the operator function.
	wantWriters := []string{"ClaimRole", "DispatchRole", "EventsRole", "ExpireRole", "OperateRole", "ReconcileRole"}
	if !slices.Equal(writers, wantWriters) {
		t.Errorf("OnlyLedgerWriters exempts %v, want %v", writers, wantWriters)
	}
	for id, tb := range tables {
		if _, ok := props(tb)["ResourcePolicy"]; ok && id != s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable") {
			t.Errorf("table %s has a resource policy", id)
		}
	}
}

// TestOperatorFunction: the operator function answers only through its function URL, whose
// AuthType AWS_IAM makes AWS authenticate every request; its resource policy lets the operator
// role (and operatorArns) invoke it through the URL and denies every other invocation; the URL is
// an output. The local stage (operatorDenies=false) gets the two allows as permissions instead.
func TestOperatorFunction(t *testing.T) {
	named := "arn:aws:iam::111122223333:role/oncall"
	s := synth(t, func(p *LedgerStackProps) { p.OperatorPrincipalArns = []string{named} })
	fn := s.function(t, settings.Operate)
	if env := fn["Environment"].(map[string]any)["Variables"].(map[string]any); label(env["LEDGER_TABLE"]) != "LedgerTable" ||
		label(env["CONTENT_TABLE"]) != "ContentTable" {
		t.Errorf("operate environment = %s, want the ledger and content tables", mustJSON(env))
	}
	urls := s.resources("AWS::Lambda::Url")
	if len(urls) != 1 {
		t.Fatalf("want one function URL, got %d", len(urls))
	}
	for _, u := range urls {
		if p := props(u); p["AuthType"] != "AWS_IAM" || label(p["TargetFunctionArn"]) != "OperateFunction" || p["Qualifier"] != nil {
			t.Errorf("function URL = %s, want AuthType AWS_IAM on OperateFunction", mustJSON(p))
		}
	}
	if n := len(s.resources("AWS::Lambda::Permission")); n != 0 {
		t.Errorf("%d Lambda permissions, want none: every function's invokers are its resource policy (invokers.go)", n)
	}
	policies := map[string]map[string]any{}
	for id, rp := range s.resources("AWS::Lambda::ResourcePolicy") {
		if label(props(rp)["ResourceArn"]) == "OperateFunction" {
			policies[id] = rp
		}
	}
	if len(policies) != 1 {
		t.Fatalf("want one resource policy on the operator function, got %d", len(policies))
	}
	var sids []string
	for _, rp := range policies {
		p := props(rp)
		for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
			stmt := st.(map[string]any)
			sids = append(sids, stmt["Sid"].(string))
			var who []string
			for _, w := range list(stmt["Principal"].(map[string]any)["AWS"]) {
				who = append(who, label(w))
			}
			switch stmt["Sid"] {
			case "OperatorsInvokeUrl", "OperatorsInvokeViaUrl":
				sort.Strings(who)
				if stmt["Effect"] != "Allow" || !slices.Equal(who, []string{"LedgerOperatorRole", named}) {
					t.Errorf("%s = %s, want an Allow to the operator role and operatorArns", stmt["Sid"], mustJSON(stmt))
				}
			case "OnlyThroughTheUrl":
				if stmt["Effect"] != "Deny" || !slices.Equal(who, []string{"*"}) || !namesEveryQualifier(stmt["Resource"], "OperateFunction") ||
					mustJSON(stmt["Condition"]) != `{"BoolIfExists":{"lambda:InvokedViaFunctionUrl":"false"}}` {
					t.Errorf("OnlyThroughTheUrl = %s", mustJSON(stmt))
				}
			case "OnlyOperatorsInvoke":
				cond := stmt["Condition"].(map[string]any)["ArnNotEquals"].(map[string]any)["aws:PrincipalArn"]
				var exempt []string
				for _, c := range list(cond) {
					exempt = append(exempt, label(c))
				}
				if stmt["Effect"] != "Deny" || !slices.Equal(who, []string{"*"}) || !slices.Equal(exempt, []string{"LedgerOperatorRole", named}) ||
					!namesEveryQualifier(stmt["Resource"], "OperateFunction") {
					t.Errorf("OnlyOperatorsInvoke = %s", mustJSON(stmt))
				}
			}
		}
	}
	sort.Strings(sids)
	if want := []string{"OnlyOperatorsInvoke", "OnlyThroughTheUrl", "OperatorsInvokeUrl", "OperatorsInvokeViaUrl"}; !slices.Equal(sids, want) {
		t.Errorf("operator function policy statements = %v, want %v", sids, want)
	}
	out, ok := s.json["Outputs"].(map[string]any)[outputs.OperatorFunctionURL.Name].(map[string]any)
	if !ok || mustJSON(out["Value"]) != `{"Fn::GetAtt":["`+s.logicalID(t, "AWS::Lambda::Url", "OperateFunctionFunctionUrl")+`","FunctionUrl"]}` {
		t.Errorf("%s output = %v", outputs.OperatorFunctionURL.Name, out)
	}

	checkOperatorWithoutDenies(t)
}

// checkOperatorWithoutDenies: with operatorDenies=false (the local stage) the
// operator function has no resource policy, only Lambda permissions for the
// operator role.
func checkOperatorWithoutDenies(t *testing.T) {
	t.Helper()
	local := synth(t, func(p *LedgerStackProps) {
		p.SkipOperatorDenies, p.LocalStage, p.OperatorPrincipalArns = true, true, nil
	})
	if n := len(local.resources("AWS::Lambda::ResourcePolicy")); n != 0 {
		t.Errorf("operatorDenies=false: %d Lambda resource policies, want none", n)
	}
	var perms []string
	for _, pm := range local.resources("AWS::Lambda::Permission") {
		p := props(pm)
		if label(p["FunctionName"]) != "OperateFunction" {
			continue
		}
		perms = append(perms, fmt.Sprintf("%s %s %v %v", p["Action"], label(p["Principal"]), p["FunctionUrlAuthType"], p["InvokedViaFunctionUrl"]))
	}
	sort.Strings(perms)
	if want := []string{"lambda:InvokeFunction LedgerOperatorRole <nil> true", "lambda:InvokeFunctionUrl LedgerOperatorRole AWS_IAM <nil>"}; !slices.Equal(perms, want) {
		t.Errorf("operatorDenies=false: permissions %q, want %q", perms, want)
	}
}

// namesEveryQualifier reports whether a statement's Resource is exactly the function fn and every
// qualifier of it (its ARN, and its ARN followed by ":*").
func namesEveryQualifier(resource any, fn string) bool {
	r := list(resource)
	if len(r) != 2 || label(r[0]) != fn {
		return false
	}
	j, _ := r[1].(map[string]any)["Fn::Join"].([]any)
	if len(j) != 2 {
		return false
	}
	parts := list(j[1])
	return len(parts) == 2 && label(parts[0]) == fn && parts[1] == ":*"
}
