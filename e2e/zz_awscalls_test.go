package e2e

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
)

// TestEndToEndAWSCalls reads back the AWS calls the deployed functions logged
// (the local stage sets LEDGER_AWSCALL_LOG) during this and earlier runs on
// the stack, and writes them as a recording for infra's TestIAMCoverage,
// with the binding of the stack's physical names to the template's.
//
// It runs last (go test runs the files in name order, and this file's name
// sorts after the others'), so the calls of every other test on the stack are
// in: TestEndToEnd's, the producers', and the send limits' (whose refused
// admissions read the subject index).
func TestEndToEndAWSCalls(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := &awscall.Recorder{}
	perFunction := map[string]int{}
	for role, fn := range map[string]string{
		"claim": e.out.ClaimFunction, "dispatch": e.out.DispatchFunction,
		"reconcile": e.out.ReconcileFunction, "expire": e.out.ExpireFunction,
		// The operator function's calls, from TestOperatorResolveRecordsTheAuthenticatedCaller.
		"operate": e.out.All[outputs.OperatorFunction.Name],
	} {
		if fn == "" {
			continue
		}
		events, err := FilterLogEvents(ctx, e.cfg, e.endpoint, LogGroup(fn), `"`+awscall.LogMessage+`"`, time.Now().Add(-24*time.Hour))
		if err != nil {
			t.Fatalf("%s logs: %v", role, err)
		}
		for _, ev := range events {
			var line struct {
				Msg  string       `json:"msg"`
				Call awscall.Call `json:"aws_call"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(ev.Message)), &line) != nil || line.Msg != awscall.LogMessage {
				continue
			}
			if line.Call.Function != role {
				t.Errorf("function %s logged a call as %q", fn, line.Call.Function)
			}
			rec.Add(line.Call)
			perFunction[role]++
		}
	}
	// Claim and dispatch run for every message TestEndToEnd sent: a stack
	// deployed without call logging, or logs that stopped arriving, would
	// otherwise leave the deployed roles unchecked.
	for _, role := range []string{"claim", "dispatch"} {
		if perFunction[role] == 0 {
			t.Errorf("no AWS calls logged by the deployed %s function: is the stack deployed with -c logAwsCalls=true?", role)
		}
	}
	t.Logf("AWS calls logged: %v (%d distinct)", perFunction, len(rec.Calls()))

	binding := deployedBinding(e)
	err := awscall.WriteRecording("deployed-"+e.out.Stack, awscall.Recording{
		Source: "deployed stack " + e.out.Stack, Region: e.cfg.Region, Account: emulator.Account,
		Binding: binding, Calls: rec.Calls(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deployedBinding names the deployed stack's resources as the recording's
// binding does: tables, keys, the SES sender and identity, the digest bucket,
// the dispatch queue and the webhook secret, each only when deployed.
func deployedBinding(e *env) map[string]string {
	keyID := e.out.ContentKeyARN[strings.LastIndex(e.out.ContentKeyARN, "/")+1:]
	sender := sesSender()
	_, domain, _ := strings.Cut(sender, "@")
	binding := map[string]string{
		e.out.LedgerTable: awscall.LedgerTable, e.out.ContentTable: awscall.ContentTable, keyID: awscall.ContentKey,
		sender: awscall.SESFromAddress, domain: awscall.SESIdentity,
	}
	// A stack deployed before the budget table and the dispatch queue has no such outputs (an
	// empty name must not be bound: it would match everywhere).
	if e.out.BudgetTable != "" {
		binding[e.out.BudgetTable] = awscall.BudgetTable
	}
	if e.out.LimitsTable != "" {
		binding[e.out.LimitsTable] = awscall.LimitsTable
	}
	if e.out.SESConfigurationSet != "" {
		binding[e.out.SESConfigurationSet] = awscall.SESConfigurationSet
	}
	for arn, name := range map[string]string{
		e.out.AttemptProofKeyARN: awscall.AttemptProofKey, e.out.IntentKeyARN: awscall.IntentKey,
		e.out.FingerprintKeyARN: awscall.FingerprintKey, e.out.All[outputs.DigestKeyARN.Name]: awscall.DigestKey,
	} {
		if arn != "" {
			binding[arn[strings.LastIndex(arn, "/")+1:]] = name
		}
	}
	if b := e.out.All[outputs.DigestBucket.Name]; b != "" {
		binding[b] = awscall.DigestBucket
	}
	if u := e.out.DispatchQueueURL; u != "" {
		binding[u[strings.LastIndex(u, "/")+1:]] = awscall.DispatchQueue
	}
	if a := e.out.All[outputs.WebhookSecretARN.Name]; a != "" {
		// The secret's name with Secrets Manager's random suffix: the last element of its ARN.
		binding[a[strings.LastIndex(a, ":")+1:]] = awscall.WebhookSecret
	}
	return binding
}

// sesSender is the local stage's SES from address: SES_FROM_ADDRESS, as
// localstack/deploy-local.sh reads it, with the same default.
func sesSender() string {
	if v := strings.TrimSpace(os.Getenv("SES_FROM_ADDRESS")); v != "" {
		return v
	}
	return "no-reply@ledger.example.test"
}
