package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/iampolicy"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// iamCheckEnv turns TestIAMCoverage on; `make test` sets it after the
// pipeline tests, the gate and the end-to-end run have written their
// recordings to LEDGER_AWSCALL_DIR.
const iamCheckEnv = "LEDGER_IAM_CHECK"

// The SES sender the recordings are bound to (see awscall.SESFromAddress).
const iamFromAddress = "no-reply@ledger.example.test"

// TestIAMCoverage evaluates every AWS call the functions made in the recorded
// runs against the function's role and the key policies of the synthesized
// template, for the production configuration and the local one. A call that
// is not allowed fails with the function, action and resource; so does a
// granted action no run exercised, unless unexercisedGrants says why.
func TestIAMCoverage(t *testing.T) {
	if os.Getenv(iamCheckEnv) != "1" {
		t.Skipf("set %s=1 and %s to the recordings of a test run (make test does)", iamCheckEnv, awscall.DirEnv)
	}
	dir := os.Getenv(awscall.DirEnv)
	if dir == "" {
		t.Fatalf("%s is not set", awscall.DirEnv)
	}
	recs, err := awscall.ReadRecordings(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkRecordingsComplete(t, recs)

	stages := []struct {
		name   string
		mutate func(*LedgerStackProps)
	}{
		{"production", func(p *LedgerStackProps) { p.Functions.SESFrom = iamFromAddress }},
		{"production with SMS through a webhook", func(p *LedgerStackProps) {
			p.Functions.SESFrom = iamFromAddress
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.com/send"
		}},
		{"local", func(p *LedgerStackProps) {
			p.Functions.SESFrom = iamFromAddress
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL, p.Functions.WebhookKeyWindow =
				settings.TransportWebhook, "http://127.0.0.1:4599/send", 0
			p.DeletionProtection, p.PointInTimeRecovery, p.Functions.LogAWSCalls = false, false, true
		}},
	}
	granted := map[string]bool{}
	for _, st := range stages {
		t.Run(st.name, func(t *testing.T) {
			var props *LedgerStackProps
			s := synth(t, func(p *LedgerStackProps) { st.mutate(p); props = p })
			raw, err := json.Marshal(s.json)
			if err != nil {
				t.Fatal(err)
			}
			problems, grants := checkPermissions(t, raw, props, recs)
			for _, p := range problems {
				t.Error(p)
			}
			for k := range grants {
				granted[k] = true
			}
		})
	}
	// A justification may go unused in one run (a fault path the run happened
	// to reach records the call), but one for a grant no stage makes is stale.
	for _, g := range unexercisedGrants {
		if !granted[g.Function+" "+g.Action] {
			t.Errorf("unexercisedGrants lists %s %s, but no stage grants it: remove the entry", g.Function, g.Action)
		}
	}
}

// checkRecordingsComplete fails when the recordings cannot support the
// check: none at all, none from the deployed stack, or a function with no
// recorded call.
func checkRecordingsComplete(t *testing.T, recs []awscall.Recording) {
	t.Helper()
	calls, deployed := map[string]int{}, false
	for _, r := range recs {
		deployed = deployed || strings.HasPrefix(r.Source, "deployed ")
		for _, c := range r.Calls {
			calls[c.Function] += c.Count
		}
	}
	if !deployed {
		t.Errorf("no recording from the deployed stack (e2e TestEndToEndAWSCalls)")
	}
	for _, fn := range settings.Functions {
		if calls[string(fn)] == 0 {
			t.Errorf("no recorded AWS call of the %s function", fn)
		}
	}
	t.Logf("%d recordings; calls per function: %v", len(recs), calls)
}

// streamLabel is the label of a recorded stream ARN (the digest function reads the ledger stream
// back, internal/digeststream): the evaluator names a table's stream .../stream/latest, as the
// template's StreamArn resolves to one stream whatever its label.
var streamLabel = regexp.MustCompile(`/stream/[^/]+$`)

// request is one authorization request of a function: recorded, or made by
// AWS with the function's role (platform).
type request struct {
	action, resource string
	ctx              map[string]string
	source           string
}

// checkPermissions evaluates the recordings against one synthesized template
// and returns every problem (a call not allowed, a grant not exercised nor
// justified) and every "<Function> <action>" the roles allow.
func checkPermissions(t *testing.T, template []byte, props *LedgerStackProps, recs []awscall.Recording) (problems []string, granted map[string]bool) {
	t.Helper()
	stacks := loadStacks(t, template, recs)
	type key struct {
		ps iampolicy.Pseudo
		fn string
	}
	byFunction := map[key][]request{}
	for _, rec := range recs {
		ps := iampolicy.Pseudo{Region: rec.Region, Account: rec.Account}
		rewrite := binder(rec.Binding, props)
		for _, c := range rec.Calls {
			if !props.Functions.UsesWebhook() && strings.HasSuffix(rewrite(c.Resource), ":secret:"+awscall.WebhookSecret) {
				// The runs send a channel through the webhook, which signs with this secret; a
				// stage without a webhook has no secret, and its senders never read one.
				continue
			}
			// A recorded call is made by the function's code: Lambda puts the function's ARN in its
			// context (lambda:SourceFunctionArn), which each role's OnlyThroughItsFunction compares
			// with its own function. The platform's requests (platformRequests) carry none.
			ctx := map[string]string{"lambda:SourceFunctionArn": "arn:aws:lambda:" + rec.Region + ":" + rec.Account + ":function:" +
				props.Prefix + "-" + c.Function}
			for k, v := range c.Context {
				ctx[k] = rewrite(v)
			}
			k := key{ps, c.Function}
			r := request{action: c.Action, resource: streamLabel.ReplaceAllString(rewrite(c.Resource), "/stream/latest"), ctx: ctx, source: rec.Source}
			if webhookOnly(c.Function, r) && !props.Functions.OpensContent(settings.Reconcile) {
				// A run with a webhook transport made it; this stage has none, so its reconcile
				// never does (internal/wire/reconcileports builds no opener without one).
				continue
			}
			byFunction[k] = append(byFunction[k], r)
		}
	}

	failures := map[string]bool{}
	for k, reqs := range byFunction {
		s := stacks[k.ps]
		fn, ok := s.Functions[props.Prefix+"-"+k.fn]
		if !ok {
			problems = append(problems, fmt.Sprintf("recorded calls of function %q, which the template does not define", k.fn))
			continue
		}
		reqs = append(reqs, platformRequests(s, queueKeys(t, template, s), fn, reqs)...)
		for _, r := range reqs {
			d, err := s.Decide(fn.RoleARN, r.action, r.resource, r.ctx)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %s on %s: %v", k.fn, r.action, r.resource, err))
				continue
			}
			if !d.Allowed {
				msg := fmt.Sprintf("%s function: %s on %s is not allowed: %s (from %s)", k.fn, r.action, r.resource, d.Reason, r.source)
				if !failures[msg] {
					failures[msg] = true
					problems = append(problems, msg)
				}
			}
		}
		for _, g := range unexercised(s, fn, reqs) {
			name := roleOwner(fn.RoleARN)
			if why := justification(name, g.action, g.resource); why != "" {
				t.Logf("%s: %s on %s granted without a recorded call: %s", k.fn, g.action, g.resource, why)
				continue
			}
			problems = append(problems, fmt.Sprintf("%s function: %s on %s is granted (%s) but no recorded run makes that call: "+
				"remove the grant, or say in infra/permissions.go why it is needed", k.fn, g.action, g.resource, g.source))
		}
	}
	granted = grantedActions(stacks)
	sort.Strings(problems)
	return problems, granted
}

// loadStacks loads the template once for each region and account the
// recordings were made in.
func loadStacks(t *testing.T, template []byte, recs []awscall.Recording) map[iampolicy.Pseudo]*iampolicy.Stack {
	t.Helper()
	stacks := map[iampolicy.Pseudo]*iampolicy.Stack{}
	for _, rec := range recs {
		ps := iampolicy.Pseudo{Region: rec.Region, Account: rec.Account}
		if _, ok := stacks[ps]; ok {
			continue
		}
		s, err := iampolicy.LoadTemplate(template, ps)
		if err != nil {
			t.Fatal(err)
		}
		stacks[ps] = s
	}
	return stacks
}

// grantedActions is every "role action" the functions' roles allow.
func grantedActions(stacks map[iampolicy.Pseudo]*iampolicy.Stack) map[string]bool {
	granted := map[string]bool{}
	for _, s := range stacks {
		for _, fn := range s.Functions {
			role, ok := s.Roles[fn.RoleARN]
			if !ok {
				continue
			}
			for _, pol := range role.Policies {
				for _, st := range pol.Statements {
					if st.Effect == iampolicy.Allow {
						for _, a := range st.Action {
							granted[roleOwner(fn.RoleARN)+" "+a] = true
						}
					}
				}
			}
		}
	}
	return granted
}

// roleOwner names the function a role belongs to: the role's construct
// name without its "Role" suffix (arn:...:role/DispatchRole -> Dispatch).
func roleOwner(roleARN string) string {
	name := roleARN[strings.LastIndex(roleARN, "/")+1:]
	return strings.TrimSuffix(iampolicy.ConstructName(name), "Role")
}

func justification(function, action, resource string) string {
	for _, g := range unexercisedGrants {
		if g.Function == function && g.Action == action && strings.Contains(resource, g.Resource) {
			return g.Why
		}
	}
	return ""
}

// binder returns a function that rewrites a recorded value from the run's
// physical names to the template's: longest names first, so an address is
// replaced before its domain.
func binder(binding map[string]string, props *LedgerStackProps) func(string) string {
	var pairs []string
	phys := make([]string, 0, len(binding))
	for k := range binding {
		phys = append(phys, k)
	}
	sort.Slice(phys, func(i, j int) bool { return len(phys[i]) > len(phys[j]) })
	for _, k := range phys {
		v := binding[k]
		switch v {
		case awscall.SESFromAddress:
			v = props.Functions.SESFrom
		case awscall.SESIdentity:
			v = props.sesIdentity()
		case awscall.SESConfigurationSet:
			v = props.sesConfigurationSet()
		}
		pairs = append(pairs, k, v)
	}
	r := strings.NewReplacer(pairs...)
	return r.Replace
}

// queueKeys maps the name of each queue the template encrypts under a
// customer managed key (KmsMasterKeyId) to that key's ARN in s.
func queueKeys(t *testing.T, template []byte, s *iampolicy.Stack) map[string]string {
	t.Helper()
	var doc struct {
		Resources map[string]struct {
			Type       string
			Properties struct {
				QueueName      string
				KmsMasterKeyId map[string][]string
			}
		}
	}
	if err := json.Unmarshal(template, &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for id, r := range doc.Resources {
		ga := r.Properties.KmsMasterKeyId["Fn::GetAtt"]
		if r.Type != "AWS::SQS::Queue" || len(ga) != 2 {
			continue
		}
		name := r.Properties.QueueName
		if name == "" {
			name = iampolicy.ConstructName(id)
		}
		for arn := range s.KMSKeys {
			if strings.HasSuffix(arn, ":key/"+iampolicy.ConstructName(ga[0])) {
				keys[name] = arn
			}
		}
	}
	return keys
}

// platformRequests are the requests AWS makes with fn's role on its behalf,
// from the template: Lambda writing its logs and polling its event sources
// (and sending to their on-failure destinations), SQS decrypting what the
// poller receives from a queue under a customer managed key (queueKeys), and
// DynamoDB using a table's customer managed key for the function's reads and
// writes (and the stream's).
func platformRequests(s *iampolicy.Stack, queueKeys map[string]string, fn *iampolicy.Function, recorded []request) []request {
	var out []request
	add := func(action, resource string, ctx map[string]string, why string) {
		out = append(out, request{action: action, resource: resource, ctx: ctx, source: "platform: " + why})
	}
	if fn.LogGroupARN != "" {
		stream := strings.TrimSuffix(fn.LogGroupARN, "*") + "log-stream:2026/01/01/[$LATEST]0"
		add("logs:CreateLogStream", stream, nil, "Lambda writes the function's logs")
		add("logs:PutLogEvents", stream, nil, "Lambda writes the function's logs")
	}
	viaDynamoDB := map[string]string{"kms:ViaService": "dynamodb." + s.Pseudo.Region + ".amazonaws.com", "kms:CallerAccount": s.Pseudo.Account}
	tableKey := func(tableARN string, write bool, why string) {
		tb, ok := s.Tables[tableARN]
		if !ok || tb.KeyARN == "" {
			return
		}
		add("kms:Decrypt", tb.KeyARN, viaDynamoDB, why)
		add("kms:DescribeKey", tb.KeyARN, viaDynamoDB, why)
		if write {
			add("kms:Encrypt", tb.KeyARN, viaDynamoDB, why)
			add("kms:GenerateDataKey", tb.KeyARN, viaDynamoDB, why)
		}
	}
	for _, src := range fn.Sources {
		switch {
		case strings.Contains(src.SourceARN, ":sqs:"):
			for _, a := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} {
				add(a, src.SourceARN, nil, "the SQS event source mapping polls the queue")
			}
			if key, ok := queueKeys[src.SourceARN[strings.LastIndex(src.SourceARN, ":")+1:]]; ok {
				add("kms:Decrypt", key, map[string]string{"kms:ViaService": "sqs." + s.Pseudo.Region + ".amazonaws.com",
					"kms:CallerAccount": s.Pseudo.Account}, "SQS decrypts what the poller receives with the queue's key")
			}
		case strings.Contains(src.SourceARN, "/stream/"):
			for _, a := range []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"} {
				add(a, src.SourceARN, nil, "the DynamoDB stream event source mapping reads the stream")
			}
			add("dynamodb:ListStreams", "*", nil, "the DynamoDB stream event source mapping lists streams")
			tableKey(src.SourceARN[:strings.Index(src.SourceARN, "/stream/")], false, "stream records are encrypted with the table key")
		}
		if src.OnFailureARN != "" {
			add("sqs:SendMessage", src.OnFailureARN, nil, "the event source mapping sends failed batches to its on-failure destination")
		}
	}
	for _, r := range recorded {
		if !strings.HasPrefix(r.action, "dynamodb:") {
			continue
		}
		table, _, _ := strings.Cut(r.resource, "/index/")
		write := map[string]bool{"dynamodb:PutItem": true, "dynamodb:UpdateItem": true, "dynamodb:DeleteItem": true, "dynamodb:BatchWriteItem": true}[r.action]
		tableKey(table, write, "DynamoDB uses the table's customer managed key with the caller's permissions")
	}
	return dedupe(out)
}

func dedupe(reqs []request) []request {
	seen := map[string]bool{}
	var out []request
	for _, r := range reqs {
		k := r.action + "|" + r.resource
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, r)
	}
	return out
}

type grant struct{ action, resource, source string }

// unexercised lists the (action, resource) pairs fn's identity policies allow
// that no request of fn used.
func unexercised(s *iampolicy.Stack, fn *iampolicy.Function, reqs []request) []grant {
	var out []grant
	for _, pol := range s.Roles[fn.RoleARN].Policies {
		for i, st := range pol.Statements {
			if st.Effect != iampolicy.Allow {
				continue
			}
			src := fmt.Sprintf("%s statement %d", pol.Source, i)
			if len(st.NotAction) > 0 || len(st.NotResource) > 0 {
				out = append(out, grant{"NotAction/NotResource", "*", src})
				continue
			}
			for _, a := range st.Action {
				for _, res := range st.Resource {
					used := false
					for _, r := range reqs {
						if iampolicy.Glob(strings.ToLower(a), strings.ToLower(r.action)) && iampolicy.ArnLike(res, r.resource) {
							used = true
							break
						}
					}
					if !used {
						out = append(out, grant{a, res, src})
					}
				}
			}
		}
	}
	return out
}

// TestIAMCheckerCatchesDenials runs the checker on hand-made recordings
// against the production template: calls the roles allow pass, and each
// kind of call a reviewer worries about is reported with function, action
// and resource.
func TestIAMCheckerCatchesDenials(t *testing.T) {
	var props *LedgerStackProps
	s := synth(t, func(p *LedgerStackProps) { p.Functions.SESFrom = iamFromAddress; props = p })
	raw, err := json.Marshal(s.json)
	if err != nil {
		t.Fatal(err)
	}
	const table = "arn:aws:dynamodb:us-east-1:000000000000:table/"
	const key = "arn:aws:kms:us-east-1:000000000000:key/"
	const queue = "arn:aws:sqs:us-east-1:000000000000:"
	denied := []struct {
		name string
		call awscall.Call
		want string
	}{
		{"claim decrypting content (key policy deny, no grant)", awscall.Call{Function: "claim", Action: "kms:Decrypt", Resource: key + "k-123",
			Context: map[string]string{"kms:EncryptionContext:purpose": "x"}}, "claim function: kms:Decrypt on " + key + "ContentKey is not allowed"},
		{"dispatch sending from another address", awscall.Call{Function: "dispatch", Action: "ses:SendEmail",
			Resource: "arn:aws:ses:us-east-1:000000000000:identity/run.test", Context: map[string]string{"ses:FromAddress": "ceo@run.test"}},
			"dispatch function: ses:SendEmail"},
		{"expire reading sealed content", awscall.Call{Function: "expire", Action: "dynamodb:GetItem", Resource: table + "content-x"},
			"expire function: dynamodb:GetItem on " + table + "ContentTable is not allowed"},
		{"reconcile querying the table instead of the index", awscall.Call{Function: "reconcile", Action: "dynamodb:Query", Resource: table + "ledger-x"},
			"reconcile function: dynamodb:Query on " + table + "LedgerTable is not allowed"},
		{"a call nobody mapped", awscall.Call{Function: "dispatch", Action: "unmapped:STS:GetCallerIdentity", Resource: "*"},
			"dispatch function: unmapped:STS:GetCallerIdentity"},
		{"reconcile polling the dispatch queue", awscall.Call{Function: "reconcile", Action: "sqs:ReceiveMessage", Resource: queue + "dispatchq-x"},
			"reconcile function: sqs:ReceiveMessage on " + queue + "DispatchQueue is not allowed"},
		{"expire re-driving a row", awscall.Call{Function: "expire", Action: "sqs:SendMessage", Resource: queue + "dispatchq-x"},
			"expire function: sqs:SendMessage on " + queue + "DispatchQueue is not allowed"},
		// Reconcile may read and update the dispatch marks in the budget table, never delete from it.
		{"reconcile deleting from the budget table", awscall.Call{Function: "reconcile", Action: "dynamodb:DeleteItem", Resource: table + "budget-x"},
			"reconcile function: dynamodb:DeleteItem on " + table + "BudgetTable is not allowed"},
		{"reconcile reading the SES account", awscall.Call{Function: "reconcile", Action: "ses:GetAccount", Resource: "*"},
			"reconcile function: ses:GetAccount on * is not allowed"},
	}
	for _, tc := range denied {
		t.Run(tc.name, func(t *testing.T) {
			problems, _ := checkPermissions(t, raw, props, iamRecording(tc.call))
			found := false
			for _, p := range problems {
				found = found || strings.HasPrefix(p, tc.want)
			}
			if !found {
				t.Errorf("no problem starting %q in %q", tc.want, problems)
			}
		})
	}
	t.Run("allowed calls pass", func(t *testing.T) {
		problems, _ := checkPermissions(t, raw, props, iamRecording(
			awscall.Call{Function: "reconcile", Action: "dynamodb:BatchGetItem", Resource: table + "ledger-x"},
			awscall.Call{Function: "reconcile", Action: "dynamodb:Query", Resource: table + "ledger-x/index/open"},
			awscall.Call{Function: "dispatch", Action: "kms:Decrypt", Resource: key + "k-123",
				Context: map[string]string{"kms:EncryptionContext:purpose": "x"}},
			awscall.Call{Function: "dispatch", Action: "ses:SendEmail", Resource: "arn:aws:ses:us-east-1:000000000000:identity/run.test",
				Context: map[string]string{"ses:FromAddress": "sender@run.test"}},
			awscall.Call{Function: "dispatch", Action: "dynamodb:UpdateItem", Resource: table + "budget-x"},
			awscall.Call{Function: "dispatch", Action: "dynamodb:GetItem", Resource: table + "budget-x"},
			awscall.Call{Function: "dispatch", Action: "sqs:SendMessage", Resource: queue + "dispatchq-x"},
			awscall.Call{Function: "dispatch", Action: "ses:GetAccount", Resource: "*"},
			awscall.Call{Function: "reconcile", Action: "sqs:SendMessage", Resource: queue + "dispatchq-x"},
			// Events' platform requests include SQS decrypting, under the provider events queue's
			// key, what its poller receives.
			awscall.Call{Function: "events", Action: "dynamodb:GetItem", Resource: table + "ledger-x"},
		))
		for _, p := range problems {
			if strings.Contains(p, "is not allowed") {
				t.Error(p)
			}
		}
		// Lambda's poller receives and deletes for the dispatch queue's mapping, with dispatch's
		// role: those grants count as exercised without a recorded call.
		for _, p := range problems {
			if strings.Contains(p, queue+"DispatchQueue is granted") {
				t.Errorf("the dispatch queue mapping's polling is not taken as the platform's: %s", p)
			}
		}
	})
}

// iamRecording is one recording of the calls, with the stack's resources
// bound to the test's names.
func iamRecording(calls ...awscall.Call) []awscall.Recording {
	out := awscall.Recording{Source: "test", Region: "us-east-1", Account: "000000000000",
		Binding: map[string]string{"ledger-x": "LedgerTable", "content-x": "ContentTable", "k-123": "ContentKey",
			"budget-x": "BudgetTable", "dispatchq-x": "DispatchQueue",
			"sender@run.test": awscall.SESFromAddress, "run.test": awscall.SESIdentity}}
	for _, c := range calls {
		out.Calls = append(out.Calls, awscall.Counted{Call: c, Count: 1})
	}
	return []awscall.Recording{out}
}

// webhookOnly reports whether a recorded call is one reconcile makes only with a webhook transport
// (settings.OpensContent): opening content for a same-key retry, kms:Decrypt on the content key
// and GetItem on the content table. The recorded runs send SMS through the webhook; a stage
// without one grants neither, and its reconcile makes neither call.
func webhookOnly(function string, r request) bool {
	if function != string(settings.Reconcile) {
		return false
	}
	return r.action == "kms:Decrypt" && strings.HasSuffix(r.resource, ":key/"+awscall.ContentKey) ||
		r.action == "dynamodb:GetItem" && strings.HasSuffix(r.resource, ":table/"+awscall.ContentTable)
}
