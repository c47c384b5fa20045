// Package outcometest is what the transport tests share, as net/http/httptest
// is for HTTP handlers: HTTP answers that end in the ways a provider's answer
// can be lost, a server that counts the requests one send makes, and checks
// that a send error names one outcome and repeats no secret.
//
// It is imported only by tests.
package outcometest

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// ResetConnection reads the whole request, then resets the connection (RST,
// not FIN) without answering: the request reached the server and the client
// cannot know what became of it.
func ResetConnection(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Truncate answers status, with the headers already set on w and a
// Content-Length that promises body, writes only half of body and closes the
// connection.
func Truncate(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body[:len(body)/2])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	_ = conn.Close()
}

// Hang returns a handler that reads the request (which lets the server
// notice the client hanging up) and then answers nothing until the client
// gives up or max has passed.
func Hang(max time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(max):
		}
	}
}

// SendOnce serves every request with serve on a test server (closed when
// the test ends), calls send with that server, and fails the test unless
// the server saw exactly one request: a transport sends each attempt once,
// with no retry of its own or of its SDK, so that every attempt is one the
// ledger recorded. It returns send's error.
func SendOnce(t testing.TB, serve http.HandlerFunc, send func(*httptest.Server) error) error {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		serve(w, r)
	}))
	t.Cleanup(srv.Close)
	err := send(srv)
	if n := hits.Load(); n != 1 {
		t.Fatalf("server saw %d requests, want exactly 1 (no retries)", n)
	}
	return err
}

// Class names the outcome of a send error and returns its text:
//
//	*ledger.Rejection      -> "rejected", its Reason
//	*ledger.NotSent        -> "notsent", its Code
//	an error wrapping unknown -> "unknown", err.Error()
//
// It fails the test for a nil error, for an error that is none of these,
// and for a rejection or NotSent that also wraps unknown.
func Class(t testing.TB, err, unknown error) (class, text string) {
	t.Helper()
	var rej *ledger.Rejection
	var ns *ledger.NotSent
	switch {
	case err == nil:
		t.Fatal("Send succeeded, want an error")
	case errors.As(err, &rej):
		class, text = "rejected", rej.Reason
	case errors.As(err, &ns):
		class, text = "notsent", ns.Code
	default:
		if !errors.Is(err, unknown) {
			t.Fatalf("unknown outcome %v does not wrap %v", err, unknown)
		}
		return "unknown", err.Error()
	}
	if errors.Is(err, unknown) {
		t.Fatalf("%s outcome %v wraps %v", class, err, unknown)
	}
	return class, text
}

// AssertClean fails the test if s contains any of secrets.
func AssertClean(t testing.TB, s string, secrets ...string) {
	t.Helper()
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			t.Fatalf("error text %q leaks %q", s, secret)
		}
	}
}

// Want is the outcome a send should end in.
type Want struct {
	// Class is "rejected", "notsent" or "unknown" (see Class).
	Class string
	// Text is the rejection reason, the NotSent code or the error text.
	Text string
	// Prefix says Text need only begin the text.
	Prefix bool
	// RetryAfter is the wait a NotSent asks for.
	RetryAfter time.Duration
}

// Check fails the test unless err is the outcome w describes; unknown is the
// transport's sentinel for unknown outcomes.
func (w Want) Check(t testing.TB, err, unknown error) {
	t.Helper()
	class, text := Class(t, err, unknown)
	if class != w.Class {
		t.Fatalf("class = %s (%v), want %s", class, err, w.Class)
	}
	if w.Prefix && !strings.HasPrefix(text, w.Text) {
		t.Fatalf("text = %q, want prefix %q", text, w.Text)
	}
	if !w.Prefix && text != w.Text {
		t.Fatalf("text = %q\nwant   %q", text, w.Text)
	}
	var ns *ledger.NotSent
	if errors.As(err, &ns) && ns.RetryAfter != w.RetryAfter {
		t.Fatalf("RetryAfter = %s, want %s", ns.RetryAfter, w.RetryAfter)
	}
}

// ConfigCase is a transport Config and whether Validate must accept it.
type ConfigCase[C any] struct {
	Name   string
	Config C
	OK     bool
}

// ValidateConfigs checks each case's Validate result: nil when OK, an error
// wrapping invalid (the package's invalid-config sentinel) otherwise, whose
// text repeats none of secrets (the configured values it must not echo).
func ValidateConfigs[C interface{ Validate() error }](t *testing.T, invalid error, cases []ConfigCase[C], secrets ...string) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := c.Config.Validate()
			if (err == nil) != c.OK {
				t.Fatalf("Validate() = %v, want ok=%v", err, c.OK)
			}
			if err != nil && !errors.Is(err, invalid) {
				t.Fatalf("error %v does not wrap %v", err, invalid)
			}
			if err != nil {
				AssertClean(t, err.Error(), secrets...)
			}
		})
	}
}

// WantAck fails the test unless a send returned ack with message id id and
// no error.
func WantAck(t testing.TB, ack ledger.Ack, err error, id string) {
	t.Helper()
	if err != nil || ack.ID != id {
		t.Fatalf("ack %q, err %v; want accepted with id %q", ack.ID, err, id)
	}
}

// AWSConfig is the configuration of a real AWS SDK client that talks to a
// local test server at url, with static credentials and the SDK's default
// (retrying) retryer.
func AWSConfig(url string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
	}
}

// Fake is a fake AWS SDK send operation for a transport's unit tests: it
// records the input and the options a call would run with, and returns Out
// and Err. A package's fake client embeds it and implements its one method
// with Call.
type Fake[In, Out, Opts any] struct {
	In    *In
	Opts  Opts
	Calls int
	Out   *Out
	Err   error
}

// Call records one call with input in and the options base with optFns
// applied (base stands for the client's own options, e.g. its default
// retryer), and returns f.Out and f.Err.
func (f *Fake[In, Out, Opts]) Call(in *In, base Opts, optFns []func(*Opts)) (*Out, error) {
	f.Calls++
	f.In = in
	f.Opts = base
	for _, fn := range optFns {
		fn(&f.Opts)
	}
	return f.Out, f.Err
}

// Send returns attempt 1 of the password-reset message m for challenge on
// ch, expiring at expiresAt: its idempotency key is the identity's dedupe
// key and its content hash that of template version "v1".
func Send(challenge string, ch ledger.Channel, template string, m ledger.Message, expiresAt time.Time) ledger.Send {
	id := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: challenge, Channel: ch}
	return ledger.Send{
		IdempotencyKey: id.Key(),
		ContentHash:    ledger.ContentHash(template, "v1", m),
		Channel:        ch,
		Attempt:        1,
		ExpiresAt:      expiresAt,
		Message:        m,
	}
}

// AcceptedWhileTheRequestWriteLags checks that a send the provider took is
// recorded accepted when the provider answers while net/http is still
// finishing the request (its write goroutine paused after each write, as in
// a busy process) and the answer's body comes a moment after its headers:
// the race internal/sdkhttp closes. body is the provider's success answer
// carrying id; send makes one send through the transport over a real SDK
// client built from the configuration it is given. Three sends are made.
func AcceptedWhileTheRequestWriteLags(t *testing.T, body, id string, send func(aws.Config) (ledger.Ack, error)) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(150 * time.Millisecond)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	cfg := AWSConfig(srv.URL)
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return pausingConn{c}, err
	}}}
	for range 3 {
		ack, err := send(cfg)
		WantAck(t, ack, err, id)
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("server saw %d requests, want 3", n)
	}
}

// pausingConn pauses after every write, as a write goroutine of a busy
// process does when it is not scheduled again at once.
type pausingConn struct{ net.Conn }

func (c pausingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	time.Sleep(50 * time.Millisecond)
	return n, err
}
