package ledger

import (
	"context"
	"fmt"
)

// Decision is an operator's resolution of an unknown or quarantined entry.
type Decision string

// Decisions. Accepted and rejected require transport evidence (an ack or
// provider reference); abandoned says the outcome stays unknown.
const (
	DecideAccepted  Decision = "accepted"
	DecideRejected  Decision = "rejected"
	DecideAbandoned Decision = "abandoned"
)

// Resolve records an operator's decision on an unknown or quarantined entry.
// evidence is the transport's acknowledgement or reference; a decision of
// accepted or rejected without it fails with ErrNoEvidence.
func (s *Resolver) Resolve(ctx context.Context, key string, d Decision, reason, evidence string, w Worker) (Entry, error) {
	if reason == "" {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &FieldError{Field: "reason", Reason: "missing"})
	}
	// Operator text lands in the evidence trail: keep addresses and phone
	// numbers out of it, as everywhere else.
	if err := checkFreeText("reason", reason, true); err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	// Provider ids are long and digit-heavy; only addresses are refused there.
	if err := checkFreeText("evidence", evidence, false); err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	e, err := s.core.Store().Get(ctx, key)
	if err != nil {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	var to State
	switch d {
	case DecideAccepted:
		to = Accepted
	case DecideRejected:
		to = Rejected
	case DecideAbandoned:
		to = Abandoned
		reason = "abandoned, outcome unknown: " + reason
		evidence = ""
	default:
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &FieldError{Field: "decision", Reason: "want accepted, rejected or abandoned"})
	}
	if to != Abandoned && evidence == "" {
		return Entry{}, fmt.Errorf("resolve %s as %s: %w", key, d, ErrNoEvidence)
	}
	if e.State != Unknown && e.State != Quarantined {
		return Entry{}, fmt.Errorf("resolve %s: %w", key, &TransitionError{From: e.State, To: to})
	}
	if to != Abandoned {
		reason = "operator decision with transport evidence: " + reason
	}
	return s.core.Decide(ctx, e, to, w, reason, evidence)
}

// checkFreeText refuses operator text that could carry personal data or
// break a log line: an '@', a run of 7 or more digits (a phone number, when
// phones is set), control characters, or more than 500 bytes.
func checkFreeText(field, v string, phones bool) error {
	if len(v) > 500 {
		return fieldErr(field, "too long (500 bytes at most)")
	}
	digits := 0
	for _, r := range v {
		switch {
		case r == '@':
			return fieldErr(field, "must not contain an email address")
		case r < 0x20 || r == 0x7f:
			return fieldErr(field, "contains a control character")
		case r >= '0' && r <= '9':
			digits++
			if phones && digits >= 7 {
				return fieldErr(field, "must not contain a phone number (7 or more digits in a row)")
			}
		case r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			// separators inside a phone number keep the run going
		default:
			digits = 0
		}
	}
	return nil
}
