package outcome

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

var errTest = errors.New("testtransport: outcome unknown")

// secret stands for the destination or body an underlying error may repeat.
const secret = "player.one@example.org"

func TestUnknown(t *testing.T) {
	cause := fmt.Errorf("post to %s: %w", secret, context.DeadlineExceeded)
	err := Unknown(errTest, "timeout (request id r-1)", cause)
	if got, want := err.Error(), "testtransport: outcome unknown: timeout (request id r-1)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, errTest) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v does not unwrap to the sentinel and the cause", err)
	}
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("Error() %q prints the cause", err.Error())
	}
	wrapped := fmt.Errorf("dispatch: %w", err)
	if !errors.Is(wrapped, errTest) || !errors.Is(wrapped, cause) {
		t.Fatalf("wrapped %v lost the sentinel or the cause", wrapped)
	}

	noCause := Unknown(errTest, "accepted without an id", nil)
	if got, want := noCause.Error(), "testtransport: outcome unknown: accepted without an id"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(noCause, errTest) || errors.Is(noCause, context.DeadlineExceeded) {
		t.Fatalf("%v: want the sentinel only", noCause)
	}
	if u, ok := noCause.(interface{ Unwrap() []error }); !ok || len(u.Unwrap()) != 1 {
		t.Fatalf("Unknown without a cause unwraps to %v, want the sentinel only", u)
	}
}

func TestFromSDK(t *testing.T) {
	leaky := "rate exceeded for " + secret
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"code, status and request id", responseErr(429, "req-123", &smithy.GenericAPIError{Code: "TooManyRequestsException", Message: leaky}), "testtransport: outcome unknown: TooManyRequestsException (HTTP 429) (request id req-123)"},
		{"code without a response", &smithy.GenericAPIError{Code: "ThrottlingException", Message: leaky}, "testtransport: outcome unknown: ThrottlingException"},
		{"unsafe code", responseErr(500, "", &smithy.GenericAPIError{Code: "Bad Code " + secret, Message: leaky}), "testtransport: outcome unknown: unrecognised error code (HTTP 500)"},
		{"no code, undecodable 2xx", responseErr(200, "req-9", errors.New("unexpected EOF")), "testtransport: outcome unknown: HTTP 200 but the response could not be decoded (request id req-9)"},
		{"no code, deadline", &smithy.OperationError{Err: fmt.Errorf("post %s: %w", secret, context.DeadlineExceeded)}, "testtransport: outcome unknown: timeout (context deadline exceeded)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := FromSDK(errTest, tt.err)
			if got := err.Error(); got != tt.want {
				t.Fatalf("Error() = %q\nwant      %q", got, tt.want)
			}
			if !errors.Is(err, errTest) || !errors.Is(err, tt.err) {
				t.Fatalf("%v does not unwrap to the sentinel and the SDK error", err)
			}
		})
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "dial tcp: i/o timeout talking to " + secret }
func (timeoutErr) Timeout() bool { return true }

// responseErr is an SDK response error as the AWS SDK returns it: status
// code and request id, wrapped in an operation error.
func responseErr(status int, requestID string, err error) error {
	return &smithy.OperationError{ServiceID: "Test", OperationName: "Send", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: err},
		RequestID:     requestID,
	}}
}

func TestFailureClass(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", fmt.Errorf("send to %s: %w", secret, context.DeadlineExceeded), "timeout (context deadline exceeded)"},
		{"canceled", &smithy.OperationError{Err: context.Canceled}, "context canceled"},
		{"net timeout", &net.OpError{Op: "read", Net: "tcp", Err: timeoutErr{}}, "timeout"},
		{"2xx undecodable", responseErr(200, "r-1", errors.New("unexpected EOF in "+secret)), "HTTP 200 but the response could not be decoded"},
		{"5xx without code", responseErr(502, "", errors.New("bad gateway")), "HTTP 502 without a recognised error code"},
		{"before a response", errors.New("read tcp: connection reset by peer; to=" + secret), "transport error before a response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FailureClass(tt.err); got != tt.want {
				t.Fatalf("FailureClass = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHTTPStatus(t *testing.T) {
	if got := HTTPStatus(responseErr(429, "", errors.New("slow down"))); got != 429 {
		t.Fatalf("HTTPStatus = %d, want 429", got)
	}
	if got := HTTPStatus(errors.New("no response")); got != 0 {
		t.Fatalf("HTTPStatus without a response = %d, want 0", got)
	}
}

func TestRequestID(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"aws request id", responseErr(500, "req-123", errors.New("x")), " (request id req-123)"},
		{"uuid", responseErr(500, "7f3c1e2a-0b9d-4c55-a1e2-3b4c5d6e7f80", errors.New("x")), " (request id 7f3c1e2a-0b9d-4c55-a1e2-3b4c5d6e7f80)"},
		{"unsafe id", responseErr(500, "id "+secret, errors.New("x")), ""},
		{"empty id", responseErr(500, "", errors.New("x")), ""},
		{"no request id", errors.New("x"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RequestID(tt.err); got != tt.want {
				t.Fatalf("RequestID = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSafeToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ThrottlingException", "ThrottlingException"},
		{"aws.protocol:Error_1-2", "aws.protocol:Error_1-2"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		{strings.Repeat("a", 129), ""},
		{"", ""},
		{"has space", ""},
		{secret, ""},
		{"line\nbreak", ""},
		{"ünicode", ""},
	}
	for _, tt := range tests {
		if got := SafeToken(tt.in); got != tt.want {
			t.Errorf("SafeToken(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
