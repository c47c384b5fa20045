package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/resetledger/resetledger/internal/operatorapi"
	"github.com/resetledger/resetledger/internal/outputs"
)

// operatorURLEnv is the variable that gives ledgerctl the operator
// function's URL (the stack's output OperatorFunctionUrl).
var operatorURLEnv = outputs.OperatorFunctionURL.Env

// maxAnswer bounds the operator function's answer ledgerctl reads.
const maxAnswer = 64 << 10

// operateTimeout bounds one request to the operator function: one ledger
// read and one conditional write, plus a cold start.
const operateTimeout = 30 * time.Second

// operateError is the operator function's refusal of a request.
type operateError struct {
	status int
	answer operatorapi.Response
}

func (e *operateError) Error() string {
	return fmt.Sprintf("the operator function refused the request (%d %s): %s", e.status, e.answer.Code, e.answer.Error)
}

// operate posts r to the operator function's URL, signed with SigV4 for
// service lambda with the caller's credentials, and returns its answer. The
// function records the principal AWS authenticated from that signature; no
// identity is sent.
func (a *app) operate(ctx context.Context, r operatorapi.Request) (operatorapi.Response, error) {
	endpoint, err := a.operatorEndpoint()
	if err != nil {
		return operatorapi.Response{}, err
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return operatorapi.Response{}, err
	}
	if cfg.Credentials == nil {
		return operatorapi.Response{}, errors.New("no AWS credentials: configure a profile (AWS_PROFILE) or environment credentials")
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return operatorapi.Response{}, fmt.Errorf("no AWS credentials to sign the request with: %w", err)
	}
	body, err := json.Marshal(r)
	if err != nil {
		return operatorapi.Response{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, operateTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return operatorapi.Response{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	// The signature's time is the wall clock's, whatever a.now says: AWS
	// refuses a signature more than five minutes off.
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hash, "lambda", cfg.Region, time.Now()); err != nil {
		return operatorapi.Response{}, fmt.Errorf("sign the request: %w", err)
	}
	client := a.httpClient
	if client == nil {
		client = &http.Client{Timeout: operateTimeout}
	}
	resp, err := client.Do(req)
	if err != nil {
		return operatorapi.Response{}, fmt.Errorf("call the operator function at %s: %w", redactURL(endpoint), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return operatorapi.Response{}, fmt.Errorf("read the operator function's answer: %w", err)
	}
	var answer operatorapi.Response
	if json.Unmarshal(raw, &answer) != nil || (answer.Code == "" && resp.StatusCode != http.StatusOK) {
		// Not the function's answer: the function URL's own (a refused
		// signature or a missing permission answers 403 {"Message":...}).
		return operatorapi.Response{}, urlRefusal(resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return operatorapi.Response{}, &operateError{status: resp.StatusCode, answer: answer}
	}
	if answer.Entry == nil {
		return operatorapi.Response{}, errors.New("the operator function answered without the entry it recorded")
	}
	return answer, nil
}

// urlRefusal explains an answer of the function URL itself.
func urlRefusal(status int) error {
	switch status {
	case http.StatusForbidden:
		return errors.New("the operator function's URL refused the request (403): AWS did not authenticate the credentials, or the caller may not invoke it; " +
			"run as the stack's operator role (output " + outputs.OperatorRoleARN.Name + ") with fresh credentials")
	case http.StatusNotFound:
		return fmt.Errorf("no operator function at %s (404): check %s (output %s)", operatorURLEnv, operatorURLEnv, outputs.OperatorFunctionURL.Name)
	}
	return fmt.Errorf("the operator function's URL answered %d %s", status, http.StatusText(status))
}

// operatorEndpoint is the operator function's URL from --operator-url or
// OPERATOR_URL: https, or http to a loopback address (a local emulator).
func (a *app) operatorEndpoint() (string, error) {
	raw := strings.TrimSpace(a.operatorURL)
	if raw == "" {
		return "", &usageError{err: fmt.Errorf("no operator function URL: set --operator-url or %s (the stack's output %s)", operatorURLEnv, outputs.OperatorFunctionURL.Name)}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", &usageError{err: fmt.Errorf("%s: want the function URL, https://<url-id>.lambda-url.<region>.on.aws/", operatorURLEnv)}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return "", &usageError{err: fmt.Errorf("%s: want an https URL (http only to a local emulator on a loopback address)", operatorURLEnv)}
	}
	if u.Path == "" {
		u.Path = "/"
	}
	return u.String(), nil
}

func isLoopback(host string) bool {
	return host == "localhost" || host == "127.0.0.1" || host == "::1" || strings.HasSuffix(host, ".localhost")
}

// redactURL keeps an error's URL to its scheme and host.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the operator URL"
	}
	return u.Scheme + "://" + u.Host + "/"
}
