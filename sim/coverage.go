package sim

import "github.com/resetledger/resetledger/pkg/ledger"

// Coverage: how often a run reached each path that the invariants exist
// for. A path a schedule rarely reaches is a path nobody checked; the world
// is biased (provider moods, event outcomes and delays, the 5 and 6 minute
// windows) until each is reached often, and `make simulate` fails when one
// is reached fewer than Options.MinCoverage times.

// The paths counted.
const (
	// A row the provider throttled three times or more: the
	// retry-until-expiry path.
	pathThrottled3 = "throttled 3 times or more"
	// An unknown, quarantined or deferred row accepted on a provider event.
	pathResolvedByEvent = "resolved by a provider event"
	// A provider event recorded while its row was still dispatching: before
	// the outcome write of the send it reports.
	pathEventBeforeOutcome = "event before the outcome write"
	// A provider event delivered again.
	pathDuplicateEvent = "duplicate provider event"
	// A forged event refused.
	pathForgedRefused = "forged event refused"
	// A forged stream record answered contradicted, nothing written.
	pathForgedRecordRefused = "forged stream record refused"
	// A held fallback channel claimed after its accepted predecessor
	// bounced permanently.
	pathHandOver = "hard-bounce hand-over"
	// A same-key retry reaching a provider so late in its key window
	// (windows under an hour) that the next look must quarantine: within
	// Lease + ExpiryMargin + RecheckAfter of the window's end.
	pathLateRetry = "same-key retry late in the window"
	// Reconcile marking a row unknown after its lease, its attempt's
	// transport call made and its outcome never written.
	pathLeaseMidSend = "lease expired mid-send"
	// An admission of a message the counters had counted already (a
	// redelivery, a lost answer, a crash after the count): admitted, not
	// counted again.
	pathRepeatAdmission = "repeat admission"
	// A count given back: a counter that counted an unsent message lost it
	// when the message ended without a send.
	pathRelease = "count released"
	// A later attempt (second or after) of a message the provider had only
	// answered not sent, judged for supersession at the provider.
	pathSupersedeLater = "later attempt judged for supersession"
	// A row superseded after a throttled attempt: nothing of it reached
	// the player, so a newer challenge ends it.
	pathSupersededThrottled = "superseded after a throttled attempt"
	// A row that waited unsent (claimed or deferred) when the faults
	// stopped, later taken by its provider: liveness means sent.
	pathSentAfterFaults = "waiting when the faults stopped, then sent"
	// A row whose dispatch-queue message was lost, later taken by its
	// provider (a re-drive or another delivery found it).
	pathSentAfterLostWake = "sent after a lost queue message"
	// A send the provider took after a streak of throttling on its
	// channel ended, of a row the streak had throttled.
	pathSentAfterStreak = "sent after a throttle streak"
	// A message a provider took, judged counted in its own counters.
	pathTakenCounted = "taken message judged counted"
	// A write that started an attempt (dispatch's move to dispatching,
	// reconcile's retry record) answering after a database latency.
	pathBeginLate = "begin write answered late"
	// A send reaching its provider inside the margin (at or after
	// expires_at − margin, before its send deadline), by the world's
	// clock: it started in time and took long to get there.
	pathNearDeadline = "send reaching the provider inside the margin"
	// A transport call cut at its context's deadline before it reached the
	// provider (ClassContext).
	pathContextCut = "send cut at its context's deadline"
	// A tamper named by the verifier (ClassTamper): a retention moved
	// earlier beyond the slack in steps within it, a rewritten row, a
	// digest removed, swapped or rewritten under its signature.
	pathTamperNamed = "tamper named by verify"
	// A dispatch that ended a counted row unsent and returned, its count
	// judged given back (ClassConserved).
	pathGivenBack = "unsent row's count judged given back"
	// A reconcile same-key retry cut at its lease, before its send
	// deadline (ClassPolicy: a lease shorter than reconcile's timeout).
	pathRetryLeaseCut = "same-key retry cut at its lease"
	// A claim of a challenge issued long before its arrival (ClassLifetime).
	pathOldIntent = "intent issued long before its claim, claimed"
	// An intent the claim refused as invalid by its own clock and the
	// claim function dead-lettered (ClassLifetime: at the bound).
	pathIntentRefused = "intent refused at the bound"
	// A version-1 intent claimed (no issued_at).
	pathV1Claimed = "version-1 intent claimed"
	// A tampered copy of an intent (its seal and envelope, another
	// destination_ref) dead-lettered for its seal (ClassKMS).
	pathTamperedRefused = "tampered intent refused by its seal"
	// An intent claimed after a KMS failure of its seal check had the
	// claim retry it (ClassKMS).
	pathSealRetried = "intent claimed after a KMS failure"
	// A written row whose chain, verified by the simulator's own verifier,
	// holds deferral entries (a not-sent code and a next attempt time).
	pathChainDeferral = "chain with deferral entries verified"
	// A written row whose chain holds provider-event entries.
	pathChainProvider = "chain with provider-event entries verified"
	// A dispatch whose first reads read its subject stream's newest
	// challenge reading it afresh after a wait for a send-rate slot.
	pathNewestAfterWait = "newest challenge read afresh after a slot wait"
)

// limitPath is the path of a row stopped by rule: "limited by <rule>", or
// "superseded".
func limitPath(rule ledger.Rule) string {
	if rule == ledger.RuleSuperseded {
		return "superseded"
	}
	return "limited by " + string(rule)
}

// Paths lists the paths whose coverage is measured.
var Paths = []string{pathThrottled3, pathResolvedByEvent, pathEventBeforeOutcome, pathDuplicateEvent, pathForgedRefused, pathForgedRecordRefused, pathHandOver,
	pathLateRetry, pathLeaseMidSend, limitPath(ledger.RuleDestination), limitPath(ledger.RuleSubject), limitPath(ledger.RuleSMSCountry), limitPath(ledger.RuleSMSNumberKind),
	limitPath(ledger.RuleSMSCountryCap), limitPath(ledger.RuleSMSGlobal), limitPath(ledger.RuleSuperseded), pathRepeatAdmission, pathRelease,
	pathSupersedeLater, pathSupersededThrottled, pathSentAfterFaults, pathSentAfterLostWake, pathSentAfterStreak,
	pathTakenCounted, pathBeginLate, pathNearDeadline, pathContextCut, pathRetryLeaseCut, pathOldIntent, pathIntentRefused, pathV1Claimed, pathGivenBack,
	pathChainDeferral, pathChainProvider, pathTamperedRefused, pathSealRetried, pathTamperNamed, pathNewestAfterWait}
