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
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/outcome/outcometest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const (
	testTo   = "player.one@example.org"
	testBody = "Reset your password: https://game.example/reset?token=s3cr3t-t0ken-value"
	testSubj = "Reset your password"
)

func testSend() ledger.Send {
	m := ledger.Message{To: testTo, Subject: testSubj, Body: testBody}
	return outcometest.Send("ch-1", ledger.Email, "reset", m, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fake records the input and the options a SendEmail call would run with.
type fake = outcometest.Fake[sesv2.SendEmailInput, sesv2.SendEmailOutput, sesv2.Options]

// fakeClient is a Client whose SendEmail is a fake.
type fakeClient struct{ fake }

func (f *fakeClient) SendEmail(_ context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	return f.Call(in, sesv2.Options{Retryer: retry.NewStandard()}, optFns)
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
	outcometest.ValidateConfigs(t, ErrInvalidConfig, []outcometest.ConfigCase[Config]{
		{Name: "minimal", Config: Config{FromEmailAddress: "no-reply@example.com"}, OK: true},
		{Name: "display name and config set", Config: Config{FromEmailAddress: "Game <no-reply@example.com>", ConfigurationSetName: "reset-events_1"}, OK: true},
		{Name: "missing from", Config: Config{}, OK: false},
		{Name: "from without at", Config: Config{FromEmailAddress: "example.com"}, OK: false},
		{Name: "header injection", Config: Config{FromEmailAddress: "a@example.com\r\nBcc: x@example.com"}, OK: false},
		{Name: "bad config set", Config: Config{FromEmailAddress: "a@example.com", ConfigurationSetName: "has space"}, OK: false},
	}, "x@example.com")
	if _, err := New(nil, Config{FromEmailAddress: "a@example.com"}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(nil client) = %v, want ErrInvalidConfig", err)
	}
}

func TestCapabilities(t *testing.T) {
	outcometest.NoCapabilities(t, newTransport(t, &fakeClient{}, Config{FromEmailAddress: "a@example.com"}))
	outcometest.EventsOnly(t, newTransport(t, &fakeClient{}, Config{FromEmailAddress: "a@example.com", ConfigurationSetName: "reset-events"}))
}

func TestSendBuildsRequest(t *testing.T) {
	for _, cs := range []string{"", "reset-events"} {
		t.Run("configset="+cs, func(t *testing.T) {
			fc := &fakeClient{fake{Out: &sesv2.SendEmailOutput{MessageId: aws.String("0100-abc")}}}
			tr := newTransport(t, fc, Config{FromEmailAddress: "Game <no-reply@example.com>", ConfigurationSetName: cs})
			s := testSend()
			ack, err := tr.Send(context.Background(), s)
			outcometest.WantAck(t, ack, err, "0100-abc")
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

// suite fills in, for SES, the tests every AWS transport shares.
var suite = outcometest.Suite{
	Unknown: ErrOutcomeUnknown,
	Secrets: []string{testTo, "player.one", testBody, "s3cr3t-t0ken-value", "game.example/reset", "\x1b", "\n"},
	MaxText: 300,
	Fail: func(t *testing.T, err error) error {
		_, err = newTransport(t, &fakeClient{fake{Err: err}}, Config{FromEmailAddress: "a@example.com"}).Send(context.Background(), testSend())
		return err
	},
	SendTo: func(ctx context.Context, t *testing.T, url string) error {
		_, err := newTransport(t, sesv2.NewFromConfig(outcometest.AWSConfig(url)), Config{FromEmailAddress: "a@example.com"}).Send(ctx, testSend())
		return err
	},
	Empty: func(t *testing.T) error {
		_, err := newTransport(t, &fakeClient{fake{Out: &sesv2.SendEmailOutput{}}}, Config{FromEmailAddress: "a@example.com"}).Send(context.Background(), testSend())
		return err
	},
	Headers: setHeaders,
}

func TestSendErrorMapping(t *testing.T) {
	leaky := "Email address is not verified. The following identities failed the check in region EU-WEST-1: " + testTo +
		" body was " + testBody + " subject " + testSubj + "\x1b[31m\n"
	suite.ErrorMapping(t, []outcometest.ErrorCase{
		{Name: "MessageRejected", Err: &types.MessageRejected{Message: aws.String(leaky)}, Class: "rejected", Prefix: "MessageRejected: Email address is not verified"},
		{Name: "MailFromDomainNotVerified", Err: &types.MailFromDomainNotVerifiedException{Message: aws.String(leaky)}, Class: "rejected", Prefix: "MailFromDomainNotVerifiedException"},
		{Name: "AccountSuspended", Err: &types.AccountSuspendedException{Message: aws.String("suspended")}, Class: "rejected", Prefix: "AccountSuspendedException: suspended"},
		{Name: "BadRequest", Err: &types.BadRequestException{Message: aws.String(leaky)}, Class: "rejected", Prefix: "BadRequestException"},
		{Name: "NotFound", Err: &types.NotFoundException{Message: aws.String("config set does not exist")}, Class: "rejected", Prefix: "NotFoundException: config set does not exist"},
		{Name: "generic code MessageRejected", Err: opErr(&smithy.GenericAPIError{Code: "MessageRejected", Message: leaky}), Class: "rejected", Prefix: "MessageRejected"},
		{Name: "TooManyRequests", Err: opErr(&types.TooManyRequestsException{Message: aws.String(leaky)}), Class: "notsent", Prefix: "TooManyRequestsException"},
		{Name: "LimitExceeded", Err: &types.LimitExceededException{Message: aws.String(leaky)}, Class: "notsent", Prefix: "LimitExceededException"},
		{Name: "SendingPaused", Err: &types.SendingPausedException{Message: aws.String(leaky)}, Class: "notsent", Prefix: "SendingPausedException"},
		{Name: "generic code TooManyRequests", Err: opErr(&smithy.GenericAPIError{Code: "TooManyRequestsException", Message: leaky}), Class: "notsent", Prefix: "TooManyRequestsException"},
		{Name: "InternalServiceError", Err: &types.InternalServiceErrorException{Message: aws.String(leaky)}, Class: "unknown", Prefix: "sestransport: outcome unknown: InternalServiceErrorException"},
		{Name: "Throttling generic", Err: &smithy.GenericAPIError{Code: "ThrottlingException", Message: leaky}, Class: "unknown", Prefix: "sestransport: outcome unknown: ThrottlingException"},
		{Name: "context deadline", Err: opErr(fmt.Errorf("send to %s: %w", testTo, context.DeadlineExceeded)), Class: "unknown", Prefix: "sestransport: outcome unknown: timeout"},
		{Name: "context canceled", Err: opErr(context.Canceled), Class: "unknown", Prefix: "sestransport: outcome unknown: context canceled"},
		{Name: "net timeout", Err: opErr(&net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}), Class: "unknown", Prefix: "sestransport: outcome unknown: timeout"},
		{Name: "connection reset", Err: opErr(errors.New("read tcp: connection reset by peer; to=" + testTo)), Class: "unknown", Prefix: "sestransport: outcome unknown: transport error"},
	})
}

func TestSendAcceptedWithoutMessageIDIsUnknown(t *testing.T) { suite.NoMessageID(t) }

func TestSendThroughSDK(t *testing.T) {
	leaky := `{"message":"Maximum sending rate exceeded for ` + testTo + `: ` + testBody + `"}`
	suite.ThroughSDK(t, []outcometest.Answer{
		{Name: "rejected", Status: 400, ErrorType: "MessageRejected", Body: `{"message":"Email address is not verified. The following identities failed the check in region US-EAST-1: ` + testTo + `"}`, Class: "rejected", Text: "MessageRejected: Email address is not verified. The following identities failed the check in region US-EAST-1: [redacted] (request id req-123)"},
		{Name: "MailFromDomainNotVerifiedException", Status: 400, ErrorType: "MailFromDomainNotVerifiedException", Body: `{"message":"MAIL FROM domain not verified"}`, Class: "rejected", Text: "MailFromDomainNotVerifiedException: MAIL FROM domain not verified (request id req-123)"},
		{Name: "AccountSuspendedException", Status: 400, ErrorType: "AccountSuspendedException", Body: `{"message":"account suspended"}`, Class: "rejected", Text: "AccountSuspendedException: account suspended (request id req-123)"},
		{Name: "BadRequestException", Status: 400, ErrorType: "BadRequestException", Body: `{"message":"bad ` + testTo + `"}`, Class: "rejected", Text: "BadRequestException: bad [redacted] (request id req-123)"},
		{Name: "NotFoundException", Status: 404, ErrorType: "NotFoundException", Body: `{"message":"configuration set does not exist"}`, Class: "rejected", Text: "NotFoundException: configuration set does not exist (request id req-123)"},
		{Name: "throttled", Status: 429, ErrorType: "TooManyRequestsException", Body: leaky, Class: "notsent", Text: "TooManyRequestsException"},
		{Name: "throttled with x-amz-retry-after", Status: 429, ErrorType: "TooManyRequestsException", Header: map[string]string{"X-Amz-Retry-After": "1200"}, Body: leaky, Class: "notsent", Text: "TooManyRequestsException", RetryAfter: 1200 * time.Millisecond},
		{Name: "throttled with garbage x-amz-retry-after", Status: 429, ErrorType: "TooManyRequestsException", Header: map[string]string{"X-Amz-Retry-After": "later"}, Body: leaky, Class: "notsent", Text: "TooManyRequestsException"},
		{Name: "throttled with an absurd x-amz-retry-after", Status: 429, ErrorType: "TooManyRequestsException", Header: map[string]string{"X-Amz-Retry-After": "604800000"}, Body: leaky, Class: "notsent", Text: "TooManyRequestsException", RetryAfter: time.Hour},
		{Name: "throttled with standard Retry-After (not read)", Status: 429, ErrorType: "TooManyRequestsException", Header: map[string]string{"Retry-After": "30"}, Body: leaky, Class: "notsent", Text: "TooManyRequestsException"},
		{Name: "daily quota", Status: 400, ErrorType: "LimitExceededException", Body: `{"message":"Daily message quota exceeded."}`, Class: "notsent", Text: "LimitExceededException"},
		{Name: "sending paused", Status: 400, ErrorType: "SendingPausedException", Body: `{"message":"Sending is paused for this account."}`, Class: "notsent", Text: "SendingPausedException"},
		{Name: "accepted but garbled", Status: 200, Body: `{"MessageId":`, Class: "unknown", Text: "sestransport: outcome unknown: HTTP 200 but the response could not be decoded (request id req-123)"},
		{Name: "accepted without MessageId", Status: 200, Body: `{}`, Class: "unknown", Text: "sestransport: outcome unknown: SendEmail succeeded without a MessageId"},
		{Name: "InternalServiceErrorException", Status: 500, ErrorType: "InternalServiceErrorException", Body: `{"message":"internal"}`, Class: "unknown", Text: "sestransport: outcome unknown: InternalServiceErrorException (HTTP 500) (request id req-123)"},
		{Name: "server error", Status: 500, ErrorType: "InternalFailure", Body: `{"message":"internal"}`, Class: "unknown", Text: "sestransport: outcome unknown: InternalFailure (HTTP 500) (request id req-123)"},
		{Name: "bad gateway without a code", Status: 502, Body: `<html>bad gateway</html>`, Class: "unknown", Text: "sestransport: outcome unknown: HTTP 502 without a recognised error code (request id req-123)"},
		{Name: "unavailable without a code", Status: 503, Body: `{"message":"unavailable"}`, Class: "unknown", Text: "sestransport: outcome unknown: UnknownError (HTTP 503) (request id req-123)"},
	})

	// Answers that end before they are complete are unknown outcomes.
	suite.Incomplete(t, []outcometest.Incomplete{
		{Name: "connection reset after the request was written", Serve: outcometest.ResetConnection, Text: "sestransport: outcome unknown: transport error before a response"},
		{Name: "503 with a truncated body", Serve: suite.Truncated(503, "ServiceUnavailable", `{"message":"Service unavailable, try again later"}`),
			Text: "sestransport: outcome unknown: HTTP 503 without a recognised error code (request id req-123)"},
		{Name: "429 with a truncated body", Serve: suite.Truncated(429, "TooManyRequestsException", `{"message":"Maximum sending rate exceeded."}`),
			Text: "sestransport: outcome unknown: HTTP 429 without a recognised error code (request id req-123)"},
		{Name: "timeout", Serve: outcometest.Hang(10 * time.Second), Deadline: 200 * time.Millisecond, Text: "sestransport: outcome unknown: timeout (context deadline exceeded)"},
	})
}

// setHeaders sets the request id and content type of an SES answer.
func setHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-RequestId", "req-123")
	w.Header().Set("Content-Type", "application/json")
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
	tr := newTransport(t, sesv2.NewFromConfig(outcometest.AWSConfig(srv.URL)), Config{FromEmailAddress: "no-reply@example.com", ConfigurationSetName: "reset-events"})
	s := testSend()
	s.Proof = "c2lnbmVkLWJ5LWRpc3BhdGNo_-0123456789abcdefghi"
	ack, err := tr.Send(context.Background(), s)
	outcometest.WantAck(t, ack, err, "0100-wire")
	if path != "/v2/email/outbound-emails" {
		t.Fatalf("path %q", path)
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
	want := fmt.Sprint([]struct{ Name, Value string }{{"idempotency_key", s.IdempotencyKey}, {"content_hash", s.ContentHash}, {"attempt", "1"}, {"attempt_proof", s.Proof}})
	if got := fmt.Sprint(req.EmailTags); got != want {
		t.Fatalf("EmailTags = %s, want %s", got, want)
	}
}

// TestSendAcceptedWhileTheRequestWriteLags: SES answers 200 while net/http
// is still finishing the request. The SDK closes the request body as soon
// as the headers are in; net/http must not take that close for a write
// error and cut off the answer. Without a body of its own
// (sdkhttp.OneAttempt) every one of these sends ends unknown ("HTTP 200 but
// the response could not be decoded", use of closed network connection)
// though SES took the message.
func TestSendAcceptedWhileTheRequestWriteLags(t *testing.T) {
	outcometest.AcceptedWhileTheRequestWriteLags(t, `{"MessageId":"ses-msg-1"}`, "ses-msg-1", func(cfg aws.Config) (ledger.Ack, error) {
		tr := newTransport(t, sesv2.NewFromConfig(cfg), Config{FromEmailAddress: "a@example.com"})
		return tr.Send(context.Background(), testSend())
	})
}
