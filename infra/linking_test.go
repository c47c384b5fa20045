package main

import (
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// A function links what its role may call: TestFunctionsLinkWhatTheirRolesMayCall compares the
// AWS service clients each function's binary links (the import graph of ./functions/<name>, as
// the Makefile builds it) with the services its role lets the binary call in the synthesized
// template, and fails on a difference either way.

// sdkServicePrefix is the import path of the SDK's service client packages.
const sdkServicePrefix = "github.com/aws/aws-sdk-go-v2/service/"

// iamPrefixOf maps a service client package (the last element of its import path) to the IAM
// action prefix of its calls. A linked service missing here fails the test until it is added.
var iamPrefixOf = map[string]string{
	"dynamodb":           "dynamodb",
	"dynamodbstreams":    "dynamodb", // DynamoDB Streams' actions are dynamodb:DescribeStream, GetShardIterator, GetRecords
	"kms":                "kms",
	"sqs":                "sqs",
	"sesv2":              "ses",
	"pinpointsmsvoicev2": "sms-voice",
	"secretsmanager":     "secretsmanager",
	"s3":                 "s3",
}

// credentialClients are the service clients the SDK's default configuration loader
// (aws-sdk-go-v2/config, through internal/sdkhttp) links for its credential providers: STS for web
// identity and assumed roles, SSO and SSO OIDC for SSO profiles, Sign-In for console login
// sessions. A Lambda function's credentials are its role's session, read from the environment,
// the first provider in the chain, so none of these is called, and none would be an action of the
// function's role if it were. They are exempt only while nothing but the SDK's config and
// credentials packages imports them.
var credentialClients = []string{"signin", "sso", "ssooidc", "sts"}

// credentialImporters are the import paths allowed to import credentialClients.
var credentialImporters = []string{"github.com/aws/aws-sdk-go-v2/config", "github.com/aws/aws-sdk-go-v2/credentials/"}

// pollerActions are the calls a Lambda event source mapping makes with the function's role to
// read its source: the platform's calls, not the binary's, when granted on that source.
var pollerActions = map[string]bool{
	"sqs:ReceiveMessage": true, "sqs:DeleteMessage": true, "sqs:GetQueueAttributes": true, "sqs:ChangeMessageVisibility": true,
	"dynamodb:DescribeStream": true, "dynamodb:GetRecords": true, "dynamodb:GetShardIterator": true, "dynamodb:ListStreams": true,
}

// destinationActions are the calls Lambda makes with the role to send a batch that failed for
// good to the mapping's on-failure destination.
var destinationActions = map[string]bool{"sqs:SendMessage": true, "sqs:GetQueueAttributes": true, "sqs:GetQueueUrl": true, "sns:Publish": true}

// linkedForWebhook are the clients a function links for a configuration the stage may not have:
// reconcile opens content (kms:Decrypt on the content key) only when a channel goes through the
// webhook (settings.OpensContent), so a stage without one grants it no KMS call its binary makes,
// while the same binary serves the stages with one. The "local" stage checks it is granted there.
var linkedForWebhook = map[settings.Role][]string{settings.Reconcile: {"kms"}}

// linkedFunctions are the functions whose binaries are checked: the five and the operator function.
var linkedFunctions = append(slices.Clone(settings.Functions), settings.Operate, settings.Digest)

func TestFunctionsLinkWhatTheirRolesMayCall(t *testing.T) {
	linked := map[settings.Role][]string{}
	for _, name := range linkedFunctions {
		linked[name] = linkedServices(t, name)
	}
	stages := []struct {
		name   string
		mutate func(*LedgerStackProps)
		// exact: the binary calls everything it links in this stage, but for unused. The binary is
		// the same in every stage; a stage that sends a channel through the webhook leaves the
		// binary's SMS client unused, and one without a webhook the Secrets Manager client (the
		// webhook's signing secret), so there only the other direction is checked for them.
		exact  bool
		unused []string
	}{
		{"production", nil, true, []string{"secretsmanager"}},
		{"production with a configured email rate", func(p *LedgerStackProps) { p.Functions.SendRates[ledger.Email] = 14 }, true, []string{"secretsmanager"}},
		{"production with email through a webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.Email], p.Functions.WebhookURL, p.Functions.SESFrom = settings.TransportWebhook, "https://gw.example.com/send", ""
		}, true, []string{"ses"}},
		{"local", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL, p.Functions.WebhookKeyWindow =
				settings.TransportWebhook, "http://127.0.0.1:4599/send", 0
			p.DeletionProtection, p.PointInTimeRecovery, p.Functions.LogAWSCalls = false, false, true
		}, true, []string{"sms-voice"}},
	}
	for _, st := range stages {
		t.Run(st.name, func(t *testing.T) {
			calls := binaryCalls(t, synth(t, st.mutate))
			for _, name := range linkedFunctions {
				granted := slices.Sorted(maps.Keys(calls[name]))
				for _, svc := range linked[name] {
					if _, ok := calls[name][svc]; !ok && st.exact && !slices.Contains(st.unused, svc) &&
						!(slices.Contains(linkedForWebhook[name], svc) && !webhookStage(st.mutate)) {
						t.Errorf("%s links the %s client, but its role may not call %s", name, svc, svc)
					}
				}
				for _, svc := range linkedForWebhook[name] {
					if _, ok := calls[name][svc]; ok != webhookStage(st.mutate) {
						t.Errorf("%s's role may call %s: %v, want %v (a channel through the webhook: %v)", name, svc, ok, !ok, webhookStage(st.mutate))
					}
				}
				for _, svc := range granted {
					if !slices.Contains(linked[name], svc) {
						t.Errorf("%s's role may call %s (%s), but the binary does not link a %s client",
							name, svc, strings.Join(calls[name][svc], ", "), svc)
					}
				}
				t.Logf("%s: links %v; the role lets it call %v", name, linked[name], calls[name])
			}
		})
	}
}

// linkedServices returns the IAM prefixes of the AWS service clients ./functions/<name> links,
// from its import graph as `make build` builds it, without the credential providers'.
func linkedServices(t *testing.T, name settings.Role) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "lambda.norpc", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"./functions/"+string(name))
	cmd.Dir = ".."
	cmd.Env = append(cmd.Environ(), "GOOS=linux", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list ./functions/%s: %v\n%s", name, err, stderr)
	}
	var svcs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		for _, imp := range imports {
			if svc, ok := serviceClient(imp); ok && slices.Contains(credentialClients, svc) && !credentialImporter(pkg) {
				t.Errorf("%s: %s imports the %s client, which is exempt only as a credential provider of the SDK's config", name, pkg, svc)
			}
		}
		svc, ok := serviceClient(pkg)
		if !ok || slices.Contains(credentialClients, svc) {
			continue
		}
		prefix, ok := iamPrefixOf[svc]
		if !ok {
			t.Errorf("%s links %s, whose IAM prefix iamPrefixOf does not know", name, pkg)
			prefix = svc
		}
		svcs = append(svcs, prefix)
	}
	slices.Sort(svcs)
	return slices.Compact(svcs)
}

// serviceClient reports the service of a service client package: .../service/<svc>, not its
// types or internal packages, which declare data and cannot call anything.
func serviceClient(pkg string) (string, bool) {
	svc, ok := strings.CutPrefix(pkg, sdkServicePrefix)
	if !ok || strings.Contains(svc, "/") || svc == "internal" {
		return "", false
	}
	return svc, true
}

func credentialImporter(pkg string) bool {
	for _, p := range credentialImporters {
		if pkg == p || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p) {
			return true
		}
	}
	return false
}

// binaryCalls returns, per function, the services its role lets the binary call, each with the
// actions that make it so. Grants the platform uses on the function's behalf are left out:
//   - a statement with a kms:ViaService condition: the key is used by that service (DynamoDB for
//     the tables, SQS for the provider events queue) for the function's reads and writes, never
//     by a KMS call of the binary;
//   - logs: Lambda writes the function's output to its log group;
//   - an event source mapping's reads of its source (pollerActions on the mapping's queue or
//     stream: claim's intent queue, dispatch's stream and queue, events' queue; and
//     dynamodb:ListStreams on "*" for a stream mapping);
//   - the sends to a mapping's on-failure destination (destinationActions on it).
//
// A role with a managed policy, or an action of these kinds on another resource, counts as
// the binary's.
func binaryCalls(t *testing.T, s *synthesized) map[settings.Role]map[string][]string {
	t.Helper()
	byLogical, roleOf := linkedRoles(t, s)
	if len(byLogical) != len(linkedFunctions) {
		t.Fatalf("want %d functions in the template, found %v", len(linkedFunctions), byLogical)
	}
	for id, r := range s.resources("AWS::IAM::Role") {
		if name, ok := roleOf[id]; ok && props(r)["ManagedPolicyArns"] != nil {
			t.Errorf("%s's role has managed policies %s: this test reads inline policies only", name, mustJSON(props(r)["ManagedPolicyArns"]))
		}
	}
	// The platform's resources per function: event sources and on-failure destinations.
	sources, destinations := map[settings.Role][]string{}, map[settings.Role][]string{}
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		p := props(m)
		ref, _ := p["FunctionName"].(map[string]any)["Ref"].(string)
		name, ok := byLogical[ref]
		if !ok {
			t.Fatalf("event source mapping of an unknown function: %s", mustJSON(p["FunctionName"]))
		}
		sources[name] = append(sources[name], mustJSON(p["EventSourceArn"]))
		if dc, ok := p["DestinationConfig"].(map[string]any); ok {
			if of, ok := dc["OnFailure"].(map[string]any); ok {
				destinations[name] = append(destinations[name], mustJSON(of["Destination"]))
			}
		}
	}
	calls := map[settings.Role]map[string][]string{}
	for _, name := range linkedFunctions {
		calls[name] = map[string][]string{}
	}
	for _, pol := range s.resources("AWS::IAM::Policy") {
		pp := props(pol)
		for _, role := range list(pp["Roles"]) {
			ref, _ := role.(map[string]any)["Ref"].(string)
			name, ok := roleOf[ref]
			if !ok {
				continue
			}
			for _, st := range list(pp["PolicyDocument"].(map[string]any)["Statement"]) {
				stmt := st.(map[string]any)
				if stmt["Effect"] != "Allow" || viaService(stmt) {
					continue
				}
				for _, a := range list(stmt["Action"]) {
					action := a.(string)
					svc, _, _ := strings.Cut(action, ":")
					if svc == "logs" {
						continue
					}
					platform := true
					for _, r := range list(stmt["Resource"]) {
						res := mustJSON(r)
						// ListStreams has no resource-level permission: on "*", it is the stream
						// mapping's when the function has one.
						onSource := pollerActions[action] && (slices.Contains(sources[name], res) ||
							action == "dynamodb:ListStreams" && res == `"*"` && slices.ContainsFunc(sources[name], isStream))
						onDestination := destinationActions[action] && slices.Contains(destinations[name], res)
						platform = platform && (onSource || onDestination)
					}
					if platform && slices.Contains(codeReadsItsSource[name], action) {
						platform = false // the code makes the poller's call too
					}
					if !platform && !slices.Contains(calls[name][svc], action) {
						calls[name][svc] = append(calls[name][svc], action)
					}
				}
			}
		}
	}
	return calls
}

// codeReadsItsSource are the poller's actions a function's own code also calls on its event
// source: the digest function reads its batch back from the ledger stream before it signs it
// (internal/digeststream, confirm; issue 42).
var codeReadsItsSource = map[settings.Role][]string{
	settings.Digest: {"dynamodb:DescribeStream", "dynamodb:GetShardIterator", "dynamodb:GetRecords"},
}

// linkedRoles maps the linked functions' logical ids and their roles' logical
// ids to the functions.
func linkedRoles(t *testing.T, s *synthesized) (byLogical, roleOf map[string]settings.Role) {
	t.Helper()
	byLogical, roleOf = map[string]settings.Role{}, map[string]settings.Role{}
	for id, fn := range s.resources("AWS::Lambda::Function") {
		p := props(fn)
		name, ok := strings.CutPrefix(fmt.Sprint(p["FunctionName"]), "resetledger-test-")
		if !ok || !slices.Contains(linkedFunctions, settings.Role(name)) {
			continue
		}
		byLogical[id] = settings.Role(name)
		ga, _ := p["Role"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(ga) != 2 {
			t.Fatalf("function %s: role is not a role of the stack: %s", name, mustJSON(p["Role"]))
		}
		roleOf[ga[0].(string)] = settings.Role(name)
	}
	return byLogical, roleOf
}

// isStream reports whether an event source ARN expression is a table's stream.
func isStream(arn string) bool { return strings.Contains(arn, `"StreamArn"`) }

// viaService reports whether a statement allows its actions only when another AWS service
// makes the request (a kms:ViaService condition).
func viaService(stmt map[string]any) bool {
	cond, _ := stmt["Condition"].(map[string]any)
	for _, op := range cond {
		if m, ok := op.(map[string]any); ok {
			if _, ok := m["kms:ViaService"]; ok {
				return true
			}
		}
	}
	return false
}

// webhookStage reports whether a stage of TestFunctionsLinkWhatTheirRolesMayCall sends a channel
// through the webhook.
func webhookStage(mutate func(*LedgerStackProps)) bool {
	p := DefaultLedgerStackProps("test")
	if mutate != nil {
		mutate(p)
	}
	return p.Functions.OpensContent(settings.Reconcile)
}
