package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/iampolicy"
)

// TestDeploySCP evaluates the service control policy docs/deploy.md gives ("What the Denies rest
// on") as the organization would attach it, with the page's placeholders filled in for the
// production stage: the insider's iam:PassRole of a role of the stage (as CloudFormation names
// them, <stack>-<logical id>-<suffix>) and its change of a function's resource policy are denied;
// the deploy role's are not; a role outside the stage is not touched. An SCP only denies, so it
// is evaluated as one more identity policy of the caller (an explicit Deny in it wins). Nobody may
// publish into the ResetLedger namespace with cloudwatch:PutMetricData; other namespaces are free.
func TestDeploySCP(t *testing.T) {
	section := docSection(t, "docs/deploy.md", "## What the Denies rest on")
	_, block, ok := strings.Cut(section, "```json\n")
	if block, _, ok = strings.Cut(block, "```"); !ok {
		t.Fatal("docs/deploy.md, What the Denies rest on: no json block")
	}
	block = strings.NewReplacer("<account>", boundaryPseudo.Account, "<region>", boundaryPseudo.Region, "<stage>", "prod").Replace(block)
	var statements []any
	if err := json.Unmarshal([]byte(block), &statements); err != nil {
		t.Fatalf("the SCP in docs/deploy.md is not a JSON list of statements: %v", err)
	}
	scp, err := iampolicy.ParsePolicy("docs/deploy.md SCP", map[string]any{"Statement": statements})
	if err != nil {
		t.Fatal(err)
	}
	everything, err := parsePolicy("allows everything", `{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	stageRole := "arn:aws:iam::111122223333:role/resetledger-prod-DispatchRole1A2B3C4D-Z9Y8X7W6V5U4"
	fn := "arn:aws:lambda:us-east-1:111122223333:function:resetledger-prod-dispatch"
	ledgerMetrics := map[string]string{"cloudwatch:namespace": "ResetLedger"}
	for _, tc := range []struct {
		who, action, resource string
		allowed               bool
		ctx                   map[string]string
	}{
		{insiderARN, "iam:PassRole", stageRole, false, nil},
		{insiderARN, "iam:PassRole", "arn:aws:iam::111122223333:role/resetledger-prod-OperateRole0A1B2C3D-ABCDEF", false, nil},
		{insiderARN, "lambda:PutResourcePolicy", fn, false, nil},
		{insiderARN, "lambda:PublishVersion", fn, false, nil},
		{insiderARN, "iam:PassRole", "arn:aws:iam::111122223333:role/payments-worker", true, nil},
		{deployerARN, "iam:PassRole", stageRole, true, nil},
		{deployerARN, "lambda:PutResourcePolicy", fn, true, nil},
		// Nobody publishes into the functions' namespace directly (they write EMF log lines).
		{insiderARN, "cloudwatch:PutMetricData", "*", false, ledgerMetrics},
		{deployerARN, "cloudwatch:PutMetricData", "*", false, ledgerMetrics},
		{insiderARN, "cloudwatch:PutMetricData", "*", true, map[string]string{"cloudwatch:namespace": "Payments"}},
	} {
		req := iampolicy.Request{Principal: tc.who, Account: boundaryPseudo.Account, Action: tc.action, Resource: tc.resource, Context: tc.ctx}
		d, err := iampolicy.Evaluate(req, []iampolicy.Policy{everything, scp}, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != tc.allowed {
			t.Errorf("%s %s on %s under the SCP: allowed %v (%s), want %v", tc.who, tc.action, tc.resource, d.Allowed, d.Reason, tc.allowed)
		}
	}
}
