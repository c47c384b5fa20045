package sim

import (
	"fmt"
	"slices"
)

// The classes of issue 32's item 6: the worlds and invariants that let the
// simulator see what it missed before, judged from the providers' side and
// the world's own bookkeeping. Config.Without switches classes off (their
// worlds are not drawn, their checks not made), so that a run shows what
// the simulator misses without them: each class has a mutant that only it
// catches.
const (
	// ClassSent: liveness means sent. Dispatch-queue messages are lost
	// and delivered late, providers throttle in long streaks, and a
	// message that had time to be sent once the faults stopped must reach
	// its provider (invNotSent).
	ClassSent = "liveness-sent"
	// ClassDeadline: the deadline at the provider. Database calls answer
	// after a latency of their own (a begin write answering late), stream
	// records and queue messages arrive long after they were written, and
	// no send reaches a provider at or after its send deadline (expiry
	// minus the guard) by the world's clock (invLateArrival).
	ClassDeadline = "deadline-at-provider"
	// ClassChain: every chain verified at every step, by the simulator's
	// own verifier (chain.go), over every row a write left and every row a
	// read returned, every entry of it (invHashChain).
	ClassChain = "chain-every-step"
	// ClassCaps: caps judged by what the providers took, and a message the
	// provider took is counted until its window ends (invCapExceeded,
	// invSentUncounted).
	ClassCaps = "caps-by-provider"
	// ClassConserved: counts conserved at every step (invCountsConserved).
	ClassConserved = "counts-conserved"
	// ClassSupersede: supersession judged for every attempt of a message
	// nothing of which the provider took, not only the first
	// (invSupersededSent).
	ClassSupersede = "supersede-after-throttle"
	// ClassContext: the deadline in the call's context (issue 46). The
	// transports honour their call's context, as the SDK's and an HTTP
	// client do: a call is cut at its context's deadline, not at the
	// deadline it is handed beside it, and no call's context may end after
	// its send deadline (expiry minus the guard) by the caller's clock, nor
	// a reconcile retry's after the lease its retry record granted
	// (invCallOutlives). Without it the transports cut at Send.Deadline and
	// the context goes unread, as before.
	ClassContext = "deadline-in-context"
	// ClassLifetime: lifetimes at their bound (issue 46). In one world in
	// two, challenges are issued long before their claim (50 min or 3 h),
	// expire up to MAX_CHALLENGE_LIFETIME after their arrival, and some
	// arrive as version-1 intents (no issued_at: a stage with
	// ACCEPT_INTENT_V1 records the claim's own time). A claim refuses an
	// intent (dead-lettered, no row) exactly when its rule says, by its
	// own clock, and records the sealed issued_at (invLifetime).
	ClassLifetime = "lifetimes-at-bound"
	// ClassPolicy: a policy drawn per run (issue 46). In one world in two
	// the send guard, the expiry margin (down to the guard plus a
	// millisecond), the lease (down to 20 s, shorter than reconcile's
	// 50 s timeout, so that a retry's call reaches its lease), the retry
	// backoff (RetryMax equal to RetryBase), the recheck period and the
	// maximum challenge lifetime are drawn at and near the edges of
	// Policy.Validate's relations; a drawn policy Validate refuses is a
	// bug of the simulator. Its check is call-outlives-deadline's lease
	// clause, which only a lease shorter than reconcile's timeout makes
	// bite.
	ClassPolicy = "policy-drawn"
	// ClassKMS: KMS that fails (issue 46). In one world in two the claim
	// checks each intent's seal with the real kmsseal.KMS and the senders
	// open content with the real envelope.Opener, against a simulated KMS
	// that fails every way KMS fails (throttling, access denied, a
	// disabled, pending-deletion, missing or unavailable key, an internal
	// error, a dependency timeout, the call's context ending, an answer
	// for another key), and tampered copies of intents arrive beside the
	// genuine ones. Only an invalid MAC dead-letters an intent, a claim
	// writes only what KMS answered valid, and only an invocation whose
	// Decrypt succeeded calls a transport (invSealChecked; kms.go).
	ClassKMS = "kms-fails"
	// ClassTamper: an adversary who writes the table (issue 46). In one
	// run in two, once it is over, one row's retention is moved earlier in
	// one to three steps, each within the verifier's slack, and the
	// verifier (the run's digests, as ledgerctl verify checks them) must
	// name the row shortened exactly when the steps together exceed the
	// slack (invTamperNamed; tamper.go). Needs ClassChain's digests.
	ClassTamper = "tamper-in-steps"
)

// Classes lists the classes Config.Without may name.
var Classes = []string{ClassSent, ClassDeadline, ClassChain, ClassCaps, ClassConserved, ClassSupersede, ClassContext, ClassLifetime, ClassPolicy, ClassKMS, ClassTamper}

// OptIn lists the classes that are off unless Config.With names them: a
// class whose check fails on the protocol today (an open finding, named in
// RELIABILITY.md), kept runnable so that its fix can be shown. None today:
// tamper-in-steps, the last, is on by default since Chain.checkRetention;
// Config.With and simulate -with stay for the next such class.
var OptIn = []string{}

// ParseClasses checks the class names in names.
func ParseClasses(names []string) ([]string, error) {
	for _, n := range names {
		if !slices.Contains(Classes, n) {
			return nil, fmt.Errorf("sim: unknown class %q (want one of %v)", n, Classes)
		}
	}
	return names, nil
}

// ParseOptIn checks the opt-in class names in names (Config.With).
func ParseOptIn(names []string) ([]string, error) {
	for _, n := range names {
		if !slices.Contains(OptIn, n) {
			return nil, fmt.Errorf("sim: unknown opt-in class %q (want one of %v)", n, OptIn)
		}
	}
	return names, nil
}

// on reports whether the run has class c.
func (s *sim) on(c string) bool {
	if slices.Contains(OptIn, c) {
		return slices.Contains(s.with, c)
	}
	return !slices.Contains(s.without, c)
}
