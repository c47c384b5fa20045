// Package sim is a deterministic simulator of the ledger protocol.
//
// From a seed it builds a small world: challenges with single, dual and
// fallback workflows, in half the worlds a send-limit policy with small caps
// (challenges sharing subjects and addresses, SMS numbers of several regions,
// newer challenges arriving while older ones wait: limits.go), a transport per channel with one of the three
// capabilities (no key and no lookup, a key honored for a window, lookup),
// most of them publishing provider events, each with a mood (throttling,
// losing answers), an optional send-rate budget, and concurrent invocations
// of every function: claim (fed by an intent queue with redeliveries and
// changed content), dispatch (fed by the ledger stream and the dispatch
// queue), reconcile and expire (fed by schedules), events (fed by the
// providers' events, delayed, reordered, duplicated, lost, and forged ones
// beside them: events.go), and an operator who resolves quarantined rows.
// Each function holds the send limits the stack gives it (limitsOf): only
// dispatch holds the counters and gives counts back; claim holds the
// policy but no counters, and expire, reconcile, events and the operator
// hold no limits at all, so an unsent row one of them ends keeps its count. The invocations run the real use cases of pkg/ledger
// over the in-memory store, each in its own goroutine, but only one of them
// runs at a time: every port call (store, content, opener, transport,
// lookup, budget, limits, scheduler, sleep) parks the invocation until the
// scheduler lets exactly one invocation take its next step. Dispatch of a
// stream record reads its first three values as the stack does, in one
// step (firstReadsPort, as one BatchGetItem): the row, its subject
// stream's newest challenge and its sealed content, each as its own port
// reads it; later reads of the dispatch go through those ports. Between any two
// steps the scheduler may inject a fault: a crash before or after the call,
// a failed call, a write that lands but whose response is lost, a dropped or
// duplicated trigger, a provider that refuses, throttles, loses the
// acknowledgement or answers late, and clock jumps past leases and
// expiries. Invocations also die when they outlive their function timeout.
//
// Every choice (the world, which invocation steps, which fault) is drawn
// from pgregory.net/rapid, so the same seed gives the same run byte for
// byte, and a failing run is minimized by rapid's shrinker. After every
// step the invariants in invariants.go are checked; after the fault phase
// the schedule turns fair and fault-free and every message must reach a
// terminal state within a bound (liveness).
//
// The invariants judge from the providers' records (what each took,
// refused, throttled and published, per key and attempt), the clock and the
// world's own counting of the send limits, not from the ledger's own account. Coverage (coverage.go) counts how often each
// interesting path was reached; the world is biased until each is reached
// often. Mutants (mutants.go) are slips a maintainer could plausibly make;
// the simulator must catch each of them.
//
// Issue 32 added classes of worlds and invariants (classes.go), each with a
// mutant only it catches, and each can be switched off (Config.Without,
// simulate -without) to show what the simulator misses without it:
// liveness means sent (throttle streaks, lost and late dispatch-queue
// messages, and a message owed a send once the faults stopped must reach
// its provider: liveness.go); the deadline at the provider (database calls
// answering late, stream records arriving late, and no send reaching a
// provider at or after expires_at minus the guard by the world's clock);
// every chain verified at every step by the simulator's own verifier
// (chain.go); caps judged by what the providers took, and a sent message
// always counted in its own counters; counts conserved at every step; and
// supersession judged for every attempt of a message nothing of which the
// provider took, not only the first.
//
// Issue 46 added six more: transports that honour their call's context
// (no call's context may outlive its send deadline, nor a retry's its
// lease: call-outlives-deadline); challenges issued long before their
// claim, at the lifetime bound, and version-1 intents, with claims that
// dead-letter an invalid intent (lifetime-bound, lifetime.go); a policy
// drawn per run at the edges of Policy.Validate's relations; a KMS that
// fails every way KMS fails, under the real seal verifier and envelope
// opener, with tampered copies of intents (only an invalid MAC
// dead-letters an intent, a claim writes only what KMS answered valid,
// and only a successful Decrypt leads to a transport call:
// kms-error-not-verified, kms.go); and an adversary who, once a run is
// over, moves a row's retention earlier in steps each within the
// verifier's slack, rewrites a row's history with no stream record, or
// removes, swaps or rewrites a digest object, and whom the verifier must
// name (tamper-named, tamper.go). The counts-conserved class also judges
// that a dispatch gives back the count of an unsent row it ends, or that it
// counted and lost to the write that ended it (unsent-count-given-back);
// a row another function ends keeps its count, too high, never too low. Since dispatch reads first in one batch,
// superseded-sent judges a sender that waited for its send-rate slot
// from the end of the wait, not from its last read before it: a challenge
// claimed during the wait supersedes still (first-reads-reused). Config.With switches on opt-in classes
// (OptIn), classes whose check fails on the protocol today: there is none
// at present.
package sim
