package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Mutant is a weakened protocol the simulator must catch. The protocol code
// in pkg/ledger is never changed: each mutant is a fault in the store the
// use cases see, shaped like the bug a reviewer would worry about.
type Mutant string

// The mutants. Protocol is the real protocol.
const (
	Protocol Mutant = ""
	// DispatchNoStateCondition: the move to dispatching is written without
	// its condition on the row's state and version.
	DispatchNoStateCondition Mutant = "dispatch-no-state-condition"
	// DispatchNoExpiryCondition: the move to dispatching is written without
	// its condition on the challenge's expiry.
	DispatchNoExpiryCondition Mutant = "dispatch-no-expiry-condition"
	// ClaimIgnoresExistingRow: a claim does not see the identity's row and
	// writes its new claim over it unconditionally.
	ClaimIgnoresExistingRow Mutant = "claim-ignores-existing-row"
	// ReconcileUnknownToClaimed: where the reconcile policy quarantines an
	// unknown row, it moves it back to claimed for another attempt.
	ReconcileUnknownToClaimed Mutant = "reconcile-unknown-to-claimed"
	// FallbackNoWait: a fallback channel is claimed at once instead of
	// being held until the earlier channel ended rejected.
	FallbackNoWait Mutant = "fallback-no-wait"
	// SendNoDeadline: the transport call runs without the send deadline
	// (expiry minus SendGuard): a stalled call reaches the provider late.
	SendNoDeadline Mutant = "send-no-deadline"
	// ResetAsRejection: the transport adapter classifies a connection
	// reset (the provider may have taken the message) as the provider's
	// refusal, so the row ends rejected and a fallback channel is released.
	ResetAsRejection Mutant = "reset-as-rejection"
	// ExpireMarginMinutes: the expire function reads the expiry margin's
	// setting "30" as minutes, not seconds, and expires rows that still had
	// time to be sent.
	ExpireMarginMinutes Mutant = "expire-margin-minutes"
	// RetryBudgetOffByOne: reconcile compares the attempts with the budget
	// one too late (Attempts > MaxAttempts), making one retry too many.
	RetryBudgetOffByOne Mutant = "retry-budget-off-by-one"
	// WindowFromLastAttempt: reconcile measures the transport's idempotency
	// window from the latest attempt instead of the first.
	WindowFromLastAttempt Mutant = "window-from-last-attempt"
	// BeginStaleClock: dispatch checks the expiry after its move to
	// dispatching with the clock it read before that write, so a write whose
	// answer came back late still sends.
	BeginStaleClock Mutant = "begin-stale-clock"
	// LookupByChallenge: the lookup adapter matches the challenge's tag
	// instead of the dedupe key, so the other channel's message answers for
	// this row.
	LookupByChallenge Mutant = "lookup-by-challenge"
	// ProofShapeOnly: the events function's verifier checks that a proof
	// has a MAC's length, not that it is the attempt's MAC.
	ProofShapeOnly Mutant = "proof-shape-only"
	// ReconcileWithoutEvents: reconcile's stand-in transport does not
	// declare the Events capability, so a row whose provider event arrived
	// before its outcome write is retried instead of accepted.
	ReconcileWithoutEvents Mutant = "reconcile-without-events"
	// BounceLosesPermanent: the events decoder drops the permanent flag of
	// a hard bounce, so the fallback channel waits out the wait and is
	// suppressed.
	BounceLosesPermanent Mutant = "bounce-loses-permanent"
	// FallbackWaitZero: the stack is deployed with a fallback wait of zero
	// beside the provider events route: the held channel is suppressed at
	// the acceptance, before a hard bounce can hand over.
	FallbackWaitZero Mutant = "fallback-wait-zero"
	// RefusalQuotesRecipient: the transport adapter copies the provider's
	// refusal message, which names the recipient, into the reason it
	// returns, and the reason is stored on the row.
	RefusalQuotesRecipient Mutant = "refusal-quotes-recipient"
	// ReconcileSweepsDispatchingTwice: reconcile's second sweep lists
	// dispatching rows again (a copied line) instead of unknown ones, so no
	// unknown row is ever retried, looked up or quarantined.
	ReconcileSweepsDispatchingTwice Mutant = "reconcile-sweeps-dispatching-twice"
	// LimitCapOffByOne: the limits table's counter update is conditioned
	// on count <= max instead of count < max: each counter takes one more.
	LimitCapOffByOne Mutant = "limit-cap-off-by-one"
	// LimitCountsAgain: the adapter keys its counted marker by the worker
	// that admits the message, not by the message: a redelivered row, or
	// one whose admission's answer was lost, counts again.
	LimitCountsAgain Mutant = "limit-counts-again"
	// LimitFullAsRepeat: the adapter reads every failed condition of its
	// transaction as the marker's (counted already) and answers a repeat,
	// so a message stopped by a full counter is admitted.
	LimitFullAsRepeat Mutant = "limit-full-as-repeat"
	// RegionDefaultUS: the region lookup parses numbers with a default
	// region, so a number of no region reads as a US number and passes
	// the allow-list.
	RegionDefaultUS Mutant = "region-default-us"
	// KindAsMobile: the number lookup answers every number of a region as
	// a mobile one (a lookup that drops the kind), so a premium-rate
	// number passes the kind allow-list.
	KindAsMobile Mutant = "kind-as-mobile"
	// FixedWindowCounters: the limit store counts an admission only in
	// its own window's item, not also in the next one's: fixed windows,
	// whose cap a burst spends twice across an edge.
	FixedWindowCounters Mutant = "fixed-window-counters"
	// SupersedeLastNoted: the newest-challenge write lacks its condition
	// on the later expiry: the challenge noted last wins, so an older
	// challenge claimed after a newer one hides it.
	SupersedeLastNoted Mutant = "supersede-last-noted"
	// DecryptFailureAsUnavailable: the opener adapter wraps every failure
	// of its KMS call (throttling, a 5xx, a timeout) in
	// ledger.ErrContentUnavailable, not only the ones that say the data key
	// cannot be authenticated: dispatch quarantines a message it never
	// sent, whose content a retry would have opened.
	DecryptFailureAsUnavailable Mutant = "decrypt-failure-as-unavailable"
	// LimitIndexByItem: the limits adapter reports the full counter by its
	// position among its transaction's items, where the counted marker
	// comes first, not among the counts: one too far, and past the end of
	// the counts when the last counter is full (the ledger indexes them
	// with it and panics).
	LimitIndexByItem Mutant = "limit-index-by-item"
	// TimelineWrongIndex: the timeline adapter's Query names the
	// destination index whatever the kind, so a subject's rows are looked
	// up among destinations: a refused admission finds none of its older
	// challenges, and the newest ends limited by counts its superseded
	// siblings held.
	TimelineWrongIndex Mutant = "timeline-wrong-index"
	// ReleaseInReleaseWindows: the limits adapter's release takes one from
	// the counters of the message's rules in the windows containing the
	// release's time, not from those its admission counted in (the bug
	// before counts were exact): a release in a later window takes back a
	// count the message never made there, and leaves its own.
	ReleaseInReleaseWindows Mutant = "release-in-release-windows"
	// DeferralDropsSubject: the store's write of a deferral after a
	// provider's not-sent answer rewrites the row's attributes without its
	// subject_ref, so the throttled row's wake-up finds no subject to look
	// a newer challenge up for, and sends the older challenge.
	DeferralDropsSubject Mutant = "deferral-drops-subject"
	// QueueMarkAtTTL: the dispatch marks' adapter writes the queue mark's
	// time as the mark item's expiry (an hour on), so a queue that stopped
	// delivering looks as if it had just moved: reconcile keeps waiting
	// for a lost wake-up the queue will never deliver, and the row ends
	// expired unsent.
	QueueMarkAtTTL Mutant = "queue-mark-at-ttl"
	// CounterWithoutKey: the limits adapter names its counter items by
	// rule and window only, leaving out the counted key (a destination's
	// fingerprint, a subject, a region): every destination shares one
	// counter, a message is counted in none of its own, and players limit
	// each other.
	CounterWithoutKey Mutant = "counter-without-key"
	// SendGuardMillis: the sending functions (dispatch, reconcile) read the
	// send guard's setting "5" as milliseconds, not seconds: a send may
	// start with almost no time before expires_at, and a slow one reaches
	// the provider within the guard.
	SendGuardMillis Mutant = "send-guard-millis"
	// EntryCodeFromRow: the store's item decoder restores each deferral
	// entry's not-sent code from the row's current one (as it restores an
	// entry's content hash from the row's), so an entry written with
	// another code (the budget's, then the provider's; cleared once the
	// row moves on) reads back edited. The stored items are intact and the
	// protocol's decisions never read the code: only the evidence, as read,
	// is broken.
	EntryCodeFromRow Mutant = "entry-code-from-row"
	// ImageAsRow: dispatch's read of the row answers with the stream
	// record's image instead, so a forged record decides (the hole of
	// issue 42: a copy with an earlier expiry ended a live claim expired).
	ImageAsRow Mutant = "image-as-row"
	// DeadlineBeforeWrite: dispatch sets its send's timeout (the send
	// deadline minus the clock) from the clock it read before its move to
	// dispatching, not after it: its expiry check after the write reads
	// the clock as it is, so the send still starts in time, but a slow
	// write leaves the call's context that much past its deadline. The
	// deadline handed beside the context is right, so a transport that
	// reads it, not its context, cuts the call in time (issue 46).
	DeadlineBeforeWrite Mutant = "deadline-before-write"
	// LifetimeLessMargin: the claim function is deployed with its maximum
	// challenge lifetime less the expiry margin (a setting that leaves
	// room for the margin twice): it dead-letters a challenge that expires
	// within the last margin of the bound, which its rule claims.
	LifetimeLessMargin Mutant = "lifetime-less-margin"
	// IssuedAtDropped: the claim's decoder drops issued_at (reading every
	// intent as version 1): the row records the claim's time, so a
	// challenge issued long before its claim counts as newer than the
	// challenges issued after it.
	IssuedAtDropped Mutant = "issued-at-dropped"
	// RetryLeaseBeforeWrite: reconcile sets its same-key retry's lease
	// timeout (the time left until the lease the window check allowed)
	// from the clock it read before its retry record's write: a slow write
	// leaves the call's context that much past the lease, so the call may
	// outlive the next look its record wrote (a retry call longer than its
	// lease).
	RetryLeaseBeforeWrite Mutant = "retry-lease-before-write"
	// ReleaseNoOp: the dispatch function's limiter is a wrapper that
	// admits through the counters but whose Release does nothing and
	// answers nil (a counters port wrapped the wrong way round):
	// every unsent row dispatch ends keeps its count, too high, where the
	// rule says it is given back. The counters stay consistent with what
	// was counted and given back, so counts-conserved passes.
	ReleaseNoOp Mutant = "release-no-op"
	// KMSErrorAsValid: the seal verifier takes any KMS error but an
	// invalid MAC (throttling, access denied, a disabled or missing key, a
	// timeout, an answer for another key) as a valid MAC: the claim
	// function claims intents nobody checked (issue 46).
	KMSErrorAsValid Mutant = "kms-error-as-valid"
	// MarginEqualsGuard: Policy.Validate's relation between the margin
	// and the send guard weakened to ExpiryMargin >= SendGuard, and a
	// stage deployed with EXPIRY_MARGIN equal to SEND_GUARD: the sending
	// functions condition the write that starts an attempt (dispatch's
	// move to dispatching, reconcile's retry record) on expires_at > now +
	// SendGuard. pkg/ledger's constructors refuse such a policy, so the
	// functions are built with the policy the world validated and the
	// mutant moves the margin down to the guard where they use it, in
	// that write's condition: an attempt may start inside the margin,
	// with no time to finish before its send deadline.
	MarginEqualsGuard Mutant = "margin-equals-guard"
	// VerifyCountsOnly: the verifier compares a row's entry count with
	// the digests' and not its chain head: a history entry rewritten in
	// the table, its chain recomputed, keeps its count and passes. (The
	// mutant is the real verifier's findings without CodeRewritten.)
	VerifyCountsOnly Mutant = "verify-counts-only"
	// VerifyNoHoles: the verifier reads the digests it finds and reports
	// no hole in their numbering: a digest object removed goes unnamed.
	// (The real verifier's findings without CodeMissing.)
	VerifyNoHoles Mutant = "verify-no-holes"
	// VerifySkipsSignature: the verifier parses each digest object and
	// never checks its signature: a body rewritten under its old signature
	// is taken as signed. (The real verifier's findings without
	// CodeSignature.)
	VerifySkipsSignature Mutant = "verify-skips-signature"
	// VerifyHashesOnly: the verifier checks a row's history against the
	// digests and not its retention against the highest the digests
	// recorded (Chain.CheckRow without checkRetention, as before issue 46):
	// an adversary's steps that move a retention earlier, each within the
	// slack, pass when they straddle two digests (the later one records
	// its batch's highest, the first step's old image). It replaces
	// digest-skips-ttl-edits (a digest function that never digests a
	// retention edit), which no run can catch any more: the verifier
	// compares the table's retention with the digests', so an edit the
	// digests never saw is named all the same.
	VerifyHashesOnly Mutant = "verify-hashes-only"
	// FirstReadsReused: the newest challenge dispatch's first reads
	// answered (one batch with the row and the content) is answered again
	// to every later read of the stream in that dispatch (ledger's
	// primedNewest never marks itself used): a challenge claimed while
	// the dispatch waited for its send-rate slot does not supersede it.
	FirstReadsReused Mutant = "first-reads-reused"
)

// Mutants lists every mutant.
var Mutants = []Mutant{DispatchNoStateCondition, DispatchNoExpiryCondition, ClaimIgnoresExistingRow, ReconcileUnknownToClaimed, FallbackNoWait,
	SendNoDeadline, ResetAsRejection, ExpireMarginMinutes, RetryBudgetOffByOne, WindowFromLastAttempt, BeginStaleClock, LookupByChallenge,
	ProofShapeOnly, ReconcileWithoutEvents, BounceLosesPermanent, FallbackWaitZero, RefusalQuotesRecipient, ReconcileSweepsDispatchingTwice,
	LimitCapOffByOne, LimitCountsAgain, LimitFullAsRepeat, RegionDefaultUS, KindAsMobile, FixedWindowCounters, SupersedeLastNoted, DecryptFailureAsUnavailable, LimitIndexByItem,
	TimelineWrongIndex, ReleaseInReleaseWindows, DeferralDropsSubject, QueueMarkAtTTL,
	CounterWithoutKey, SendGuardMillis, EntryCodeFromRow, ImageAsRow, DeadlineBeforeWrite,
	LifetimeLessMargin, IssuedAtDropped, RetryLeaseBeforeWrite, ReleaseNoOp, KMSErrorAsValid, MarginEqualsGuard,
	VerifyHashesOnly, VerifyCountsOnly, VerifyNoHoles, VerifySkipsSignature, FirstReadsReused}

// OptInMutants are the mutants of the opt-in classes (OptIn): hunted only
// with -mutants and -with. None today: the adversary's class
// (ClassTamper), the last opt-in one, is on by default since its check
// passes on the protocol.
var OptInMutants = []Mutant{}

// rareMutants are the mutants whose fault needs a rarer schedule, with how
// many times the usual seed budget each may take: a stall past the expiry
// within the function's timeout, a write answering after the deadline, a
// retry budget spent under a window of 5 or 6 minutes, an event recorded
// before the outcome write of a send whose answer was lost, a full counter
// an older challenge filled while it waited for its slot, a hard bounce
// recorded within the fallback wait (rarer since issue 32's worlds: database
// latency and throttle streaks delay the fallback's first send; first
// caught at seed 507). (Since half the
// worlds have send limits that stop some messages, a stall past the expiry
// is rarer: first caught at seed 1,193.) A throttled older challenge whose
// deferral dropped its subject is caught only when its newer challenge is
// claimed during the throttle: since supersession orders by issue time
// (issue 33), first caught at seed 1,064. Counters in fixed windows need a
// world whose admissions of one key straddle a window edge up to the cap on
// both sides: first caught at seed 712 (issue 33). A send guard read as
// milliseconds needs a slow send near the deadline: first caught at seed
// 316 once dispatch read every stream record's row (issue 42). A retention
// moved earlier in steps that the verifier without its retention check
// misses needs the tampered run (one in ten), steps beyond the slack, and
// a digest boundary between them: first caught at seed 958 (issue 46). A
// first read of the newest challenge answered again after a slot wait
// needs a budget wait of a supersedable row, with a newer challenge of its
// subject claimed during it: first caught at seed 624.
var rareMutants = map[Mutant]int{SendNoDeadline: 8, BeginStaleClock: 4, WindowFromLastAttempt: 8, RetryBudgetOffByOne: 2, ReconcileWithoutEvents: 8,
	TimelineWrongIndex: 10, BounceLosesPermanent: 4, DeferralDropsSubject: 4, FixedWindowCounters: 4, SendGuardMillis: 2, VerifyHashesOnly: 5,
	FirstReadsReused: 4}

// Budget is how many seeds m may take to be caught, given the usual budget.
func (m Mutant) Budget(usual int) int {
	if k, ok := rareMutants[m]; ok {
		return k * usual
	}
	return usual
}

// ParseMutant returns the mutant named s.
func ParseMutant(s string) (Mutant, error) {
	for _, m := range append(slices.Clone(Mutants), OptInMutants...) {
		if string(m) == s {
			return m, nil
		}
	}
	return Protocol, fmt.Errorf("sim: unknown mutant %q", s)
}

func (m Mutant) String() string {
	if m == Protocol {
		return "protocol"
	}
	return string(m)
}

// get is the store read of an invocation.
func (s *sim) get(ctx context.Context, inv *invocation, key string) (ledger.Entry, error) {
	if inv.fn == fnClaim {
		own := inv.trig.msg.intent.Key()
		switch {
		case s.mutant == ClaimIgnoresExistingRow && key == own:
			return ledger.Entry{}, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
		case s.mutant == FallbackNoWait && key != own:
			// The fallback gate's read of the earlier channel: it always
			// looks as if that channel had ended rejected.
			e, err := s.store.Get(ctx, key)
			if err != nil {
				e = ledger.Entry{Key: key}
			}
			e.State = ledger.Rejected
			return e, nil
		}
	}
	e, err := s.store.Get(ctx, key)
	if err == nil {
		e = s.view(inv, e)
	}
	return e, err
}

// view is a row as the use cases of inv see it.
func (s *sim) view(inv *invocation, e ledger.Entry) ledger.Entry {
	if s.mutant == WindowFromLastAttempt && inv.fn == fnReconcile && e.Attempts > 1 {
		e.FirstAttemptAt = lastAttemptAt(e)
	}
	return e
}

// lastAttemptAt is when the newest attempt of e began.
func lastAttemptAt(e ledger.Entry) time.Time {
	for i := len(e.History) - 1; i >= 0; i-- {
		if ev := e.History[i]; ev.Attempt == e.Attempts && (ev.To == ledger.Dispatching && ev.From != ledger.Dispatching || ev.Kind == ledger.KindRetry) {
			return ev.At
		}
	}
	return e.FirstAttemptAt
}

// policy is the policy inv's service runs with.
func (s *sim) policy(inv *invocation) ledger.Policy {
	p := s.w.policy
	switch {
	case s.mutant == ExpireMarginMinutes && inv.fn == fnExpire:
		p.ExpiryMargin = time.Duration(p.ExpiryMargin.Seconds()) * time.Minute
	case s.mutant == RetryBudgetOffByOne && inv.fn == fnReconcile:
		p.MaxAttempts++
	case s.mutant == FallbackWaitZero:
		p.FallbackWait = 0
	case s.mutant == LifetimeLessMargin && inv.fn == fnClaim:
		p.MaxChallengeLifetime -= p.ExpiryMargin
	case s.mutant == SendGuardMillis && (inv.fn == fnDispatch || inv.fn == fnReconcile):
		p.SendGuard = time.Duration(p.SendGuard.Seconds()) * time.Millisecond
	}
	return p
}

// create is the store create of an invocation.
func (s *sim) create(ctx context.Context, inv *invocation, e ledger.Entry) (ledger.Entry, error) {
	if s.mutant == ClaimIgnoresExistingRow && inv.fn == fnClaim {
		if cur, err := s.store.Get(ctx, e.Key); err == nil && !cur.Holds(e.Last().ID) {
			// An unconditional write of the new claim over the row: its
			// attributes replace the row's, its event is appended.
			return s.store.Apply(ctx, ledger.Change{From: cur.State, Version: cur.Version, Next: e, Event: e.Last()})
		}
	}
	return s.store.Create(ctx, e)
}

// apply is the store compare-and-set of an invocation.
func (s *sim) apply(ctx context.Context, inv *invocation, c ledger.Change) (ledger.Entry, error) {
	switch {
	case s.mutant == DispatchNoStateCondition && c.Next.State == ledger.Dispatching:
		if cur, err := s.store.Get(ctx, c.Next.Key); err == nil {
			c.From, c.Version = cur.State, cur.Version
		}
	case s.mutant == DispatchNoExpiryCondition && c.Next.State == ledger.Dispatching:
		c.NotExpiredBy = time.Time{}
	case s.mutant == MarginEqualsGuard && !c.NotExpiredBy.IsZero():
		p := s.policy(inv)
		c.NotExpiredBy = c.NotExpiredBy.Add(p.SendGuard - p.ExpiryMargin)
	case s.mutant == ReconcileUnknownToClaimed && inv.fn == fnReconcile && c.From == ledger.Unknown && c.Next.State == ledger.Quarantined:
		c = reclaim(c)
	case s.mutant == WindowFromLastAttempt && inv.fn == fnReconcile:
		// The row's own first attempt is kept: only the decision read it wrong.
		if cur, err := s.store.Get(ctx, c.Next.Key); err == nil {
			c.Next.FirstAttemptAt = cur.FirstAttemptAt
		}
	}
	if s.mutant == DeferralDropsSubject && c.Next.State == ledger.Deferred && c.Next.Attempts > 0 &&
		c.Next.NotSentCode != ledger.BudgetCode && c.Next.NotSentCode != ledger.HandOffCode {
		c.Next.SubjectRef = ""
	}
	if s.mutant == BeginStaleClock && inv.fn == fnDispatch && c.Next.State == ledger.Dispatching && c.From != ledger.Dispatching {
		inv.frozen = inv.issuedAt()
	}
	return s.store.Apply(ctx, c)
}

// reclaim turns reconcile's quarantine of an unknown row into a move back
// to claimed, with a well-formed history entry (so that the simulator
// catches the behaviour, not a broken hash chain).
func reclaim(c ledger.Change) ledger.Change {
	const reason = "reconcile: outcome unknown; claimed again for another attempt"
	n := c.Next
	n.State, n.Reason, n.NextCheckAt = ledger.Claimed, reason, time.Time{}
	ev := c.Event
	ev.To, ev.Reason = ledger.Claimed, reason
	ev.Hash = ledger.EventHash(n.Key, ev)
	n.History = append(n.History[:len(n.History)-1:len(n.History)-1], ev)
	c.Next, c.Event = n, ev
	return c
}
