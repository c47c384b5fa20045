// Package outcome turns transport failures into the errors the ledger reads,
// without printing their causes.
//
// A transport that cannot tell whether the provider accepted a message
// returns an error built with Unknown. Its text is built only from codes,
// statuses and request ids that the transport chose (see FailureClass,
// HTTPStatus, RequestID and SafeToken), because the underlying error of an
// SDK or net/http call may repeat the destination, the body or the URL. The
// underlying error stays reachable through errors.Is and errors.As.
//
// The AWS transports share one Classifier: each gives it a table of the
// provider's error codes that prove a rejection (*ledger.Rejection) or that
// the message was not taken for now (*ledger.NotSent); every other error is
// an unknown outcome.
package outcome

import (
	"context"
	"errors"
	"fmt"

	"github.com/resetledger/resetledger/pkg/charclass"
)

// Unknown returns an error whose text is sentinel.Error() + ": " + detail and
// which unwraps to sentinel and, if it is not nil, to cause. The cause is
// never printed. sentinel must not be nil; detail must not contain anything
// that is unsafe to log.
func Unknown(sentinel error, detail string, cause error) error {
	return &unknownError{sentinel: sentinel, detail: detail, cause: cause}
}

// unknownError is an unknown outcome; see Unknown.
type unknownError struct {
	sentinel error
	detail   string
	cause    error
}

func (e *unknownError) Error() string { return e.sentinel.Error() + ": " + e.detail }

// Unwrap returns the sentinel and the underlying error.
func (e *unknownError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// FromSDK returns the unknown outcome for an error of an AWS SDK call that
// did not refuse the message (the caller has ruled out its rejection codes). Its detail is the API error code (or
// "unrecognised error code" if the code is not a SafeToken) followed by
// " (HTTP <status>)" when there was a response, or, for an error without an
// API error code, its FailureClass; either way followed by the RequestID.
func FromSDK(sentinel, err error) error {
	var apiErr interface {
		ErrorCode() string
		ErrorMessage() string
	}
	if !errors.As(err, &apiErr) {
		return Unknown(sentinel, FailureClass(err)+RequestID(err), err)
	}
	detail := SafeToken(apiErr.ErrorCode())
	if detail == "" {
		detail = "unrecognised error code"
	}
	if st := HTTPStatus(err); st != 0 {
		detail += fmt.Sprintf(" (HTTP %d)", st)
	}
	return Unknown(sentinel, detail+RequestID(err), err)
}

// FailureClass names the failure of an AWS SDK call that returned no API
// error code, without repeating its text: a context deadline or
// cancellation, a timeout, an HTTP response that could not be decoded, or a
// transport error before any response.
func FailureClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout (context deadline exceeded)"
	case errors.Is(err, context.Canceled):
		return "context canceled"
	}
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return "timeout"
	}
	if st := HTTPStatus(err); st >= 200 && st < 300 {
		return fmt.Sprintf("HTTP %d but the response could not be decoded", st)
	} else if st != 0 {
		return fmt.Sprintf("HTTP %d without a recognised error code", st)
	}
	return "transport error before a response"
}

// HTTPStatus returns the HTTP status code err carries (through an
// HTTPStatusCode() int method anywhere in its chain, as the AWS SDK's
// response errors have), or 0.
func HTTPStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// RequestID returns " (request id X)" for errors that carry an AWS request
// id (a ServiceRequestID() string method) that SafeToken keeps, or "".
func RequestID(err error) string {
	var re interface{ ServiceRequestID() string }
	if errors.As(err, &re) {
		if id := SafeToken(re.ServiceRequestID()); id != "" {
			return " (request id " + id + ")"
		}
	}
	return ""
}

// tokenChars is the alphabet of SafeToken.
var tokenChars = charclass.AlnumPlus("-_.:")

// SafeToken returns s if it is an identifier safe to print: 1 to 128 ASCII
// letters, digits, '-', '_', '.' or ':'. Otherwise it returns "".
func SafeToken(s string) string {
	if !tokenChars.Fits(s, 128) {
		return ""
	}
	return s
}
