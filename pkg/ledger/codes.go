package ledger

// The codes and reasons an entry records when nothing was sent.

// BudgetCode is the NotSentCode of an entry waiting for the send-rate budget
// rather than for a provider.
const BudgetCode = "send_rate_budget"

// NotSentReason is the reason of an entry that ended expired because every
// attempt before the deadline was refused for now (code is the provider's
// last code, or BudgetCode).
func NotSentReason(code string) string { return "not sent before the challenge expired: " + code }

// ExpiryReason says why an entry that never reached the provider expired.
func ExpiryReason(e Entry) string {
	if e.State == Deferred && e.NotSentCode != "" {
		return NotSentReason(e.NotSentCode)
	}
	return "challenge expired before dispatch"
}

// HandOffCode is the NotSentCode of an entry handed to the dispatch queue
// because its invocation had no time left to send it.
const HandOffCode = "invocation_deadline"

// DeadlineCode is the NotSentCode of an attempt that was not made because
// the send deadline (expiry minus Policy.SendGuard) had passed by the time
// the call would start.
const DeadlineCode = "send-deadline-passed"

// ProofCode is the NotSentCode of an attempt that was not made because its
// proof could not be signed: nothing reached the provider, so the row is
// retried like one the provider throttled.
const ProofCode = "attempt-proof-unavailable"
