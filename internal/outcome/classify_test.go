package outcome

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// reasonErr is a typed provider error with a sub-reason, as some SDK
// exceptions carry one.
type reasonErr struct {
	code, msg, reason string
}

func (e *reasonErr) Error() string        { return e.code + ": " + e.msg }
func (e *reasonErr) ErrorCode() string    { return e.code }
func (e *reasonErr) ErrorMessage() string { return e.msg }

func testReason(err error) string {
	var r *reasonErr
	if errors.As(err, &r) {
		return r.reason
	}
	return ""
}

var testClassifier = Classifier{
	Unknown: errTest,
	Codes: Codes{
		"Refused":  Rejected,
		"SlowDown": NotSent,
		"Paused":   NotSent,
	},
	Reason: testReason,
}

// headerErr is an SDK response error whose response carries header.
func headerErr(status int, header http.Header, err error) error {
	return &smithy.OperationError{ServiceID: "Test", OperationName: "Send", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: header}}, Err: err},
		RequestID:     "req-7",
	}}
}

func TestClassify(t *testing.T) {
	leaky := "no thanks for " + secret + " body https://game.example/reset?token=abc"
	retry := http.Header{"X-Amz-Retry-After": {"2500"}}
	tests := []struct {
		name  string
		err   error
		class string // rejected, notsent, unknown
		want  string // rejection reason, NotSent code, or error text
		after time.Duration
	}{
		{"rejected with text and request id", responseErr(400, "req-1", &smithy.GenericAPIError{Code: "Refused", Message: leaky}), "rejected", "Refused: no thanks for [redacted] body [redacted] (request id req-1)", 0},
		{"rejected with reason", &reasonErr{code: "Refused", msg: "opted out", reason: "OPTED_OUT"}, "rejected", "Refused/OPTED_OUT: opted out", 0},
		{"rejected, unsafe reason dropped", &reasonErr{code: "Refused", reason: "bad reason " + secret}, "rejected", "Refused", 0},
		{"not sent", responseErr(429, "req-1", &smithy.GenericAPIError{Code: "SlowDown", Message: leaky}), "notsent", "SlowDown", 0},
		{"not sent with reason", &reasonErr{code: "Paused", msg: leaky, reason: "DAILY_LIMIT"}, "notsent", "Paused/DAILY_LIMIT", 0},
		{"not sent with x-amz-retry-after", headerErr(429, retry, &smithy.GenericAPIError{Code: "SlowDown", Message: leaky}), "notsent", "SlowDown", 2500 * time.Millisecond},
		{"retry hint on an unknown code is ignored", headerErr(500, retry, &smithy.GenericAPIError{Code: "InternalFailure"}), "unknown", "testtransport: outcome unknown: InternalFailure (HTTP 500) (request id req-7)", 0},
		{"code not in the table", responseErr(400, "req-1", &smithy.GenericAPIError{Code: "Other", Message: leaky}), "unknown", "testtransport: outcome unknown: Other (HTTP 400) (request id req-1)", 0},
		{"unsafe code", &smithy.GenericAPIError{Code: "Refused " + secret, Message: leaky}, "unknown", "testtransport: outcome unknown: unrecognised error code", 0},
		{"no code", &smithy.OperationError{Err: fmt.Errorf("post %s: %w", secret, context.DeadlineExceeded)}, "unknown", "testtransport: outcome unknown: timeout (context deadline exceeded)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := testClassifier.Classify(tt.err, secret, "https://game.example/reset?token=abc")
			var rej *ledger.Rejection
			var ns *ledger.NotSent
			got := "unknown"
			switch {
			case errors.As(err, &rej):
				got = "rejected"
			case errors.As(err, &ns):
				got = "notsent"
			}
			if got != tt.class {
				t.Fatalf("class = %s (%v), want %s", got, err, tt.class)
			}
			switch got {
			case "rejected":
				if rej.Reason != tt.want {
					t.Fatalf("reason = %q\nwant     %q", rej.Reason, tt.want)
				}
			case "notsent":
				if ns.Code != tt.want || ns.RetryAfter != tt.after {
					t.Fatalf("NotSent = %+v, want code %q, retry after %s", ns, tt.want, tt.after)
				}
				if errors.Is(err, errTest) {
					t.Fatalf("NotSent %v wraps the unknown sentinel", err)
				}
			case "unknown":
				if err.Error() != tt.want || !errors.Is(err, errTest) {
					t.Fatalf("err = %q, want %q wrapping the sentinel", err, tt.want)
				}
			}
			for _, leak := range []string{secret, "game.example", "token=abc"} {
				if strings.Contains(err.Error(), leak) {
					t.Fatalf("error text %q leaks %q", err, leak)
				}
			}
		})
	}
}

func TestRetryAfterMillis(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"milliseconds", http.Header{"X-Amz-Retry-After": {"1500"}}, 1500 * time.Millisecond},
		{"zero", http.Header{"X-Amz-Retry-After": {"0"}}, 0},
		{"absent", http.Header{}, 0},
		{"no header map", nil, 0},
		{"negative", http.Header{"X-Amz-Retry-After": {"-1000"}}, 0},
		{"plus sign", http.Header{"X-Amz-Retry-After": {"+1000"}}, 0},
		{"garbage", http.Header{"X-Amz-Retry-After": {"soon"}}, 0},
		{"seconds with a unit", http.Header{"X-Amz-Retry-After": {"5s"}}, 0},
		{"HTTP date is not milliseconds", http.Header{"X-Amz-Retry-After": {"Wed, 21 Oct 2026 07:28:00 GMT"}}, 0},
		{"standard Retry-After is not read", http.Header{"Retry-After": {"30"}}, 0},
		{"over the cap", http.Header{"X-Amz-Retry-After": {"86400000"}}, MaxRetryAfter},
		{"overflow", http.Header{"X-Amz-Retry-After": {"99999999999999999999999"}}, MaxRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryAfterMillis(headerErr(429, tt.header, errors.New("x"))); got != tt.want {
				t.Fatalf("RetryAfterMillis = %s, want %s", got, tt.want)
			}
		})
	}
	if got := RetryAfterMillis(errors.New("no response")); got != 0 {
		t.Fatalf("RetryAfterMillis without a response = %s, want 0", got)
	}
	noResp := &smithyhttp.ResponseError{Err: errors.New("x")}
	if got := RetryAfterMillis(noResp); got != 0 {
		t.Fatalf("RetryAfterMillis with a nil response = %s, want 0", got)
	}
}

func TestNotSentFor(t *testing.T) {
	tests := []struct{ in, want time.Duration }{
		{0, 0},
		{-time.Second, 0},
		{90 * time.Second, 90 * time.Second},
		{MaxRetryAfter, MaxRetryAfter},
		{48 * time.Hour, MaxRetryAfter},
	}
	for _, tt := range tests {
		ns := NotSentFor("HTTP 429", tt.in)
		if ns.Code != "HTTP 429" || ns.RetryAfter != tt.want {
			t.Errorf("NotSentFor(%s) = %+v, want RetryAfter %s", tt.in, ns, tt.want)
		}
	}
}

func TestAck(t *testing.T) {
	ack, err := testClassifier.Ack("Send", "msg-1", nil, secret)
	if err != nil || ack.ID != "msg-1" {
		t.Fatalf("accepted: %+v, %v", ack, err)
	}
	ack, err = testClassifier.Ack("Send", "", nil, secret)
	if !errors.Is(err, errTest) || err.Error() != errTest.Error()+": Send succeeded without a MessageId" || ack.ID != "" {
		t.Fatalf("no message id: %+v, %v; want an unknown outcome", ack, err)
	}
	var rej *ledger.Rejection
	ack, err = testClassifier.Ack("Send", "ignored", &reasonErr{code: "Refused", msg: "no thanks for " + secret}, secret)
	if !errors.As(err, &rej) || strings.Contains(rej.Reason, secret) || ack.ID != "" {
		t.Fatalf("refused: %+v, %v; want the classified rejection without the secret", ack, err)
	}
}
