package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/resetledger/resetledger/internal/handler"
)

// functionURL stands in for the operator function's URL with AuthType
// AWS_IAM, in front of the real handler (handler.Operate over the
// fixture's table): it checks the request's SigV4 signature (service
// lambda, the fixture's region) against the credentials ledgerctl was run
// with, asks the emulator's STS who those credentials are, and hands the
// handler the request context AWS builds, with that caller in
// authorizer.iam. A request it cannot authenticate gets the URL's own
// 403, and never reaches the handler. The emulator's function URLs check
// only that a request is signed and pass no IAM context
// (docs/development.md), so this is the in-process stand-in.
type functionURL struct {
	t   *testing.T
	f   *fixture
	srv *httptest.Server

	mu    sync.Mutex
	creds map[string]aws.Config // by access key id: the configurations ledgerctl ran with
	// reached counts the requests that reached the handler.
	reached int
	// frozen stops knows from registering credentials: AWS knows the keys
	// it issued, not the secrets a client makes up.
	frozen bool
	// authNone serves the URL as AuthType NONE would: no signature check and
	// no IAM context in the request.
	authNone bool
}

func newFunctionURL(f *fixture) *functionURL {
	u := &functionURL{t: f.t, f: f, creds: map[string]aws.Config{}}
	u.srv = httptest.NewServer(u)
	f.t.Cleanup(u.srv.Close)
	return u
}

// knows registers the credentials of cfg, as AWS knows every key it issued.
func (u *functionURL) knows(cfg aws.Config) {
	if cfg.Credentials == nil {
		return
	}
	c, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		return // ledgerctl will not sign either
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.creds[c.AccessKeyID]; !u.frozen || !ok {
		u.creds[c.AccessKeyID] = cfg
	}
}

func forbidden(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-ErrorType", "AccessDeniedException")
	w.WriteHeader(http.StatusForbidden)
	_, _ = io.WriteString(w, `{"Message":"Forbidden"}`)
}

func (u *functionURL) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		forbidden(w)
		return
	}
	if u.authNone {
		u.serve(w, r, body, nil)
		return
	}
	cfg, ok := u.authenticate(r, body)
	if !ok {
		forbidden(w)
		return
	}
	who, err := sts.NewFromConfig(cfg).GetCallerIdentity(r.Context(), &sts.GetCallerIdentityInput{})
	if err != nil {
		forbidden(w) // expired or unknown credentials
		return
	}
	userARN := aws.ToString(who.Arn)
	u.serve(w, r, body, &events.LambdaFunctionURLRequestContextAuthorizerDescription{
		IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
			AccountID: aws.ToString(who.Account), UserARN: userARN, UserID: aws.ToString(who.UserId),
		},
	})
}

// serve hands the handler the request with the authorizer context given.
func (u *functionURL) serve(w http.ResponseWriter, r *http.Request, body []byte, authorizer *events.LambdaFunctionURLRequestContextAuthorizerDescription) {
	u.mu.Lock()
	u.reached++
	u.mu.Unlock()
	account := "anonymous"
	if authorizer != nil {
		a, _ := arn.Parse(authorizer.IAM.UserARN)
		account = a.AccountID
	}
	ev := events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: r.URL.Path, Body: string(body),
		Headers: map[string]string{"content-type": r.Header.Get("Content-Type")},
		RequestContext: events.LambdaFunctionURLRequestContext{
			AccountID: account, RequestID: "url-req-1", Authorizer: authorizer,
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path},
		},
	}
	h := &handler.Operate{Deps: handler.Deps{Log: slog.New(slog.NewJSONHandler(io.Discard, nil))}, UseCase: u.f.cases}
	resp, err := h.Handle(r.Context(), ev)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// authenticate checks r's SigV4 signature as AWS does: the credential's
// scope (service lambda, the region), and the signature recomputed over
// the signed headers and the body received, with the secret of the key it
// names.
func (u *functionURL) authenticate(r *http.Request, body []byte) (aws.Config, bool) {
	auth := r.Header.Get("Authorization")
	const alg = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, alg) {
		return aws.Config{}, false
	}
	var credential, signedHeaders string
	for _, part := range strings.Split(strings.TrimPrefix(auth, alg), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			credential = v
		case "SignedHeaders":
			signedHeaders = v
		}
	}
	scope := strings.Split(credential, "/") // key/date/region/service/aws4_request
	if len(scope) != 5 || scope[3] != "lambda" || scope[2] != u.f.cfg.Region {
		return aws.Config{}, false
	}
	u.mu.Lock()
	cfg, ok := u.creds[scope[0]]
	u.mu.Unlock()
	if !ok {
		return aws.Config{}, false
	}
	c, err := cfg.Credentials.Retrieve(context.Background())
	if err != nil {
		return aws.Config{}, false
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil || time.Since(at).Abs() > 5*time.Minute {
		return aws.Config{}, false
	}
	again, err := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), strings.NewReader(string(body)))
	if err != nil {
		return aws.Config{}, false
	}
	again.ContentLength = int64(len(body))
	for _, h := range strings.Split(signedHeaders, ";") {
		if h != "host" && h != "content-length" {
			again.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	again.Header.Del("Authorization")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), c, again, hex.EncodeToString(sum[:]), "lambda", scope[2], at); err != nil {
		return aws.Config{}, false
	}
	return cfg, again.Header.Get("Authorization") == auth
}
