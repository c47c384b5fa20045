package sestransport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/outcome/outcometest"
)

const (
	testTo   = "player.one@example.org"
	testBody = "Reset your password: https://game.example/reset?token=s3cr3t-t0ken-value"
	testSubj = "Reset your password"
)

func testSend() ledger.Send {
	id := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "ch-1", Channel: ledger.Email}
	m := ledger.Message{To: testTo, Subject: testSubj, Body: testBody}
	return ledger.Send{
		IdempotencyKey: id.Key(),
		ContentHash:    ledger.ContentHash("reset", "v1", m),
		Channel:        ledger.Email,
		Attempt:        1,
		ExpiresAt:      time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		Message:        m,
	}
}

// fakeClient records the input and the options a call would run with.
type fakeClient struct {
	outcometest.Fake[sesv2.SendEmailInput, sesv2.SendEmailOutput, sesv2.Options]
}

func (f *fakeClient) SendEmail(_ context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	return f.Call(in, sesv2.Options{Retryer: retry.NewStandard()}, optFns)
}

// answering returns a fake client whose call returns out, err.
func answering(out *sesv2.SendEmailOutput, err error) *fakeClient {
	f := &fakeClient{}
	f.Out, f.Err = out, err
	return f
}

func newTransport(t *testing.T, c Client, cfg Config) *Transport {
	t.Helper()
	tr, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"minimal", Config{FromEmailAddress: "no-reply@example.com"}, true},
		{"display name and config set", Config{FromEmailAddress: "Game <no-reply@example.com>", ConfigurationSetName: "reset-events_1"}, true},
		{"missing from", Config{}, false},
		{"from without at", Config{FromEmailAddress: "example.com"}, false},
		{"header injection", Config{FromEmailAddress: "a@example.com\r\nBcc: x@example.com"}, false},
		{"bad config set", Config{FromEmailAddress: "a@example.com", ConfigurationSetName: "has space"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			outcometest.CheckConfigErr(t, err, tt.ok, ErrInvalidConfig)
			if err != nil && strings.Contains(err.Error(), "x@example.com") {
				t.Fatalf("error echoes the configured value: %v", err)
			}
		})
	}
	if _, err := New(nil, Config{FromEmailAddress: "a@example.com"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(nil client) = %v, want ErrInvalidConfig", err)
	}
}

func TestCapabilities(t *testing.T) {
	tr := newTransport(t, &fakeClient{}, Config{FromEmailAddress: "a@example.com"})
	if got := tr.Capabilities(); got != (ledger.Capabilities{}) {
		t.Fatalf("Capabilities() = %+v, want none", got)
	}
	if got := newTransport(t, &fakeClient{}, Config{FromEmailAddress: "a@example.com", ConfigurationSetName: "reset-events"}).Capabilities(); got != (ledger.Capabilities{Events: true}) {
		t.Fatalf("with a configuration set: Capabilities() = %+v, want Events", got)
	}
	if _, ok := any(tr).(ledger.Looker); ok {
		t.Fatal("SES transport must not implement ledger.Looker: SES has no lookup")
	}
}

func TestSendBuildsRequest(t *testing.T) {
	for _, cs := range []string{"", "reset-events"} {
		t.Run("configset="+cs, func(t *testing.T) {
			fc := answering(&sesv2.SendEmailOutput{MessageId: aws.String("0100-abc")}, nil)
			tr := newTransport(t, fc, Config{FromEmailAddress: "Game <no-reply@example.com>", ConfigurationSetName: cs})
			s := testSend()
			ack, err := tr.Send(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			if ack.ID != "0100-abc" {
				t.Fatalf("ack id = %q, want the MessageId", ack.ID)
			}
			in := fc.In
			if got := aws.ToString(in.FromEmailAddress); got != "Game <no-reply@example.com>" {
				t.Errorf("From = %q", got)
			}
			if got := in.Destination.ToAddresses; len(got) != 1 || got[0] != testTo || len(in.Destination.CcAddresses)+len(in.Destination.BccAddresses) != 0 {
				t.Errorf("Destination = %+v", in.Destination)
			}
			simple := in.Content.Simple
			if simple == nil || aws.ToString(simple.Subject.Data) != testSubj || aws.ToString(simple.Body.Text.Data) != testBody || simple.Body.Html != nil {
				t.Errorf("Content = %+v", in.Content)
			}
			if got := aws.ToString(in.ConfigurationSetName); got != cs {
				t.Errorf("ConfigurationSetName = %q, want %q", got, cs)
			}
			tags := map[string]string{}
			for _, tg := range in.EmailTags {
				name, value := aws.ToString(tg.Name), aws.ToString(tg.Value)
				if !tagSafe(name) || !tagSafe(value) {
					t.Errorf("tag %q=%q outside the SES tag charset", name, value)
				}
				tags[name] = value
			}
			want := map[string]string{"idempotency_key": s.IdempotencyKey, "content_hash": s.ContentHash, "attempt": "1"}
			if fmt.Sprint(tags) != fmt.Sprint(want) {
				t.Errorf("tags = %v, want %v", tags, want)
			}
			if _, ok := fc.Opts.Retryer.(aws.NopRetryer); !ok {
				t.Errorf("retryer = %T, want aws.NopRetryer (SDK retries must be off)", fc.Opts.Retryer)
			}
		})
	}
}

func TestSendRefusesLocallyWithoutCalling(t *testing.T) {
	tests := map[string]func(*ledger.Send){
		"no destination":  func(s *ledger.Send) { s.Message.To = " " },
		"key not tagable": func(s *ledger.Send) { s.IdempotencyKey = "a:b" },
		"empty hash":      func(s *ledger.Send) { s.ContentHash = "" },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			fc := &fakeClient{}
			tr := newTransport(t, fc, Config{FromEmailAddress: "a@example.com"})
			s := testSend()
			mutate(&s)
			_, err := tr.Send(context.Background(), s)
			var rej *ledger.Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("err = %v, want *ledger.Rejection", err)
			}
			if fc.Calls != 0 {
				t.Fatalf("SendEmail called %d times, want 0", fc.Calls)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "dial tcp: i/o timeout talking to " + testTo }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func opErr(err error) error {
	return &smithy.OperationError{ServiceID: "SESv2", OperationName: "SendEmail", Err: err}
}

func TestSendErrorMapping(t *testing.T) {
	leaky := "Email address is not verified. The following identities failed the check in region EU-WEST-1: " + testTo +
		" body was " + testBody + " subject " + testSubj + "\x1b[31m\n"
	tests := []struct {
		name       string
		err        error
		class      string // rejected, notsent, unknown
		wantPrefix string // of the rejection reason, the NotSent code or the error text
	}{
		{"MessageRejected", &types.MessageRejected{Message: aws.String(leaky)}, "rejected", "MessageRejected: Email address is not verified"},
		{"MailFromDomainNotVerified", &types.MailFromDomainNotVerifiedException{Message: aws.String(leaky)}, "rejected", "MailFromDomainNotVerifiedException"},
		{"AccountSuspended", &types.AccountSuspendedException{Message: aws.String("suspended")}, "rejected", "AccountSuspendedException: suspended"},
		{"BadRequest", &types.BadRequestException{Message: aws.String(leaky)}, "rejected", "BadRequestException"},
		{"NotFound", &types.NotFoundException{Message: aws.String("config set does not exist")}, "rejected", "NotFoundException: config set does not exist"},
		{"generic code MessageRejected", opErr(&smithy.GenericAPIError{Code: "MessageRejected", Message: leaky}), "rejected", "MessageRejected"},
		{"TooManyRequests", opErr(&types.TooManyRequestsException{Message: aws.String(leaky)}), "notsent", "TooManyRequestsException"},
		{"LimitExceeded", &types.LimitExceededException{Message: aws.String(leaky)}, "notsent", "LimitExceededException"},
		{"SendingPaused", &types.SendingPausedException{Message: aws.String(leaky)}, "notsent", "SendingPausedException"},
		{"generic code TooManyRequests", opErr(&smithy.GenericAPIError{Code: "TooManyRequestsException", Message: leaky}), "notsent", "TooManyRequestsException"},
		{"InternalServiceError", &types.InternalServiceErrorException{Message: aws.String(leaky)}, "unknown", "sestransport: outcome unknown: InternalServiceErrorException"},
		{"Throttling generic", &smithy.GenericAPIError{Code: "ThrottlingException", Message: leaky}, "unknown", "sestransport: outcome unknown: ThrottlingException"},
		{"context deadline", opErr(fmt.Errorf("send to %s: %w", testTo, context.DeadlineExceeded)), "unknown", "sestransport: outcome unknown: timeout"},
		{"context canceled", opErr(context.Canceled), "unknown", "sestransport: outcome unknown: context canceled"},
		{"net timeout", opErr(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), "unknown", "sestransport: outcome unknown: timeout"},
		{"connection reset", opErr(errors.New("read tcp: connection reset by peer; to=" + testTo)), "unknown", "sestransport: outcome unknown: transport error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTransport(t, answering(nil, tt.err), Config{FromEmailAddress: "a@example.com"})
			_, err := tr.Send(context.Background(), testSend())
			outcometest.Want{Class: tt.class, Text: tt.wantPrefix, Prefix: true}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}
}

// assertClean fails if s carries the address, subject, body, reset token or
// control characters, or is long.
func assertClean(t *testing.T, s string) {
	t.Helper()
	outcometest.AssertClean(t, s, testTo, "player.one", testBody, "s3cr3t-t0ken-value", "game.example/reset", "\x1b", "\n")
	if len(s) > 300 {
		t.Fatalf("error text is %d bytes, want it short", len(s))
	}
}

func TestSendAcceptedWithoutMessageIDIsUnknown(t *testing.T) {
	tr := newTransport(t, answering(&sesv2.SendEmailOutput{}, nil), Config{FromEmailAddress: "a@example.com"})
	if _, err := tr.Send(context.Background(), testSend()); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
}

// sdkClient is a real SES v2 client pointed at a local HTTP server, with the
// SDK's default (retrying) retryer, so the tests below exercise the SDK's own
// error decoding and prove the transport turns retries off.
func sdkClient(url string) *sesv2.Client {
	return sesv2.New(sesv2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
	})
}

func TestSendThroughSDK(t *testing.T) {
	leaky := `{"message":"Maximum sending rate exceeded for ` + testTo + `: ` + testBody + `"}`
	tests := []struct {
		name      string
		status    int
		errType   string
		header    map[string]string // more response headers
		body      string
		class     string // rejected, notsent, unknown
		wantText  string // rejection reason, NotSent code, or error text
		wantAfter time.Duration
	}{
		{"rejected", 400, "MessageRejected", nil, `{"message":"Email address is not verified. The following identities failed the check in region US-EAST-1: ` + testTo + `"}`, "rejected", "MessageRejected: Email address is not verified. The following identities failed the check in region US-EAST-1: [redacted] (request id req-123)", 0},
		{"MailFromDomainNotVerifiedException", 400, "MailFromDomainNotVerifiedException", nil, `{"message":"MAIL FROM domain not verified"}`, "rejected", "MailFromDomainNotVerifiedException: MAIL FROM domain not verified (request id req-123)", 0},
		{"AccountSuspendedException", 400, "AccountSuspendedException", nil, `{"message":"account suspended"}`, "rejected", "AccountSuspendedException: account suspended (request id req-123)", 0},
		{"BadRequestException", 400, "BadRequestException", nil, `{"message":"bad ` + testTo + `"}`, "rejected", "BadRequestException: bad [redacted] (request id req-123)", 0},
		{"NotFoundException", 404, "NotFoundException", nil, `{"message":"configuration set does not exist"}`, "rejected", "NotFoundException: configuration set does not exist (request id req-123)", 0},
		{"throttled", 429, "TooManyRequestsException", nil, leaky, "notsent", "TooManyRequestsException", 0},
		{"throttled with x-amz-retry-after", 429, "TooManyRequestsException", map[string]string{"X-Amz-Retry-After": "1200"}, leaky, "notsent", "TooManyRequestsException", 1200 * time.Millisecond},
		{"throttled with garbage x-amz-retry-after", 429, "TooManyRequestsException", map[string]string{"X-Amz-Retry-After": "later"}, leaky, "notsent", "TooManyRequestsException", 0},
		{"throttled with an absurd x-amz-retry-after", 429, "TooManyRequestsException", map[string]string{"X-Amz-Retry-After": "604800000"}, leaky, "notsent", "TooManyRequestsException", time.Hour},
		{"throttled with standard Retry-After (not read)", 429, "TooManyRequestsException", map[string]string{"Retry-After": "30"}, leaky, "notsent", "TooManyRequestsException", 0},
		{"daily quota", 400, "LimitExceededException", nil, `{"message":"Daily message quota exceeded."}`, "notsent", "LimitExceededException", 0},
		{"sending paused", 400, "SendingPausedException", nil, `{"message":"Sending is paused for this account."}`, "notsent", "SendingPausedException", 0},
		{"accepted but garbled", 200, "", nil, `{"MessageId":`, "unknown", "sestransport: outcome unknown: HTTP 200 but the response could not be decoded (request id req-123)", 0},
		{"accepted without MessageId", 200, "", nil, `{}`, "unknown", "sestransport: outcome unknown: SendEmail succeeded without a MessageId", 0},
		{"InternalServiceErrorException", 500, "InternalServiceErrorException", nil, `{"message":"internal"}`, "unknown", "sestransport: outcome unknown: InternalServiceErrorException (HTTP 500) (request id req-123)", 0},
		{"server error", 500, "InternalFailure", nil, `{"message":"internal"}`, "unknown", "sestransport: outcome unknown: InternalFailure (HTTP 500) (request id req-123)", 0},
		{"bad gateway without a code", 502, "", nil, `<html>bad gateway</html>`, "unknown", "sestransport: outcome unknown: HTTP 502 without a recognised error code (request id req-123)", 0},
		{"unavailable without a code", 503, "", nil, `{"message":"unavailable"}`, "unknown", "sestransport: outcome unknown: UnknownError (HTTP 503) (request id req-123)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sendOnce(context.Background(), t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Amzn-ErrorType", tt.errType)
				setHeaders(w)
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			outcometest.Want{Class: tt.class, Text: tt.wantText, RetryAfter: tt.wantAfter}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}

	// Answers that end before they are complete are unknown outcomes.
	incomplete := []struct {
		name  string
		serve http.HandlerFunc
		want  string
	}{
		{"connection reset after the request was written", outcometest.ResetConnection, "sestransport: outcome unknown: transport error before a response"},
		{"503 with a truncated body", truncated(503, "ServiceUnavailable", `{"message":"Service unavailable, try again later"}`),
			"sestransport: outcome unknown: HTTP 503 without a recognised error code (request id req-123)"},
		{"429 with a truncated body", truncated(429, "TooManyRequestsException", `{"message":"Maximum sending rate exceeded."}`),
			"sestransport: outcome unknown: HTTP 429 without a recognised error code (request id req-123)"},
	}
	for _, tt := range incomplete {
		t.Run(tt.name, func(t *testing.T) {
			err := sendOnce(context.Background(), t, tt.serve)
			outcometest.Want{Class: "unknown", Text: tt.want}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}

	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		err := sendOnce(ctx, t, outcometest.Hang(10*time.Second))
		if !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want an unknown outcome wrapping context.DeadlineExceeded", err)
		}
		assertClean(t, err.Error())
	})
}

// sendOnce sends testSend through the real SDK client to a server that
// answers with serve, and checks that the server saw exactly one request:
// the SDK's default retryer is on, so this proves the transport turns it off.
func sendOnce(ctx context.Context, t *testing.T, serve http.HandlerFunc) error {
	t.Helper()
	return outcometest.SendOnce(t, serve, func(srv *httptest.Server) error {
		tr := newTransport(t, sdkClient(srv.URL), Config{FromEmailAddress: "a@example.com"})
		_, err := tr.Send(ctx, testSend())
		return err
	})
}

// setHeaders sets the request id and content type of an SES answer.
func setHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-RequestId", "req-123")
	w.Header().Set("Content-Type", "application/json")
}

// truncated answers status with the error type errType and a body that
// breaks off halfway (see outcometest.Truncate).
func truncated(status int, errType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Amzn-ErrorType", errType)
		setHeaders(w)
		outcometest.Truncate(w, status, body)
	}
}

// TestSendWireFormat checks, through the SDK's own serializer, that the
// request SES receives carries the tags, the configuration set and the
// simple content.
func TestSendWireFormat(t *testing.T) {
	var body []byte
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"MessageId":"0100-wire"}`)
	}))
	defer srv.Close()
	tr := newTransport(t, sdkClient(srv.URL), Config{FromEmailAddress: "no-reply@example.com", ConfigurationSetName: "reset-events"})
	s := testSend()
	ack, err := tr.Send(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if ack.ID != "0100-wire" || path != "/v2/email/outbound-emails" {
		t.Fatalf("ack %q, path %q", ack.ID, path)
	}
	var req struct {
		FromEmailAddress     string
		ConfigurationSetName string
		Destination          struct{ ToAddresses []string }
		Content              struct {
			Simple struct {
				Subject struct{ Data string }
				Body    struct{ Text struct{ Data string } }
			}
		}
		EmailTags []struct{ Name, Value string }
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if req.FromEmailAddress != "no-reply@example.com" || req.ConfigurationSetName != "reset-events" ||
		len(req.Destination.ToAddresses) != 1 || req.Destination.ToAddresses[0] != testTo ||
		req.Content.Simple.Subject.Data != testSubj || req.Content.Simple.Body.Text.Data != testBody {
		t.Fatalf("request = %+v", req)
	}
	want := fmt.Sprint([]struct{ Name, Value string }{{"idempotency_key", s.IdempotencyKey}, {"content_hash", s.ContentHash}, {"attempt", "1"}})
	if got := fmt.Sprint(req.EmailTags); got != want {
		t.Fatalf("EmailTags = %s, want %s", got, want)
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

// TestSendAcceptedWhileTheRequestWriteLags: SES answers 200 while net/http
// is still finishing the request (its write goroutine paused after writing
// the body), and the answer's body comes a moment after its headers. The
// SDK closes the request body as soon as the headers are in; net/http must
// not take that close for a write error and cut off the answer. Without
// ownBody every one of these sends ends unknown ("HTTP 200 but the
// response could not be decoded", use of closed network connection) though
// SES took the message.
func TestSendAcceptedWhileTheRequestWriteLags(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "25")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(150 * time.Millisecond)
		_, _ = io.WriteString(w, `{"MessageId":"ses-msg-1"}`)
	}))
	defer srv.Close()
	client := sesv2.New(sesv2.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			return pausingConn{c}, err
		}}},
	})
	tr := newTransport(t, client, Config{FromEmailAddress: "a@example.com"})
	for i := range 3 {
		ack, err := tr.Send(context.Background(), testSend())
		if err != nil || ack.ID != "ses-msg-1" {
			t.Fatalf("send %d: ack %q, err %v; want accepted", i, ack.ID, err)
		}
	}
	if hits.Load() != 3 {
		t.Fatalf("server saw %d requests, want 3", hits.Load())
	}
}
