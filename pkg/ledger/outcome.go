package ledger

import "time"

// Outcome says what one call of a use case did: Claim, Dispatch and
// RecordProviderEvent answer one. Where the call left the entry in a state
// it names that state ("expired" whoever expired it); the others say why
// nothing changed.
type Outcome string

// Outcomes that name the state the call left the entry in.
const (
	OutcomeClaimed     Outcome = "claimed"     // claim: new row, claimed
	OutcomeHeld        Outcome = "held"        // claim: new row, held until the earlier fallback channel ends
	OutcomeAccepted    Outcome = "accepted"    // dispatch: the transport accepted the message
	OutcomeRejected    Outcome = "rejected"    // dispatch: the transport refused it for good
	OutcomeUnknown     Outcome = "unknown"     // dispatch: no answer that tells; the row is unknown
	OutcomeQuarantined Outcome = "quarantined" // dispatch: content unavailable; nothing sent
	// OutcomeExpired: the challenge expired (or would before a send could
	// start): the claim arrived too late, or dispatch found it so; nothing
	// sent.
	OutcomeExpired Outcome = "expired"
	// OutcomeSuppressed: nothing sent and nothing will be: the fallback
	// channel was not needed (claim), or the entry's subject has a newer
	// challenge (dispatch).
	OutcomeSuppressed Outcome = "suppressed"
	// OutcomeDeferred: nothing sent; the provider did not take the message
	// for now, or the budget's next slot is later than Policy.BudgetWait.
	// The entry is deferred and its wake-up scheduled.
	OutcomeDeferred Outcome = "deferred"
	// OutcomeLimited: a send limit stopped the entry; nothing sent.
	OutcomeLimited Outcome = "limited"
)

// Outcomes of a call that left the entry's state as it was.
const (
	// OutcomeDuplicate: the entry already holds what the call carried (the
	// same claim, the same provider event); nothing was written.
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeMismatch: claim: the entry exists with other content; blocked
	// and recorded.
	OutcomeMismatch Outcome = "mismatch"
	// OutcomeSkipped: dispatch: the entry is not due for dispatch (a
	// duplicate delivery, or another worker won).
	OutcomeSkipped Outcome = "skipped"
	// OutcomeNotDue: dispatch: a deferred entry was handed to dispatch before
	// its next attempt was due. Nothing was written: its wake-up is already
	// scheduled, unless this delivery was that wake-up, arriving early (a
	// delay longer than the queue allows); RescheduleNotDue covers that.
	OutcomeNotDue Outcome = "not_due"
	// OutcomeRecorded: a provider event was appended to the entry's history;
	// its state is unchanged.
	OutcomeRecorded Outcome = "recorded"
	// OutcomeResolved: the entry was unknown, quarantined or deferred, and a
	// provider event, evidence that the provider took the message, moved it
	// to accepted without an operator.
	OutcomeResolved Outcome = "resolved"
	// OutcomeContradicted: dispatch: the event's image is not what the
	// table holds at its version (a forged or altered record); nothing was
	// written.
	OutcomeContradicted Outcome = "contradicted"
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
