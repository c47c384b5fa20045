package smstransport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/outcome/outcometest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const (
	testTo   = "+14155550123"
	testBody = "Your reset code is 834211, or open https://game.example/r/s3cr3tT0ken"
)

var now = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func testSend(expiresIn time.Duration) ledger.Send {
	s := outcometest.Send("ch-1", ledger.SMS, "reset-sms", ledger.Message{To: testTo, Body: testBody}, now.Add(expiresIn))
	s.Attempt = 2 // a retry: SMS carries no attempt number, so it goes out as the first did
	return s
}

// fake records the input and the options a SendTextMessage call would run
// with.
type fake = outcometest.Fake[pinpointsmsvoicev2.SendTextMessageInput, pinpointsmsvoicev2.SendTextMessageOutput, pinpointsmsvoicev2.Options]

// fakeClient is a Client whose SendTextMessage is a fake.
type fakeClient struct{ fake }

func (f *fakeClient) SendTextMessage(_ context.Context, in *pinpointsmsvoicev2.SendTextMessageInput, optFns ...func(*pinpointsmsvoicev2.Options)) (*pinpointsmsvoicev2.SendTextMessageOutput, error) {
	return f.Call(in, pinpointsmsvoicev2.Options{Retryer: retry.NewStandard()}, optFns)
}

// accepting returns a fake client whose call is accepted with message id id.
func accepting(id string) *fakeClient {
	return &fakeClient{fake{Out: &pinpointsmsvoicev2.SendTextMessageOutput{MessageId: aws.String(id)}}}
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
	outcometest.ValidateConfigs(t, ErrInvalidConfig, []outcometest.ConfigCase[Config]{
		{Name: "zero value", Config: Config{}, OK: true},
		{Name: "full", Config: Config{OriginationIdentity: "arn:aws:sms-voice:eu-west-1:123456789012:pool/pool-abc", ConfigurationSetName: "reset-events", MinTimeToLive: time.Minute}, OK: true},
		{Name: "phone number identity", Config: Config{OriginationIdentity: "+14155550100"}, OK: true},
		{Name: "bad identity", Config: Config{OriginationIdentity: "has space"}, OK: false},
		{Name: "bad config set", Config: Config{ConfigurationSetName: "a;b"}, OK: false},
		{Name: "min ttl below API minimum", Config: Config{MinTimeToLive: time.Second}, OK: false},
		{Name: "min ttl above API maximum", Config: Config{MinTimeToLive: 73 * time.Hour}, OK: false},
		{Name: "max price", Config: Config{MaxPrice: "0.10"}, OK: true},
		{Name: "max price not a decimal", Config: Config{MaxPrice: "1e-1"}, OK: false},
		{Name: "max price with six decimals", Config: Config{MaxPrice: "0.000001"}, OK: false},
		{Name: "protect configuration id", Config: Config{ProtectConfigurationID: "protect-0123456789abcdef0123456789abcdef"}, OK: true},
		{Name: "protect configuration arn", Config: Config{ProtectConfigurationID: "arn:aws:sms-voice:eu-west-1:123456789012:protect-configuration/protect-0123456789abcdef"}, OK: true},
		{Name: "bad protect configuration", Config: Config{ProtectConfigurationID: "protect id"}, OK: false},
	})
	if _, err := New(nil, Config{}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	outcometest.NoCapabilities(t, newTransport(t, &fakeClient{}, Config{}))
	outcometest.EventsOnly(t, newTransport(t, &fakeClient{}, Config{ConfigurationSetName: "reset-events"}))
}

func TestSendBuildsRequest(t *testing.T) {
	fc := accepting("msg-1")
	tr := newTransport(t, fc, Config{OriginationIdentity: "pool-abc", ConfigurationSetName: "reset-events", MaxPrice: "0.0645",
		ProtectConfigurationID: "protect-0123456789abcdef"})
	s := testSend(10*time.Minute + 900*time.Millisecond)
	s.Attempt, s.Proof = 2, "proof-of-attempt-2"
	ack, err := tr.Send(context.Background(), s)
	outcometest.WantAck(t, ack, err, "msg-1")
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
	want := map[string]string{"idempotency_key": s.IdempotencyKey, "content_hash": s.ContentHash, "attempt": "2", "attempt_proof": s.Proof}
	if fmt.Sprint(in.Context) != fmt.Sprint(want) {
		t.Errorf("Context = %v, want %v", in.Context, want)
	}
	if got := aws.ToString(in.ProtectConfigurationId); got != "protect-0123456789abcdef" {
		t.Errorf("ProtectConfigurationId = %q", got)
	}
	if got := aws.ToString(in.MaxPrice); got != "0.0645" {
		t.Errorf("MaxPrice = %q, want 0.0645", got)
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
	if fc2.In.OriginationIdentity != nil || fc2.In.ConfigurationSetName != nil || fc2.In.MaxPrice != nil || fc2.In.ProtectConfigurationId != nil {
		t.Errorf("unset config produced origination %v / config set %v / max price %v / protect configuration %v",
			fc2.In.OriginationIdentity, fc2.In.ConfigurationSetName, fc2.In.MaxPrice, fc2.In.ProtectConfigurationId)
	}
	s.Proof = ""
	if _, err := newTransport(t, fc2, Config{}).Send(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if _, ok := fc2.In.Context["attempt_proof"]; ok {
		t.Errorf("a send without a proof carried an attempt_proof context entry")
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

// suite fills in, for End User Messaging SMS, the tests every AWS
// transport shares. No error text may carry the number (in any spelling),
// the body, the code in it, the link's token or control characters.
var suite = outcometest.Suite{
	Unknown: ErrOutcomeUnknown,
	Secrets: []string{testTo, "4155550123", "415 555 0123", testBody, "834211", "s3cr3tT0ken", "\r", "\n", "\x00"},
	Fail: func(t *testing.T, err error) error {
		_, err = newTransport(t, &fakeClient{fake{Err: err}}, Config{}).Send(context.Background(), testSend(10*time.Minute))
		return err
	},
	SendTo: func(ctx context.Context, t *testing.T, url string) error {
		_, err := newTransport(t, pinpointsmsvoicev2.NewFromConfig(outcometest.AWSConfig(url)), Config{}).Send(ctx, testSend(time.Hour))
		return err
	},
	Empty: func(t *testing.T) error {
		_, err := newTransport(t, &fakeClient{fake{Out: &pinpointsmsvoicev2.SendTextMessageOutput{}}}, Config{}).Send(context.Background(), testSend(time.Hour))
		return err
	},
	Headers: setHeaders,
}

func TestSendErrorMapping(t *testing.T) {
	leaky := "Destination phone number " + testTo + " (+1 415 555 0123) is invalid; body: " + testBody + "\r\n\x00"
	suite.ErrorMapping(t, []outcometest.ErrorCase{
		{Name: "validation", Err: opErr(&types.ValidationException{Message: aws.String(leaky), Reason: types.ValidationExceptionReasonDestinationCountryBlocked}), Class: "rejected", Prefix: "ValidationException/DESTINATION_COUNTRY_BLOCKED: Destination phone number [redacted]"},
		{Name: "access denied", Err: &types.AccessDeniedException{Message: aws.String("account disabled"), Reason: types.AccessDeniedExceptionReasonAccountDisabled}, Class: "rejected", Prefix: "AccessDeniedException/ACCOUNT_DISABLED: account disabled"},
		{Name: "resource not found", Err: &types.ResourceNotFoundException{Message: aws.String("pool not found")}, Class: "rejected", Prefix: "ResourceNotFoundException: pool not found"},
		{Name: "country blocked by the protect configuration", Err: opErr(&types.ConflictException{Message: aws.String(leaky), Reason: types.ConflictExceptionReasonDestinationCountryBlockedByProtectConfiguration}), Class: "rejected", Prefix: "ConflictException/DESTINATION_COUNTRY_BLOCKED_BY_PROTECT_CONFIGURATION: Destination phone number [redacted]"},
		{Name: "opted out", Err: &types.ConflictException{Message: aws.String(leaky), Reason: types.ConflictExceptionReasonDestinationPhoneNumberOptedOut}, Class: "rejected", Prefix: "ConflictException/DESTINATION_PHONE_NUMBER_OPTED_OUT"},
		{Name: "spend limit", Err: &types.ServiceQuotaExceededException{Message: aws.String(leaky), Reason: types.ServiceQuotaExceededExceptionReasonMonthlySpendLimitReachedForText}, Class: "notsent", Prefix: "ServiceQuotaExceededException/MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"},
		{Name: "quota without a reason", Err: opErr(&types.ServiceQuotaExceededException{Message: aws.String(leaky)}), Class: "notsent", Prefix: "ServiceQuotaExceededException"},
		{Name: "throttling", Err: opErr(&types.ThrottlingException{Message: aws.String(leaky)}), Class: "notsent", Prefix: "ThrottlingException"},
		{Name: "internal", Err: &types.InternalServerException{Message: aws.String(leaky)}, Class: "unknown", Prefix: "smstransport: outcome unknown: InternalServerException"},
		{Name: "deadline", Err: opErr(fmt.Errorf("post %s: %w", testTo, context.DeadlineExceeded)), Class: "unknown", Prefix: "smstransport: outcome unknown: timeout"},
		{Name: "network", Err: opErr(errors.New("write tcp: broken pipe " + testBody)), Class: "unknown", Prefix: "smstransport: outcome unknown: transport error"},
	})
}

func TestSendAcceptedWithoutMessageIDIsUnknown(t *testing.T) { suite.NoMessageID(t) }

// TestSendThroughSDK runs the real client (awsJson1_0 protocol, default
// retrying retryer) against a local server: it checks the SDK's error
// decoding feeds the mapping and that the transport disables retries.
func TestSendThroughSDK(t *testing.T) {
	leaky := `"Message":"Number ` + testTo + ` blocked: ` + testBody + `"`
	suite.ThroughSDK(t, []outcometest.Answer{
		{Name: "opted out", Status: 400, Body: `{"__type":"ConflictException","Message":"Number ` + testTo + ` opted out","Reason":"DESTINATION_PHONE_NUMBER_OPTED_OUT"}`, Class: "rejected", Text: "ConflictException/DESTINATION_PHONE_NUMBER_OPTED_OUT: Number [redacted] opted out (request id rid-9)"},
		{Name: "country blocked by the protect configuration", Status: 400, Body: `{"__type":"ConflictException","Message":"Destination ` + testTo + ` blocked","Reason":"DESTINATION_COUNTRY_BLOCKED_BY_PROTECT_CONFIGURATION"}`, Class: "rejected", Text: "ConflictException/DESTINATION_COUNTRY_BLOCKED_BY_PROTECT_CONFIGURATION: Destination [redacted] blocked (request id rid-9)"},
		{Name: "ValidationException", Status: 400, Body: `{"__type":"com.amazonaws.pinpointsmsvoicev2#ValidationException","Message":"invalid number ` + testTo + `","Reason":"INVALID_PARAMETER"}`, Class: "rejected", Text: "ValidationException/INVALID_PARAMETER: invalid number [redacted] (request id rid-9)"},
		{Name: "AccessDeniedException", Status: 400, Body: `{"__type":"AccessDeniedException","Message":"account disabled","Reason":"ACCOUNT_DISABLED"}`, Class: "rejected", Text: "AccessDeniedException/ACCOUNT_DISABLED: account disabled (request id rid-9)"},
		{Name: "ResourceNotFoundException", Status: 400, Body: `{"__type":"ResourceNotFoundException","Message":"pool not found"}`, Class: "rejected", Text: "ResourceNotFoundException: pool not found (request id rid-9)"},
		{Name: "throttled", Status: 400, Body: `{"__type":"ThrottlingException",` + leaky + `}`, Class: "notsent", Text: "ThrottlingException"},
		{Name: "throttled, code in X-Amzn-ErrorType", Status: 400, Header: map[string]string{"X-Amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazonaws.pinpointsmsvoicev2/"}, Body: `{` + leaky + `}`, Class: "notsent", Text: "ThrottlingException"},
		{Name: "throttled with x-amz-retry-after", Status: 400, Header: map[string]string{"X-Amz-Retry-After": "750"}, Body: `{"__type":"ThrottlingException",` + leaky + `}`, Class: "notsent", Text: "ThrottlingException", RetryAfter: 750 * time.Millisecond},
		{Name: "throttled with negative x-amz-retry-after", Status: 400, Header: map[string]string{"X-Amz-Retry-After": "-750"}, Body: `{"__type":"ThrottlingException",` + leaky + `}`, Class: "notsent", Text: "ThrottlingException"},
		{Name: "spend limit", Status: 400, Body: `{"__type":"ServiceQuotaExceededException",` + leaky + `,"Reason":"MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"}`, Class: "notsent", Text: "ServiceQuotaExceededException/MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT"},
		{Name: "daily destination limit", Status: 400, Body: `{"__type":"ServiceQuotaExceededException",` + leaky + `,"Reason":"DAILY_DESTINATION_CALL_LIMIT"}`, Class: "notsent", Text: "ServiceQuotaExceededException/DAILY_DESTINATION_CALL_LIMIT"},
		{Name: "internal", Status: 500, Body: `{"__type":"InternalServerException","Message":"oops"}`, Class: "unknown", Text: "smstransport: outcome unknown: InternalServerException (HTTP 500) (request id rid-9)"},
		{Name: "bad gateway without a code", Status: 502, Body: `<html>bad gateway</html>`, Class: "unknown", Text: "smstransport: outcome unknown: HTTP 502 without a recognised error code (request id rid-9)"},
		{Name: "unavailable without a code", Status: 503, Body: `{"Message":"unavailable"}`, Class: "unknown", Text: "smstransport: outcome unknown: UnknownError (HTTP 503) (request id rid-9)"},
		{Name: "accepted without MessageId", Status: 200, Body: `{}`, Class: "unknown", Text: "smstransport: outcome unknown: SendTextMessage succeeded without a MessageId"},
		{Name: "accepted but garbled", Status: 200, Body: `{"MessageId":`, Class: "unknown", Text: "smstransport: outcome unknown: HTTP 200 but the response could not be decoded (request id rid-9)"},
	})

	// Answers that end before they are complete are unknown outcomes.
	suite.Incomplete(t, []outcometest.Incomplete{
		{Name: "connection reset after the request was written", Serve: outcometest.ResetConnection, Text: "smstransport: outcome unknown: transport error before a response"},
		{Name: "503 with a truncated body", Serve: suite.Truncated(503, "", `{"__type":"ServiceUnavailableException","Message":"try again later"}`),
			Text: "smstransport: outcome unknown: HTTP 503 without a recognised error code (request id rid-9)"},
		{Name: "throttling with a truncated body", Serve: suite.Truncated(400, "", `{"__type":"ThrottlingException","Message":"slow down, please"}`),
			Text: "smstransport: outcome unknown: HTTP 400 without a recognised error code (request id rid-9)"},
		{Name: "timeout", Serve: outcometest.Hang(10 * time.Second), Deadline: 200 * time.Millisecond, Text: "smstransport: outcome unknown: timeout (context deadline exceeded)"},
	})
}

// setHeaders sets the request id and content type of an End User Messaging answer.
func setHeaders(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-RequestId", "rid-9")
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
}

// TestSendAcceptedWhileTheRequestWriteLags: End User Messaging answers 200
// while net/http is still finishing the request. Without a body of its own
// (sdkhttp.OneAttempt) the SDK's close of the request body when the headers
// arrive cuts off the answer, and a message the service took ends unknown.
func TestSendAcceptedWhileTheRequestWriteLags(t *testing.T) {
	outcometest.AcceptedWhileTheRequestWriteLags(t, `{"MessageId":"sms-msg-1"}`, "sms-msg-1", func(cfg aws.Config) (ledger.Ack, error) {
		tr := newTransport(t, pinpointsmsvoicev2.NewFromConfig(cfg), Config{})
		return tr.Send(context.Background(), testSend(time.Hour))
	})
}
