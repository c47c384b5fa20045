package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/operatorapi"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestOperatorResolveRecordsTheAuthenticatedCaller resolves an unknown row of the deployed
// ledger through the deployed operator function, and finds the caller the request carried
// recorded as the entry's worker, not the identity the body claims.
//
// The emulator's function URLs check that a request is signed but hand the function no IAM
// context (docs/development.md), so the function refuses them: the first check. The decision is
// then made as the emulator allows, by invoking the function with the event a function URL
// request with AuthType AWS_IAM makes on AWS (payload format 2.0, requestContext.authorizer.iam).
// That the URL's AWS_IAM auth and resource policy let only operators in is proven by infra's
// template and boundary tests.
func TestOperatorResolveRecordsTheAuthenticatedCaller(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	named := e.outputs(t, outputs.OperatorFunction, outputs.OperatorFunctionURL)
	fn, rawURL := named[0], named[1]
	key := e.unknownRow(t)
	body, err := json.Marshal(operatorapi.Request{
		Action: operatorapi.ActionResolve, DedupeKey: key, Decision: string(ledger.DecideAbandoned),
		Reason: "e2e: provider has no record either way", Note: "e2e",
	})
	if err != nil {
		t.Fatal(err)
	}

	// 1. Through the emulator's function URL, signed: no IAM context reaches the function.
	u, err := url.Parse(rawURL)
	if err != nil || !strings.Contains(u.Host, ".lambda-url.") {
		t.Fatalf("%s = %q, want a function URL", outputs.OperatorFunctionURL.Name, rawURL)
	}
	urlID, _, _ := strings.Cut(u.Host, ".")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.endpoint, "/")+"/_aws/lambda-url/"+urlID+"/", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signedDo(ctx, creds, e.cfg.Region, "lambda", req, body); err == nil || !strings.Contains(err.Error(), operatorapi.CodeUnauthenticated) {
		t.Errorf("the emulator's function URL: %v; want the function's 403 %s (the emulator passes no IAM context; "+
			"if it now does, let this test resolve through the URL and update docs/development.md)", err, operatorapi.CodeUnauthenticated)
	}
	// (Reconcile may look at the unknown row meanwhile; no operator may have.)
	for _, ev := range e.rowNow(t, key).History {
		if strings.HasPrefix(ev.Worker, operatorapi.WorkerPrefix) {
			t.Fatalf("a request without an authenticated caller was recorded: %+v", ev)
		}
	}

	// 2. As a function URL request AWS authenticated for an operator session.
	account := strings.Split(e.out.ContentKeyARN, ":")[4]
	caller := fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s-LedgerOperatorRole/e2e-%d", account, e.out.Stack, time.Now().UnixNano())
	urlEvent := func(body []byte) events.LambdaFunctionURLRequest {
		return operatorURLEvent(account, urlID, u.Host, caller, body)
	}

	// A body naming someone else is refused.
	forged := strings.Replace(string(body), "{", `{"worker":"operator:arn:aws:sts::`+account+`:assumed-role/LedgerOperator/mallory",`, 1)
	if resp := e.invokeURLEvent(t, fn, urlEvent([]byte(forged))); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a body naming a worker: %d %s, want 400", resp.StatusCode, resp.Body)
	}
	resp := e.invokeURLEvent(t, fn, urlEvent(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resolve through the operator function: %d %s", resp.StatusCode, resp.Body)
	}
	got := e.rowNow(t, key)
	last := got.Last()
	if got.State != ledger.Abandoned || last.To != ledger.Abandoned || last.Worker != operatorapi.WorkerPrefix+caller {
		t.Errorf("after resolve: state %s, worker %q; want abandoned by %q", got.State, last.Worker, operatorapi.WorkerPrefix+caller)
	}
	if want := "abandoned, outcome unknown: e2e: provider has no record either way; note: e2e"; last.Reason != want {
		t.Errorf("reason %q, want %q", last.Reason, want)
	}
	if err := got.Verify(); err != nil {
		t.Errorf("the resolved row's chain: %v", err)
	}
}

// operatorURLEvent is the function URL request AWS would pass the operator
// function for body, authenticated as caller in account.
func operatorURLEvent(account, urlID, host, caller string, body []byte) events.LambdaFunctionURLRequest {
	return events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Body: string(body), Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: account, APIID: urlID, DomainName: host, DomainPrefix: urlID, RequestID: "e2e-operator",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost, Path: "/"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{
				IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
					AccountID: account, UserARN: caller, CallerID: "AROAE2EOPERATOR:e2e", UserID: "AROAE2EOPERATOR:e2e",
				},
			},
		},
	}
}

// unknownRow writes a row whose outcome is unknown into the deployed ledger and returns its key:
// claimed and dispatched in memory, where the transport took the message and the answer was lost,
// then stored as it stands. An inserted unknown row starts no dispatch.
func (e *env) unknownRow(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	mem := ledgertest.NewEnv(&memstore.Store{})
	mem.Clock = ledgertest.NewClockAt(time.Now().UTC().Truncate(time.Millisecond))
	mem.Cases.Clock = mem.Clock.Now
	mem.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	in, sealed := ledgertest.Intent(1, ledger.Email, mem.Clock.Now(), 10*time.Minute)
	in.ChallengeID = fmt.Sprintf("e2e-operator-%d", time.Now().UnixNano())
	in.DestinationRef = "acct-e2e-operator:email"
	if _, err := mem.Cases.Claim(ctx, in, sealed, "claim/e2e"); err != nil {
		t.Fatal(err)
	}
	res, err := mem.Cases.Dispatch(ctx, in.Key(), "dispatch/e2e")
	if err != nil || res.Outcome != ledger.OutcomeUnknown {
		t.Fatalf("in-memory dispatch: %v %v, want unknown", res.Outcome, err)
	}
	if _, err := e.store.Create(ctx, res.Entry); err != nil {
		t.Fatalf("store the unknown row: %v", err)
	}
	return in.Key()
}

func (e *env) rowNow(t *testing.T, key string) ledger.Entry {
	t.Helper()
	got, err := e.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// invokeURLEvent invokes function with ev (Lambda Invoke, RequestResponse) and returns the
// function URL response it answers.
func (e *env) invokeURLEvent(t *testing.T, function string, ev events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	t.Helper()
	ctx := context.Background()
	payload, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u := strings.TrimRight(e.endpoint, "/") + "/2015-03-31/functions/" + url.PathEscape(function) + "/invocations"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(string(payload)))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := signedDo(ctx, creds, e.cfg.Region, "lambda", req, payload)
	if err != nil {
		t.Fatalf("invoke %s: %v", function, err)
	}
	var resp events.LambdaFunctionURLResponse
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("invoke %s: answer %.300s: %v", function, raw, err)
	}
	return resp
}
