package outcometest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Suite is the part of an AWS SDK transport's tests that every such
// transport shares: how the SDK's typed errors map to the outcomes, and how
// the answers of a local server, decoded by the real SDK client with its
// default (retrying) retryer, do. Each transport fills it in once and runs
// its own table of cases through it.
type Suite struct {
	// Unknown is the transport's sentinel for unknown outcomes.
	Unknown error
	// Secrets are what no error text may repeat: the destination in every
	// spelling, the body, the link's token, control characters.
	Secrets []string
	// MaxText, if not 0, is the longest error text allowed.
	MaxText int
	// Fail sends one message through the transport over a fake client whose
	// call fails with err, and returns Send's error.
	Fail func(t *testing.T, err error) error
	// Empty sends one message through the transport over a fake client whose
	// call succeeds with a reply that has no MessageId, and returns Send's
	// error.
	Empty func(t *testing.T) error
	// SendTo sends one message with ctx through the transport over a real
	// SDK client pointed at url, and returns Send's error.
	SendTo func(ctx context.Context, t *testing.T, url string) error
	// Headers sets the request id and content type of the provider's answers.
	Headers func(w http.ResponseWriter)
}

// ErrorCase is an error of the SDK call and the outcome it must end in.
type ErrorCase struct {
	Name string
	Err  error
	// Class is "rejected", "notsent" or "unknown"; Prefix begins the
	// rejection reason, the NotSent code or the error text.
	Class, Prefix string
}

// Answer is an answer of the provider's API and the outcome it must end in.
type Answer struct {
	Name   string
	Status int
	// ErrorType, if not empty, is sent as the X-Amzn-ErrorType header.
	ErrorType string
	// Header holds more response headers.
	Header map[string]string
	Body   string
	// Class is "rejected", "notsent" or "unknown"; Text is the rejection
	// reason, the NotSent code or the error text; RetryAfter is the wait a
	// NotSent asks for.
	Class, Text string
	RetryAfter  time.Duration
}

// Incomplete is an answer that ends before it is complete, which must be an
// unknown outcome with error text Text.
type Incomplete struct {
	Name  string
	Serve http.HandlerFunc
	// Deadline, if not 0, bounds the call; the error must then also wrap
	// context.DeadlineExceeded.
	Deadline time.Duration
	Text     string
}

// Clean fails the test if s repeats one of s.Secrets or is longer than
// s.MaxText.
func (s Suite) Clean(t testing.TB, text string) {
	t.Helper()
	AssertClean(t, text, s.Secrets...)
	if s.MaxText > 0 && len(text) > s.MaxText {
		t.Fatalf("error text is %d bytes, want at most %d", len(text), s.MaxText)
	}
}

// ErrorMapping checks that each case's SDK error ends in its outcome, with
// an error text that repeats no secret.
func (s Suite) ErrorMapping(t *testing.T, cases []ErrorCase) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			err := s.Fail(t, c.Err)
			Want{Class: c.Class, Text: c.Prefix, Prefix: true}.Check(t, err, s.Unknown)
			s.Clean(t, err.Error())
		})
	}
}

// NoMessageID checks that a reply without a MessageId is an unknown
// outcome: the call returned, but nothing identifies what the provider took.
func (s Suite) NoMessageID(t *testing.T) {
	if err := s.Empty(t); !errors.Is(err, s.Unknown) {
		t.Fatalf("err = %v, want %v", err, s.Unknown)
	}
}

// ThroughSDK serves each answer to the real SDK client and checks the
// outcome, that the error text repeats no secret, and that the transport
// made exactly one request (the SDK's retries are off).
func (s Suite) ThroughSDK(t *testing.T, answers []Answer) {
	for _, a := range answers {
		t.Run(a.Name, func(t *testing.T) {
			err := s.SendOnce(context.Background(), t, func(w http.ResponseWriter, r *http.Request) {
				if a.ErrorType != "" {
					w.Header().Set("X-Amzn-ErrorType", a.ErrorType)
				}
				s.Headers(w)
				for k, v := range a.Header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(a.Status)
				fmt.Fprint(w, a.Body)
			})
			Want{Class: a.Class, Text: a.Text, RetryAfter: a.RetryAfter}.Check(t, err, s.Unknown)
			s.Clean(t, err.Error())
		})
	}
}

// Incomplete serves each incomplete answer to the real SDK client and checks
// that it is an unknown outcome with the case's text, made of one request.
func (s Suite) Incomplete(t *testing.T, cases []Incomplete) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			ctx := context.Background()
			if c.Deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.Deadline)
				defer cancel()
			}
			err := s.SendOnce(ctx, t, c.Serve)
			Want{Class: "unknown", Text: c.Text}.Check(t, err, s.Unknown)
			if c.Deadline > 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want an unknown outcome wrapping context.DeadlineExceeded", err)
			}
			s.Clean(t, err.Error())
		})
	}
}

// SendOnce sends one message through the real SDK client to a server that
// answers with serve (see the package's SendOnce): the SDK's default
// retryer is on, so one request proves the transport turns it off.
func (s Suite) SendOnce(ctx context.Context, t *testing.T, serve http.HandlerFunc) error {
	t.Helper()
	return SendOnce(t, serve, func(srv *httptest.Server) error {
		return s.SendTo(ctx, t, srv.URL)
	})
}

// Truncated answers status, with errType (if not empty) as the
// X-Amzn-ErrorType header, and a body that breaks off halfway (see
// Truncate).
func (s Suite) Truncated(status int, errType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if errType != "" {
			w.Header().Set("X-Amzn-ErrorType", errType)
		}
		s.Headers(w)
		Truncate(w, status, body)
	}
}

// NoCapabilities fails the test unless tr declares no capabilities and does
// not implement ledger.Looker: its provider honors no idempotency key and
// has no lookup, so unknown outcomes need an operator decision.
func NoCapabilities(t testing.TB, tr ledger.Transport) {
	t.Helper()
	if got := tr.Capabilities(); got != (ledger.Capabilities{}) {
		t.Fatalf("Capabilities() = %+v, want none", got)
	}
	if _, ok := tr.(ledger.Looker); ok {
		t.Fatalf("%T must not implement ledger.Looker: its provider has no lookup", tr)
	}
}

// EventsOnly checks a transport built with a configuration set: its provider
// publishes events (Capabilities.Events) and it has nothing else.
func EventsOnly(t testing.TB, tr ledger.Transport) {
	t.Helper()
	if got := tr.Capabilities(); got != (ledger.Capabilities{Events: true}) {
		t.Fatalf("with a configuration set: Capabilities() = %+v, want Events only", got)
	}
}
