package ledger

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Adapters and use cases wrap them with context; callers
// test with errors.Is.
var (
	// ErrNotFound reports that no entry (or no sealed content) exists for a key.
	ErrNotFound = errors.New("ledger: not found")
	// ErrConflict reports that a compare-and-set lost: the entry was not in the
	// expected state or version, or already existed on create.
	ErrConflict = errors.New("ledger: conflict")
	// ErrInvalidTransition reports a state change the transition table forbids.
	ErrInvalidTransition = errors.New("ledger: invalid transition")
	// ErrInvalidIntent reports input that fails validation at the boundary.
	// It is always wrapped in a *FieldError naming the field.
	ErrInvalidIntent = errors.New("ledger: invalid intent")
	// ErrContentUnavailable reports sealed content that is missing, cannot be
	// opened, or does not match the recorded content hash.
	ErrContentUnavailable = errors.New("ledger: sealed content unavailable")
	// ErrNoEvidence reports an operator decision of accepted or rejected that
	// carries no transport evidence.
	ErrNoEvidence = errors.New("ledger: decision requires transport evidence")
	// ErrNoTransport reports a channel with no configured transport.
	ErrNoTransport = errors.New("ledger: no transport for channel")
	// ErrNoBudget reports that the send-rate budget has no free send time
	// before the deadline asked for.
	ErrNoBudget = errors.New("ledger: no send-rate budget before the deadline")
)

// FieldError names the input field that failed validation. It unwraps to
// ErrInvalidIntent. Its message never contains the rejected value, so it is
// safe to log even when the field held something secret.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("ledger: invalid intent: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalidIntent.
func (e *FieldError) Unwrap() error { return ErrInvalidIntent }

func FieldErr(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// TransitionError reports a forbidden state change. It unwraps to
// ErrInvalidTransition.
type TransitionError struct {
	From, To State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("ledger: invalid transition %s -> %s", e.From.display(), e.To.display())
}

// Unwrap returns ErrInvalidTransition.
func (e *TransitionError) Unwrap() error { return ErrInvalidTransition }

// Rejection is a definite refusal by a transport. A transport returns it
// (possibly wrapped) when the provider said no; any other error from Send is
// treated as an unknown outcome.
type Rejection struct {
	// Reason is the provider's reason, free of message content and addresses.
	Reason string
}

func (r *Rejection) Error() string { return "transport rejected: " + r.Reason }

// NotSent is a provider's proof that it did not take the message for now
// (throttling, a rate or daily quota, a paused account): not a rejection,
// because a later attempt may succeed, and not an unknown outcome, because
// the provider answered. A transport returns it (possibly wrapped) only when
// the response proves the message was not accepted.
type NotSent struct {
	// Code is the provider's error code or HTTP status ("TooManyRequestsException",
	// "HTTP 429"), safe to log.
	Code string
	// RetryAfter is how long the provider asked the caller to wait, or zero.
	RetryAfter time.Duration
}

func (n *NotSent) Error() string {
	if n.RetryAfter > 0 {
		return fmt.Sprintf("transport did not take the message: %s (retry after %s)", n.Code, n.RetryAfter)
	}
	return "transport did not take the message: " + n.Code
}
