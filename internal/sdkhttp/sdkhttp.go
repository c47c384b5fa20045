// Package sdkhttp wraps the HTTP client of the AWS SDK for Go v2 so that
// every request goes out with a body of its own.
//
// The SDK closes a request's body as soon as the response headers arrive.
// net/http may still be draining that body (it reads once more to check for
// extra bytes) and then gets io.EOF from the closed body, takes it for a
// write error and closes the connection, cutting off the response body on
// its way in. The call fails with "use of closed network connection" or a
// checksum mismatch although the service did what was asked: a send the
// provider took is recorded unknown, a conditional write that landed is
// retried and refused by its own condition, a receive's messages stay in
// flight until their visibility timeout. On a busy process this happens
// about once in a thousand calls. With an in-memory copy of the body, which
// nothing closes under net/http, it does not happen.
package sdkhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Doer is the SDK's HTTP client interface (aws.HTTPClient).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// OwnBody hands Next a copy of each request with a body of its own.
type OwnBody struct{ Next Doer }

// Wrap returns next (the SDK's default client if nil) wrapped in OwnBody,
// unless it already is.
func Wrap(next Doer) Doer {
	if _, ok := next.(OwnBody); ok {
		return next
	}
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	return OwnBody{Next: next}
}

// Do implements Doer.
func (c OwnBody) Do(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return c.Next.Do(r)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("sdkhttp: read request body: %w", err)
	}
	_ = r.Body.Close()
	own := r.Clone(r.Context())
	own.Body = io.NopCloser(bytes.NewReader(b))
	own.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	return c.Next.Do(own)
}

// OneAttempt returns the retryer and the HTTP client for an SDK call that
// must be exactly one attempt, with client (the call's own) wrapped: no
// automatic retries (aws.NopRetryer), so that every attempt is one the
// ledger recorded (docs/design.md, "What it promises"), and a body of its
// own (Wrap), so that a send the provider took is not recorded unknown, and
// quarantined where the provider has no idempotency key or lookup, for a
// reason on this side. The transports set both in their per-call options;
// the functions wrap their clients already, and this keeps a transport safe
// with a client that is not wrapped.
func OneAttempt(client Doer) (aws.Retryer, Doer) { return aws.NopRetryer{}, Wrap(client) }

// LoadDefaultConfig is config.LoadDefaultConfig with the loaded HTTP client
// wrapped (Wrap): after loading, so the client keeps what the configuration
// set on it (a CA bundle, proxies). Every process of this repository that
// talks to AWS loads its configuration through it.
func LoadDefaultConfig(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return aws.Config{}, err
	}
	cfg.HTTPClient = Wrap(cfg.HTTPClient)
	return cfg, nil
}
