package outcome

import (
	"errors"
	"strconv"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/resetledger/resetledger/internal/redact"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Class is what a provider's error code proves about one send.
type Class int

const (
	// Rejected: the provider definitely refused the message, and would
	// refuse it again (*ledger.Rejection).
	Rejected Class = iota + 1
	// NotSent: the provider did not take the message for now, and a later
	// attempt may succeed (*ledger.NotSent).
	NotSent
)

// Codes is one transport's table of provider error codes and the class each
// proves. A code that is not in the table proves nothing: the outcome is
// unknown.
type Codes map[string]Class

// MaxRetryAfter caps the wait a provider can ask for in a *ledger.NotSent.
// A longer wait is most likely a mistake, and the challenge has expired long
// before it anyway.
const MaxRetryAfter = time.Hour

// Classifier turns the error of one transport's AWS SDK send call into the
// error the ledger reads: a *ledger.Rejection or a *ledger.NotSent for the
// codes in Codes, an unknown outcome wrapping Unknown for everything else.
type Classifier struct {
	// Unknown is the transport's sentinel that unknown outcomes wrap.
	// Required.
	Unknown error
	// Codes maps the provider's error codes to what they prove.
	Codes Codes
	// Reason, if set, returns the provider's machine-readable sub-reason
	// carried by some typed errors (an enum such as
	// DESTINATION_PHONE_NUMBER_OPTED_OUT), or "". It is appended to the
	// code as "<code>/<reason>" if SafeToken keeps it.
	Reason func(err error) string
}

// Classify maps err, the non-nil error of an AWS SDK call, to
//
//	code in Codes as Rejected -> *ledger.Rejection{Reason: "<code>[/<reason>][: <provider text>][ (request id X)]"}
//	code in Codes as NotSent  -> *ledger.NotSent{Code: "<code>[/<reason>]", RetryAfter: RetryAfterMillis(err)}
//	anything else             -> FromSDK(c.Unknown, err)
//
// The provider text is passed through redact.Text with secrets (the
// message's destination, subject and body), so no result repeats them.
func (c Classifier) Classify(err error, secrets ...string) error {
	var apiErr interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if !errors.As(err, &apiErr) {
		return FromSDK(c.Unknown, err)
	}
	code := SafeToken(apiErr.ErrorCode())
	class, ok := c.Codes[code]
	if !ok || code == "" {
		return FromSDK(c.Unknown, err)
	}
	if c.Reason != nil {
		if r := SafeToken(c.Reason(err)); r != "" {
			code += "/" + r
		}
	}
	switch class {
	case Rejected:
		reason := code
		if text := redact.Text(apiErr.ErrorMessage(), secrets...); text != "" {
			reason += ": " + text
		}
		return &ledger.Rejection{Reason: reason + RequestID(err)}
	case NotSent:
		return NotSentFor(code, RetryAfterMillis(err))
	}
	return FromSDK(c.Unknown, err)
}

// Ack maps the result of one AWS SDK send call: a non-nil err through
// Classify (with secrets), otherwise the provider's message id, where an
// empty id is an unknown outcome ("<op> succeeded without a MessageId"): the
// call returned, but nothing identifies what the provider took.
func (c Classifier) Ack(op, messageID string, err error, secrets ...string) (ledger.Ack, error) {
	if err != nil {
		return ledger.Ack{}, c.Classify(err, secrets...)
	}
	if messageID == "" {
		return ledger.Ack{}, Unknown(c.Unknown, op+" succeeded without a MessageId", nil)
	}
	return ledger.Ack{ID: messageID}, nil
}

// NotSentFor returns a *ledger.NotSent for code that asks to wait
// retryAfter, clamped to [0, MaxRetryAfter].
func NotSentFor(code string, retryAfter time.Duration) *ledger.NotSent {
	return &ledger.NotSent{Code: code, RetryAfter: min(max(retryAfter, 0), MaxRetryAfter)}
}

// RetryAfterMillis returns the wait an AWS response asked for in its
// x-amz-retry-after header (a whole number of milliseconds, the header the
// SDK's own retryer reads), or 0 when err carries no response, the header is
// absent, or its value is not a non-negative integer. A value too large for
// a time.Duration gives MaxRetryAfter.
func RetryAfterMillis(err error) time.Duration {
	var re interface{ HTTPResponse() *smithyhttp.Response }
	if !errors.As(err, &re) {
		return 0
	}
	resp := re.HTTPResponse()
	if resp == nil || resp.Response == nil {
		return 0
	}
	v := resp.Header.Get("X-Amz-Retry-After")
	if v == "" || v[0] < '0' || v[0] > '9' {
		return 0
	}
	ms, perr := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(perr, strconv.ErrRange) || (perr == nil && ms > uint64(MaxRetryAfter/time.Millisecond)):
		return MaxRetryAfter
	case perr != nil:
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}
