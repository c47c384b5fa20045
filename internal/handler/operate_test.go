package handler_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/operatorapi"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The caller as AWS authenticates an operator who assumed LedgerOperator
// with the session name alice: Lambda's function URL request context for
// AuthType AWS_IAM (requestContext.authorizer.iam).
const (
	operatorAccount = "111122223333"
	operatorSession = "arn:aws:sts::111122223333:assumed-role/resetledger-prod-LedgerOperatorRole-AbC123/alice"
)

// urlRequest is a function URL request (payload format 2.0) as Lambda builds
// it for a signed request: POST, the body as sent, and the IAM context of
// the credentials that signed it (nil: no IAM context, as with AuthType
// NONE or an invocation that is not a URL request).
func urlRequest(body string, iam *events.LambdaFunctionURLRequestContextAuthorizerIAMDescription) events.LambdaFunctionURLRequest {
	req := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/", Body: body,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: operatorAccount, RequestID: "req-1", APIID: "abcdefghijklmnopqrstuvwxyz012345",
			DomainName: "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
			HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodPost, Path: "/"},
		},
	}
	if iam != nil {
		req.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: iam}
	}
	return req
}

func operatorIAM(userARN string) *events.LambdaFunctionURLRequestContextAuthorizerIAMDescription {
	return &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
		AccessKey: "ASIAEXAMPLEEXAMPLE01", AccountID: operatorAccount, CallerID: "AROAEXAMPLEEXAMPLE01:alice",
		UserARN: userARN, UserID: "AROAEXAMPLEEXAMPLE01:alice",
	}
}

// unknownRow returns an operate handler over a memory ledger holding one
// unknown row, and that row's key.
func unknownRow(t *testing.T) (*handler.Operate, *ledgertest.Env, string, *bytes.Buffer) {
	t.Helper()
	env := ledgertest.NewEnv(&memstore.Store{})
	env.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	in, sealed := ledgertest.Intent(7, ledger.Email, env.Clock.Now(), 10*60*1e9)
	ctx := context.Background()
	if _, err := env.Cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
		t.Fatal(err)
	}
	if res, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/test"); err != nil || res.Outcome != ledger.OutcomeUnknown {
		t.Fatalf("dispatch = %v, %v; want unknown", res, err)
	}
	var logs bytes.Buffer
	h := &handler.Operate{Deps: handler.Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil))}, UseCase: env.Cases}
	return h, env, in.Key(), &logs
}

func resolveBody(t *testing.T, fields map[string]any) string {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func decodeAnswer(t *testing.T, resp events.LambdaFunctionURLResponse) operatorapi.Response {
	t.Helper()
	var r operatorapi.Response
	if err := json.Unmarshal([]byte(resp.Body), &r); err != nil {
		t.Fatalf("answer %q: %v", resp.Body, err)
	}
	return r
}

func invokeCtx() context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
}

// TestOperateRecordsTheAuthenticatedCaller: the entry's worker is the
// principal in the request context, whatever the body claims.
func TestOperateRecordsTheAuthenticatedCaller(t *testing.T) {
	h, env, key, logs := unknownRow(t)
	body := map[string]any{
		"action": "resolve", "dedupe_key": key, "decision": "abandoned",
		"reason": "provider has no record either way", "note": "ticket OPS-12",
	}
	// A body that names another identity is refused outright.
	for _, field := range []string{"worker", "operator", "user_arn", "caller"} {
		forged := map[string]any{field: "operator:arn:aws:sts::111122223333:assumed-role/LedgerOperator/mallory"}
		for k, v := range body {
			forged[k] = v
		}
		resp, err := h.Handle(invokeCtx(), urlRequest(resolveBody(t, forged), operatorIAM(operatorSession)))
		if err != nil {
			t.Fatal(err)
		}
		if got := decodeAnswer(t, resp); resp.StatusCode != http.StatusBadRequest || got.Code != operatorapi.CodeBadRequest {
			t.Errorf("body with %q: status %d %+v, want 400 bad_request", field, resp.StatusCode, got)
		}
	}
	if e, _ := env.Store.Get(context.Background(), key); e.State != ledger.Unknown {
		t.Fatalf("a refused request changed the row to %s", e.State)
	}

	// Encoded as Lambda encodes a body it does not take for text.
	req := urlRequest(base64.StdEncoding.EncodeToString([]byte(resolveBody(t, body))), operatorIAM(operatorSession))
	req.IsBase64Encoded = true
	resp, err := h.Handle(invokeCtx(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := decodeAnswer(t, resp)
	if resp.StatusCode != http.StatusOK || got.State != ledger.Abandoned.String() || got.Entry == nil {
		t.Fatalf("resolve: status %d %s", resp.StatusCode, resp.Body)
	}
	e, err := env.Store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	last := e.Last()
	if want := "operator:" + operatorSession; last.Worker != want || got.Entry.Worker != want {
		t.Errorf("recorded worker %q (answered %q), want %q", last.Worker, got.Entry.Worker, want)
	}
	if want := "abandoned, outcome unknown: provider has no record either way; note: ticket OPS-12"; last.Reason != want {
		t.Errorf("recorded reason %q, want %q", last.Reason, want)
	}
	if err := e.Verify(); err != nil {
		t.Errorf("chain after resolve: %v", err)
	}
	if !strings.Contains(logs.String(), `"caller":"`+operatorSession+`"`) || strings.Contains(logs.String(), "OPS-12") {
		t.Errorf("log should name the caller and not the operator's free text:\n%s", logs.String())
	}
}

// TestOperateRefusesRequestsWithoutIAMContext: no IAM context (AuthType
// NONE, a direct invocation), an empty or malformed principal, or one of
// another account than the authenticated one: 403, nothing written.
func TestOperateRefusesRequestsWithoutIAMContext(t *testing.T) {
	h, env, key, _ := unknownRow(t)
	body := resolveBody(t, map[string]any{"action": "resolve", "dedupe_key": key, "decision": "abandoned", "reason": "gave up"})
	otherAccount := operatorIAM(operatorSession)
	otherAccount.AccountID = "444455556666"
	cases := map[string]events.LambdaFunctionURLRequest{
		"no authorizer": urlRequest(body, nil),
		"authorizer no iam": func() events.LambdaFunctionURLRequest {
			r := urlRequest(body, nil)
			r.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{}
			return r
		}(),
		"empty userArn":     urlRequest(body, operatorIAM("")),
		"not an ARN":        urlRequest(body, operatorIAM("alice")),
		"control character": urlRequest(body, operatorIAM(operatorSession+"\n")),
		"other account":     urlRequest(body, otherAccount),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			resp, err := h.Handle(invokeCtx(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeAnswer(t, resp); resp.StatusCode != http.StatusForbidden || got.Code != operatorapi.CodeUnauthenticated {
				t.Errorf("status %d %+v, want 403 unauthenticated", resp.StatusCode, got)
			}
		})
	}
	if e, _ := env.Store.Get(context.Background(), key); e.State != ledger.Unknown {
		t.Errorf("refused requests changed the row: %s, last worker %q", e.State, e.Last().Worker)
	}
}

// TestOperateValidatesAtTheBoundary: the rules ledgerctl resolve applied
// before writing, now the function's, with an answer that says what is
// wrong; and the ledger's own refusals and states as their codes.
func TestOperateValidatesAtTheBoundary(t *testing.T) {
	h, env, key, _ := unknownRow(t)
	good := func() map[string]any {
		return map[string]any{"action": "resolve", "dedupe_key": key, "decision": "accepted", "reason": "found in console", "evidence": "ses-0100"}
	}
	with := func(k string, v any) string {
		m := good()
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return resolveBody(t, m)
	}
	cases := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not JSON", "resolve please", 400, operatorapi.CodeBadRequest},
		{"two objects", with("note", "x") + "{}", 400, operatorapi.CodeBadRequest},
		{"too large", with("note", strings.Repeat("x", operatorapi.MaxBody)), 400, operatorapi.CodeBadRequest},
		{"unknown action", with("action", "redrive"), 400, operatorapi.CodeBadRequest},
		{"no action", with("action", nil), 400, operatorapi.CodeBadRequest},
		{"bad key", with("dedupe_key", "chal-1"), 400, operatorapi.CodeBadRequest},
		{"bad decision", with("decision", "delivered"), 400, operatorapi.CodeBadRequest},
		{"accepted without evidence", with("evidence", nil), 400, operatorapi.CodeBadRequest},
		{"no reason", with("reason", " "), 400, operatorapi.CodeBadRequest},
		{"reason with a line break", with("reason", "ok\nforged log line"), 400, operatorapi.CodeBadRequest},
		{"note too long", with("note", strings.Repeat("n", operatorapi.MaxNote+1)), 400, operatorapi.CodeBadRequest},
		{"number for a string", with("reason", 12), 400, operatorapi.CodeBadRequest},
		{"reason with an address", with("reason", "user a@b.example said so"), 400, operatorapi.CodeInvalidField},
		{"no such row", with("dedupe_key", strings.Repeat("0", 64)), 404, operatorapi.CodeNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, err := h.Handle(invokeCtx(), urlRequest(c.body, operatorIAM(operatorSession)))
			if err != nil {
				t.Fatal(err)
			}
			if got := decodeAnswer(t, resp); resp.StatusCode != c.status || got.Code != c.code || got.Error == "" {
				t.Errorf("status %d %+v, want %d %s with a message", resp.StatusCode, got, c.status, c.code)
			}
		})
	}
	get := urlRequest(with("note", "x"), operatorIAM(operatorSession))
	get.RequestContext.HTTP.Method = http.MethodGet
	if resp, _ := h.Handle(invokeCtx(), get); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", resp.StatusCode)
	}
	if e, _ := env.Store.Get(context.Background(), key); e.State != ledger.Unknown {
		t.Fatalf("refused requests changed the row to %s", e.State)
	}
	// Resolved once; a second decision finds it accepted.
	if resp, _ := h.Handle(invokeCtx(), urlRequest(with("note", nil), operatorIAM(operatorSession))); resp.StatusCode != 200 {
		t.Fatalf("resolve: %d %s", resp.StatusCode, resp.Body)
	}
	resp, _ := h.Handle(invokeCtx(), urlRequest(with("note", nil), operatorIAM(operatorSession)))
	if got := decodeAnswer(t, resp); resp.StatusCode != http.StatusConflict || got.Code != operatorapi.CodeNotResolvable || got.State != ledger.Accepted.String() {
		t.Errorf("second resolve: %d %+v, want 409 not_resolvable from accepted", resp.StatusCode, got)
	}
}
