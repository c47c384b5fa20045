package ledger

import (
	"time"
)

// DispatchResult is the entry after Dispatch and what happened.
type DispatchResult struct {
	Outcome Outcome
	Entry   Entry
	// BudgetWait is how long this dispatch waited in-process for its
	// send-rate budget slot.
	BudgetWait time.Duration
	// NotSent is the provider's answer when it did not take the message.
	NotSent *NotSent
	// ScheduleErr is set when the entry was deferred but its wake-up could not
	// be scheduled; reconcile's re-drive finds it instead.
	ScheduleErr error
	// Contradicted names the fields in which the event's image differs from
	// the row (OutcomeContradicted only).
	Contradicted []string
}
