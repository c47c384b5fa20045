package pipelinetest

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Limiter is a provider's rate limit: a token bucket of Rate tokens per
// second holding at most Burst. It is safe for concurrent use.
type Limiter struct {
	Rate  float64
	Burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
	denied int
}

// Allow takes a token at now if one is there.
func (l *Limiter) Allow(now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last.IsZero() {
		l.tokens, l.last = l.Burst, now
	}
	if d := now.Sub(l.last); d > 0 {
		l.tokens = min(l.Burst, l.tokens+d.Seconds()*l.Rate)
		l.last = now
	}
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	l.denied++
	return false
}

// RetryAfter is how long until the bucket holds a token again, rounded up
// to whole seconds as a Retry-After header carries it.
func (l *Limiter) RetryAfter() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(1, int((1-l.tokens)/l.Rate+0.999))
}

// Denied returns how many requests the limiter refused.
func (l *Limiter) Denied() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.denied
}

// SESThrottle answers SES v2 SendEmail as SES does above the account's
// sending rate (HTTP 429 TooManyRequestsException) whenever allow says no,
// without the request reaching the emulator: the provider did not take
// it. It sits in the Deserialize step, where the SDK's own answers are
// made; the transports turn SDK retries off, so the transport sees it.
func SESThrottle(allow func() bool) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("ses-throttle", func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) != "SESv2" || awsmiddleware.GetOperationName(ctx) != "SendEmail" || allow() {
				return next.HandleDeserialize(ctx, in)
			}
			return middleware.DeserializeOutput{}, middleware.Metadata{}, &awshttp.ResponseError{
				RequestID: "ses-throttle-injected",
				ResponseError: &smithyhttp.ResponseError{
					Response: &smithyhttp.Response{Response: &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{}}},
					Err:      &smithy.GenericAPIError{Code: "TooManyRequestsException", Message: "Maximum sending rate exceeded."},
				},
			}
		}), middleware.After)
	}
}

// Throttle429 wraps a provider so that it answers 429 with a Retry-After
// header whenever the limiter has no token: a webhook provider's rate limit.
func Throttle429(l *Limiter, now func() time.Time) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && !l.Allow(now()) {
				w.Header().Set("Retry-After", strconv.Itoa(l.RetryAfter()))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":"rate limit exceeded"}`))
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}
