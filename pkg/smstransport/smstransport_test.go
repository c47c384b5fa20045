package smstransport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/outcome/outcometest"
)

const (
	testTo   = "+14155550123"
	testBody = "Your reset code is 834211, or open https://game.example/r/s3cr3tT0ken"
)

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func testSend(expiresIn time.Duration) ledger.Send {
	id := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "ch-1", Channel: ledger.SMS}
	m := ledger.Message{To: testTo, Body: testBody}
	return ledger.Send{
		IdempotencyKey: id.Key(),
		ContentHash:    ledger.ContentHash("reset-sms", "v1", m),
		Channel:        ledger.SMS,
		Attempt:        2,
		ExpiresAt:      now.Add(expiresIn),
		Message:        m,
	}
}

// fakeClient records the input and the options a call would run with.
type fakeClient struct {
	outcometest.Fake[pinpointsmsvoicev2.SendTextMessageInput, pinpointsmsvoicev2.SendTextMessageOutput, pinpointsmsvoicev2.Options]
}

func (f *fakeClient) SendTextMessage(_ context.Context, in *pinpointsmsvoicev2.SendTextMessageInput, optFns ...func(*pinpointsmsvoicev2.Options)) (*pinpointsmsvoicev2.SendTextMessageOutput, error) {
	return f.Call(in, pinpointsmsvoicev2.Options{Retryer: retry.NewStandard()}, optFns)
}

// answering returns a fake client whose call returns out, err.
func answering(out *pinpointsmsvoicev2.SendTextMessageOutput, err error) *fakeClient {
	f := &fakeClient{}
	f.Out, f.Err = out, err
	return f
}

// accepting returns a fake client whose call is accepted with message id id.
func accepting(id string) *fakeClient {
	return answering(&pinpointsmsvoicev2.SendTextMessageOutput{MessageId: aws.String(id)}, nil)
}

func newTransport(t *testing.T, c Client, cfg Config) *Transport {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = clock
	}
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
		{"zero value", Config{}, true},
		{"full", Config{OriginationIdentity: "arn:aws:sms-voice:eu-west-1:123456789012:pool/pool-abc", ConfigurationSetName: "reset-events", MinTimeToLive: time.Minute}, true},
		{"phone number identity", Config{OriginationIdentity: "+14155550100"}, true},
		{"bad identity", Config{OriginationIdentity: "has space"}, false},
		{"bad config set", Config{ConfigurationSetName: "a;b"}, false},
		{"min ttl below API minimum", Config{MinTimeToLive: time.Second}, false},
		{"min ttl above API maximum", Config{MinTimeToLive: 73 * time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			outcometest.CheckConfigErr(t, tt.cfg.Validate(), tt.ok, ErrInvalidConfig)
		})
	}
	if _, err := New(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	tr := newTransport(t, &fakeClient{}, Config{})
	if got := tr.Capabilities(); got != (ledger.Capabilities{}) {
		t.Fatalf("Capabilities() = %+v, want none", got)
	}
	if got := newTransport(t, &fakeClient{}, Config{ConfigurationSetName: "reset-events"}).Capabilities(); got != (ledger.Capabilities{Events: true}) {
		t.Fatalf("with a configuration set: Capabilities() = %+v, want Events", got)
	}
	if _, ok := any(tr).(ledger.Looker); ok {
		t.Fatal("SMS transport must not implement ledger.Looker")
	}
}

func TestSendBuildsRequest(t *testing.T) {
	fc := accepting("msg-1")
	tr := newTransport(t, fc, Config{OriginationIdentity: "pool-abc", ConfigurationSetName: "reset-events"})
	s := testSend(10*time.Minute + 900*time.Millisecond)
	ack, err := tr.Send(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if ack.ID != "msg-1" {
		t.Fatalf("ack = %q, want the MessageId", ack.ID)
	}
	in := fc.In
	if aws.ToString(in.DestinationPhoneNumber) != testTo || aws.ToString(in.MessageBody) != testBody {
		t.Errorf("destination/body not passed through: %+v", in)
	}
	if in.MessageType != types.MessageTypeTransactional {
		t.Errorf("MessageType = %q", in.MessageType)
	}
	if aws.ToString(in.OriginationIdentity) != "pool-abc" || aws.ToString(in.ConfigurationSetName) != "reset-events" {
		t.Errorf("origination/config set = %q/%q", aws.ToString(in.OriginationIdentity), aws.ToString(in.ConfigurationSetName))
	}
	want := map[string]string{"idempotency_key": s.IdempotencyKey, "content_hash": s.ContentHash}
	if fmt.Sprint(in.Context) != fmt.Sprint(want) {
		t.Errorf("Context = %v, want %v", in.Context, want)
	}
	if got := aws.ToInt32(in.TimeToLive); got != 600 {
		t.Errorf("TimeToLive = %d, want 600 (whole seconds left, rounded down)", got)
	}
	if _, ok := fc.Opts.Retryer.(aws.NopRetryer); !ok {
		t.Errorf("retryer = %T, want aws.NopRetryer", fc.Opts.Retryer)
	}

	// Optional fields stay unset when not configured.
	fc2 := accepting("m")
	if _, err := newTransport(t, fc2, Config{}).Send(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if fc2.In.OriginationIdentity != nil || fc2.In.ConfigurationSetName != nil {
		t.Errorf("unset config produced origination %v / config set %v", fc2.In.OriginationIdentity, fc2.In.ConfigurationSetName)
	}
}

func TestTimeToLive(t *testing.T) {
	tests := []struct {
		name    string
		left    time.Duration
		min     time.Duration
		wantTTL int32 // 0: rejected without a call
	}{
		{"exactly the API minimum", 5 * time.Second, 0, 5},
		{"just under the minimum", 4999 * time.Millisecond, 0, 0},
		{"already expired", -time.Minute, 0, 0},
		{"configured minimum", 59 * time.Second, time.Minute, 0},
		{"configured minimum met", time.Minute, time.Minute, 60},
		{"ten minutes", 10 * time.Minute, 0, 600},
		{"clamped to the API maximum", 100 * time.Hour, 0, 259200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := accepting("m")
			tr := newTransport(t, fc, Config{MinTimeToLive: tt.min})
			_, err := tr.Send(context.Background(), testSend(tt.left))
			if tt.wantTTL == 0 {
				var rej *ledger.Rejection
				if !errors.As(err, &rej) || !strings.Contains(rej.Reason, "challenge expires before minimum TTL") {
					t.Fatalf("err = %v, want a minimum-TTL rejection", err)
				}
				if fc.Calls != 0 {
					t.Fatalf("API called %d times, want 0", fc.Calls)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := aws.ToInt32(fc.In.TimeToLive); got != tt.wantTTL {
				t.Fatalf("TimeToLive = %d, want %d", got, tt.wantTTL)
			}
		})
	}
}

func opErr(err error) error {
	return &smithy.OperationError{ServiceID: "PinpointSMSVoiceV2", OperationName: "SendTextMessage", Err: err}
}

func TestSendErrorMapping(t *testing.T) {
	leaky := "Destination phone number " + testTo + " (+1 415 555 0123) is invalid; body: " + testBody + "\r\n\x00"
	tests := []struct {
		name       string
		err        error
		class      string // rejected, notsent, unknown
		wantPrefix string // of the rejection reason, the NotSent code or the error text
	}{
		{"validation", opErr(&types.ValidationException{Message: aws.String(leaky), Reason: types.ValidationExceptionReasonDestinationCountryBlocked}), "rejected", "ValidationException/DESTINATION_COUNTRY_BLOCKED: Destination phone number [redacted]"},
		{"access denied", &types.AccessDeniedException{Message: aws.String("account disabled"), Reason: types.AccessDeniedExceptionReasonAccountDisabled}, "rejected", "AccessDeniedException/ACCOUNT_DISABLED: account disabled"},
		{"resource not found", &types.ResourceNotFoundException{Message: aws.String("pool not found")}, "rejected", "ResourceNotFoundException: pool not found"},
		{"opted out", &types.ConflictException{Message: aws.String(leaky), Reason: types.ConflictExceptionReasonDestinationPhoneNumberOptedOut}, "rejected", "ConflictException/DESTINATION_PHONE_NUMBER_OPTED_OUT"},
		{"spend limit", &types.ServiceQuotaExceededException{Message: aws.String(leaky), Reason: types.ServiceQuotaExceededExceptionReasonMonthlySpendLimitReachedForText}, "notsent", "ServiceQuotaExceededException/MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"},
		{"quota without a reason", opErr(&types.ServiceQuotaExceededException{Message: aws.String(leaky)}), "notsent", "ServiceQuotaExceededException"},
		{"throttling", opErr(&types.ThrottlingException{Message: aws.String(leaky)}), "notsent", "ThrottlingException"},
		{"internal", &types.InternalServerException{Message: aws.String(leaky)}, "unknown", "smstransport: outcome unknown: InternalServerException"},
		{"deadline", opErr(fmt.Errorf("post %s: %w", testTo, context.DeadlineExceeded)), "unknown", "smstransport: outcome unknown: timeout"},
		{"network", opErr(errors.New("write tcp: broken pipe " + testBody)), "unknown", "smstransport: outcome unknown: transport error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTransport(t, answering(nil, tt.err), Config{}).Send(context.Background(), testSend(10*time.Minute))
			outcometest.Want{Class: tt.class, Text: tt.wantPrefix, Prefix: true}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}
}

// assertClean fails if s carries the number (in any spelling), the body, the
// code in it, the link's token or control characters.
func assertClean(t *testing.T, s string) {
	t.Helper()
	outcometest.AssertClean(t, s, testTo, "4155550123", "415 555 0123", testBody, "834211", "s3cr3tT0ken", "\r", "\n", "\x00")
}

func TestSendAcceptedWithoutMessageIDIsUnknown(t *testing.T) {
	fc := answering(&pinpointsmsvoicev2.SendTextMessageOutput{}, nil)
	if _, err := newTransport(t, fc, Config{}).Send(context.Background(), testSend(time.Hour)); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown", err)
	}
}

// sdkClient is a real End User Messaging SMS client pointed at a local
// HTTP server, with the SDK's default (retrying) retryer.
func sdkClient(url string) *pinpointsmsvoicev2.Client {
	return pinpointsmsvoicev2.New(pinpointsmsvoicev2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(url),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
	})
}

// TestSendThroughSDK runs the real client (awsJson1_0 protocol, default
// retrying retryer) against a local server: it checks the SDK's error
// decoding feeds the mapping and that the transport disables retries.
func TestSendThroughSDK(t *testing.T) {
	leaky := `"Message":"Number ` + testTo + ` blocked: ` + testBody + `"`
	tests := []struct {
		name      string
		status    int
		header    map[string]string // more response headers
		body      string
		class     string // rejected, notsent, unknown
		want      string // rejection reason, NotSent code, or error text
		wantAfter time.Duration
	}{
		{"opted out", 400, nil, `{"__type":"ConflictException","Message":"Number ` + testTo + ` opted out","Reason":"DESTINATION_PHONE_NUMBER_OPTED_OUT"}`, "rejected", "ConflictException/DESTINATION_PHONE_NUMBER_OPTED_OUT: Number [redacted] opted out (request id rid-9)", 0},
		{"ValidationException", 400, nil, `{"__type":"com.amazonaws.pinpointsmsvoicev2#ValidationException","Message":"invalid number ` + testTo + `","Reason":"INVALID_PARAMETER"}`, "rejected", "ValidationException/INVALID_PARAMETER: invalid number [redacted] (request id rid-9)", 0},
		{"AccessDeniedException", 400, nil, `{"__type":"AccessDeniedException","Message":"account disabled","Reason":"ACCOUNT_DISABLED"}`, "rejected", "AccessDeniedException/ACCOUNT_DISABLED: account disabled (request id rid-9)", 0},
		{"ResourceNotFoundException", 400, nil, `{"__type":"ResourceNotFoundException","Message":"pool not found"}`, "rejected", "ResourceNotFoundException: pool not found (request id rid-9)", 0},
		{"throttled", 400, nil, `{"__type":"ThrottlingException",` + leaky + `}`, "notsent", "ThrottlingException", 0},
		{"throttled, code in X-Amzn-ErrorType", 400, map[string]string{"X-Amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazonaws.pinpointsmsvoicev2/"}, `{` + leaky + `}`, "notsent", "ThrottlingException", 0},
		{"throttled with x-amz-retry-after", 400, map[string]string{"X-Amz-Retry-After": "750"}, `{"__type":"ThrottlingException",` + leaky + `}`, "notsent", "ThrottlingException", 750 * time.Millisecond},
		{"throttled with negative x-amz-retry-after", 400, map[string]string{"X-Amz-Retry-After": "-750"}, `{"__type":"ThrottlingException",` + leaky + `}`, "notsent", "ThrottlingException", 0},
		{"spend limit", 400, nil, `{"__type":"ServiceQuotaExceededException",` + leaky + `,"Reason":"MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"}`, "notsent", "ServiceQuotaExceededException/MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT", 0},
		{"daily destination limit", 400, nil, `{"__type":"ServiceQuotaExceededException",` + leaky + `,"Reason":"DAILY_DESTINATION_CALL_LIMIT"}`, "notsent", "ServiceQuotaExceededException/DAILY_DESTINATION_CALL_LIMIT", 0},
		{"internal", 500, nil, `{"__type":"InternalServerException","Message":"oops"}`, "unknown", "smstransport: outcome unknown: InternalServerException (HTTP 500) (request id rid-9)", 0},
		{"bad gateway without a code", 502, nil, `<html>bad gateway</html>`, "unknown", "smstransport: outcome unknown: HTTP 502 without a recognised error code (request id rid-9)", 0},
		{"unavailable without a code", 503, nil, `{"Message":"unavailable"}`, "unknown", "smstransport: outcome unknown: UnknownError (HTTP 503) (request id rid-9)", 0},
		{"accepted without MessageId", 200, nil, `{}`, "unknown", "smstransport: outcome unknown: SendTextMessage succeeded without a MessageId", 0},
		{"accepted but garbled", 200, nil, `{"MessageId":`, "unknown", "smstransport: outcome unknown: HTTP 200 but the response could not be decoded (request id rid-9)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sendOnce(context.Background(), t, func(w http.ResponseWriter, r *http.Request) {
				setHeaders(w)
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			outcometest.Want{Class: tt.class, Text: tt.want, RetryAfter: tt.wantAfter}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}

	// Answers that end before they are complete are unknown outcomes.
	incomplete := []struct {
		name  string
		serve http.HandlerFunc
		ctx   time.Duration // a deadline for the call, if set
		want  string
	}{
		{"connection reset after the request was written", outcometest.ResetConnection, 0, "smstransport: outcome unknown: transport error before a response"},
		{"503 with a truncated body", truncated(503, `{"__type":"ServiceUnavailableException","Message":"try again later"}`),
			0, "smstransport: outcome unknown: HTTP 503 without a recognised error code (request id rid-9)"},
		{"throttling with a truncated body", truncated(400, `{"__type":"ThrottlingException","Message":"slow down, please"}`),
			0, "smstransport: outcome unknown: HTTP 400 without a recognised error code (request id rid-9)"},
		{"timeout", outcometest.Hang(10 * time.Second), 200 * time.Millisecond, "smstransport: outcome unknown: timeout (context deadline exceeded)"},
	}
	for _, tt := range incomplete {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.ctx)
				defer cancel()
			}
			err := sendOnce(ctx, t, tt.serve)
			outcometest.Want{Class: "unknown", Text: tt.want}.Check(t, err, ErrOutcomeUnknown)
			assertClean(t, err.Error())
		})
	}
}

// sendOnce sends testSend through the real SDK client to a server that
// answers with serve, and checks that the server saw exactly one request:
// the SDK's default retryer is on, so this proves the transport turns it off.
func sendOnce(ctx context.Context, t *testing.T, serve http.HandlerFunc) error {
	t.Helper()
	return outcometest.SendOnce(t, serve, func(srv *httptest.Server) error {
		_, err := newTransport(t, sdkClient(srv.URL), Config{}).Send(ctx, testSend(time.Hour))
		return err
	})
}

// setHeaders sets the request id and content type of an End User Messaging answer.
func setHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-RequestId", "rid-9")
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
}

// truncated answers status with a body that breaks off halfway (see
// outcometest.Truncate).
func truncated(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		setHeaders(w)
		outcometest.Truncate(w, status, body)
	}
}
