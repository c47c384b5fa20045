package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The invariants, by the name a violation is reported under.
const (
	// At most one message the provider took per identity, on a transport
	// that honors no idempotency key.
	invDuplicateSend = "duplicate-send"
	// On a transport that honors a key for a window, no same-key send that
	// reaches it after the window (it would take the message again).
	invKeyWindow = "send-outside-key-window"
	// No send whose attempt started (its authorizing write: the move to
	// dispatching, or reconcile's same-key retry) at or after expires_at
	// minus the margin, by the clock of the worker that sent it.
	invLateSend = "late-send"
	// No attempt starts (its authorizing write lands) when the writing
	// worker's clock says the challenge is past expires_at minus the margin:
	// the write's own condition must refuse it (DESIGN invariant 4), whether
	// or not a later check would stop the send.
	invLateAttempt = "late-attempt"
	// No provider receives a send at or after its send deadline (expires_at
	// minus Policy.SendGuard) by the world's clock when the request
	// arrives, however long the calls before it took to answer: the
	// deadline cuts the call first. The deadline is a duration on the
	// sender's clock, so a sender whose clock runs behind may reach the
	// provider that much later (ClassDeadline; without it, the bound is
	// expires_at).
	invLateArrival = "late-arrival"
	// No transport call's context ends after the call's send deadline
	// (expires_at minus Policy.SendGuard, the guard the stack is deployed
	// with) by the calling worker's clock, and no reconcile same-key
	// retry's after the next look its retry record wrote (its lease):
	// DESIGN 12, the deadline bounds the send, as the transport sees it.
	// A call whose context has no deadline outlives every bound
	// (ClassContext).
	invCallOutlives = "call-outlives-deadline"
	// unknown (and quarantined) is left only with transport evidence (an ack
	// the provider issued for the key, a refusal, a not-sent answer), to
	// quarantined by policy, or by an operator's decision.
	invUnknownExit = "unknown-exit"
	// accepted always carries the id of a message the provider took under
	// the key: its acknowledgement, or the message id of its own event
	// (DESIGN invariant 5: accepted is recorded with the transport's id).
	invAcceptedNoAck = "accepted-without-ack"
	// rejected is recorded only for an attempt the provider refused: a
	// timeout or a lost connection is unknown, never rejected (DESIGN 5).
	invRejectedNoRefusal = "rejected-without-refusal"
	// expired is recorded only once expires_at − margin has passed by the
	// clock of the writing worker, or when its reason says no send could
	// start in time (no budget slot, the provider's backoff past the
	// deadline): a message that could still be sent is sent (DESIGN 4, 10).
	invExpiredEarly = "expired-early"
	// Reconcile's same-key retries stop at Policy.MaxAttempts: no transport
	// call carries a higher attempt number from a retry (DESIGN 3:
	// bounded retries).
	invAttemptBound = "attempt-bound"
	// A same-key retry reaches a provider that honors keys only while it
	// still remembers the key: before its first message under the key plus
	// the window, however late the retry was decided (DESIGN section 6).
	invRetryWindow = "retry-outside-key-window"
	// At the moment the transport is called, the caller's clock is before
	// expires_at minus the margin (DESIGN 4, 12): judged at the call, not
	// at the write that authorized it.
	invLateCall = "late-call"
	// A provider event counts only if its attempt proof is one a sender
	// made for an attempt the row made: a forged event is never recorded.
	invForgedEvent = "forged-event-recorded"
	// A stream record someone forged (DESIGN 16) writes nothing: dispatch
	// decides from the row it reads, and a record the row contradicts is
	// only counted.
	invForgedRecord = "forged-record-decided"
	// A row whose history holds provider evidence (an event saying the
	// provider took the message) is never sent again: another attempt
	// would send twice.
	invEvidenceResent = "evidence-sent-again"
	// A permanent delivery failure (hard bounce) of an accepted fallback
	// channel, recorded within the fallback wait, hands over: the next
	// channel is claimed (never suppressed), once (DESIGN 7).
	invHandOver = "hard-bounce-hand-over"
	// In a fallback workflow, a later channel is sent only after the
	// earlier one ended rejected: never two channels of one challenge.
	invFallback = "fallback-two-channels"
	// Every stored row's history verifies and only ever grows. With
	// ClassChain, by the simulator's own verifier (chain.go), over every
	// entry of every row a write left and every row a read returned, at the
	// step it happened; without it, by Entry.Verify over the entries each
	// write added.
	invHashChain = "hash-chain"
	// A stored row only moves along the transition table.
	invIllegalTransition = "illegal-transition"
	// No secret (token, body, address) in a stored row, log line or error.
	invSecret = "secret-leak"
	// After the faults stop, on a fair schedule, every message ends in a
	// terminal state within the bound.
	invLiveness = "liveness"
	// A message that was provably not sent (never dispatched, or every
	// attempt answered not sent) is never quarantined.
	invQuarantinedUnsent = "quarantined-unsent"
	// The protocol code panicked.
	invPanic = "panic"
	// No send limit is exceeded: per rule and key, within any span of the
	// rule's window, wherever it starts (admission times, by the admitting
	// worker's clock), the providers receive at most the cap of distinct
	// messages (issue 21; any span, not only the clock's windows, since
	// issue 33).
	invCapExceeded = "cap-exceeded"
	// A message the limits count reaches a provider only once a counter
	// call counted it: a limited message is never sent.
	invLimitedSent = "limited-sent"
	// An SMS to a region outside the allow-list, or to a number of no
	// region, never reaches a provider.
	invRefusedRegionSent = "refused-region-sent"
	// An SMS to a number of a kind outside the kind allow-list (a
	// premium-rate number) never reaches a provider.
	invRefusedKindSent = "refused-kind-sent"
	// A superseded message is never sent: no attempt of a message nothing
	// of which the provider took (its first, or one after attempts the
	// provider answered not sent) reaches a provider when a newer challenge
	// of its subject, purpose and channel was claimed before the sender's
	// last read of the newest challenge.
	invSupersededSent = "superseded-sent"
	// A message counts once: no counter is raised twice by one message.
	invCountedTwice = "counted-twice"
	// Counts are conserved: at every step each counter holds exactly the
	// messages it counted minus those given back, and a release takes back
	// only from the counters that counted the message.
	invCountsConserved = "counts-conserved"
	// A newest challenge is not limited by a counter its own older
	// challenges filled while they waited for their slots, when they end
	// superseded by it: the player would get no link at all.
	invStarved = "superseded-starve-newest"
	// A sent message is always counted (ClassCaps): when a provider takes a
	// message the limits count, every counter of its own (its rule, key
	// and admission's window, by the world's policy) counts it, and no
	// release gives that count back afterwards.
	invSentUncounted = "sent-uncounted"
)

// Invariants lists the invariants checked after every step.
var Invariants = []string{invDuplicateSend, invKeyWindow, invLateSend, invLateAttempt, invLateArrival, invUnknownExit, invAcceptedNoAck, invFallback,
	invHashChain, invIllegalTransition, invSecret, invLiveness, invQuarantinedUnsent, invPanic,
	invRejectedNoRefusal, invExpiredEarly, invAttemptBound, invRetryWindow, invLateCall, invForgedEvent, invForgedRecord, invEvidenceResent, invHandOver,
	invCapExceeded, invLimitedSent, invRefusedRegionSent, invRefusedKindSent, invSupersededSent, invCountedTwice, invStarved, invCountsConserved,
	invNotSent, invSentUncounted, invLifetime, invCountGivenBack, invSealChecked, invTamperNamed}

type violation struct {
	name   string
	detail string
	keys   []string
	step   int
	// also names the other invariants the same step violated.
	also []string
}

func (v *violation) String() string { return v.name + ": " + v.detail }

// fail records a violation; the first of a step is reported, the others of
// the same step are named with it.
func (s *sim) fail(name, detail string, keys ...string) {
	switch v := s.violation; {
	case v == nil:
		s.violation = &violation{name: name, detail: detail, keys: keys, step: s.step}
	case v.step == s.step && name != v.name && !slices.Contains(v.also, name):
		v.also = append(v.also, name)
	}
}

// facts are what one step did, for the checks after it.
type facts struct {
	writes []writeFact
	sends  []sendFact
	ends   []endFact
	events []eventFact
}

// bounceFact is a permanent delivery failure the events function recorded.
type bounceFact struct {
	at time.Time // true clock
	// inWait: the row was still open, or accepted less than the fallback
	// wait before (by the row's record of its acceptance).
	inWait bool
}

type writeFact struct {
	inv     *invocation
	before  ledger.Entry
	existed bool
	after   ledger.Entry
}

type sendFact struct {
	inv       *invocation
	key       string
	attempt   int
	behavior  behavior
	res       sendResult
	at        time.Time // the provider's clock
	auth      time.Time // the sender's clock when it issued the authorizing write
	callAt    time.Time // the sender's clock when it called the transport
	evidenced bool      // the row held provider evidence at the authorizing write
	// unsent: nothing of the row could have reached the provider before the
	// authorizing write (nothingTaken), by its history then.
	unsent    bool
	fn        function
	expiresAt time.Time
	// earlier holds the rows of the earlier fallback channels as they were
	// when the send was made.
	earlier []ledger.Entry
	// callEnd is when the call's context ends by the sender's clock
	// (bounded: it has a deadline); lease, for a reconcile retry, the
	// next look its retry record wrote.
	callEnd  time.Time
	bounded  bool
	measured bool
	lease    time.Time
}

type endFact struct {
	inv  *invocation
	line string
	err  error
}

func (s *sim) sendFact(inv *invocation, m ledger.Send, b behavior, res sendResult) sendFact {
	f := sendFact{inv: inv, key: m.IdempotencyKey, attempt: m.Attempt, behavior: b, res: res, at: s.now, expiresAt: m.ExpiresAt,
		callAt: inv.issuedAt(), evidenced: inv.evidenced[m.IdempotencyKey], unsent: inv.unsent[m.IdempotencyKey], fn: inv.fn,
		callEnd: inv.callEnd, bounded: inv.callBounded, measured: inv.callMeasured, lease: inv.lease[m.IdempotencyKey]}
	var ok bool
	if f.auth, ok = inv.auth[m.IdempotencyKey]; !ok {
		f.auth = inv.clock() // no write started this attempt: judge the send itself
	}
	if info, ok := s.w.rows[m.IdempotencyKey]; ok && info.challenge.workflow.Kind == ledger.Fallback {
		for _, ch := range info.challenge.workflow.Order {
			if ch == info.channel {
				break
			}
			id := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: info.challenge.id, Channel: ch}
			e, _ := s.peek(id.Key())
			e.Key = id.Key()
			f.earlier = append(f.earlier, e)
		}
	}
	return f
}

// check runs the invariants over what the last step did.
func (s *sim) check() {
	for _, w := range s.facts.writes {
		s.checkWrite(w)
	}
	for _, f := range s.facts.sends {
		s.checkSend(f)
	}
	for _, f := range s.facts.events {
		s.checkEvent(f)
	}
	for _, e := range s.facts.ends {
		s.checkSecrets("log line of "+e.inv.String(), e.line, nil)
		if e.err != nil {
			s.checkSecrets("error of "+e.inv.String(), e.err.Error(), nil)
		}
	}
	if s.w.limitsOn() {
		s.checkConserved("")
	}
	s.facts = facts{writes: s.facts.writes[:0], sends: s.facts.sends[:0], ends: s.facts.ends[:0], events: s.facts.events[:0]}
}

func (s *sim) label(key string) string {
	if info, ok := s.w.rows[key]; ok {
		return info.label
	}
	return short(key)
}

func short(key string) string {
	if len(key) > 8 {
		return key[:8] + "…"
	}
	return key
}

// checkWrite judges one stored write against the world's records.
// It is long because each invariant a write can break is one case here.
func (s *sim) checkWrite(w writeFact) {
	s.checkForgedWrite(w)
	s.checkClaimed(w)
	s.checkSealed(w)
	key, a := w.after.Key, w.after
	lbl := s.label(key)
	by := a.Last().Worker
	// The row and the entries this write added: older entries were
	// checked when they were written (the hash chain keeps them as they were).
	shown := a
	if n := len(w.before.History); w.existed && n <= len(a.History) {
		shown.History = a.History[n:]
	}
	raw, _ := json.Marshal(shown)
	s.checkSecrets("stored row "+lbl, string(raw), []string{key})

	if s.on(ClassChain) {
		if s.checkChain(a, "after a write by "+by) {
			s.chainPaths(a)
		}
	} else if err := s.verify(w); err != nil {
		s.fail(invHashChain, fmt.Sprintf("row %s after a write by %s: %v", lbl, by, err), key)
	}
	from := ledger.None
	if w.existed {
		from = w.before.State
		if len(a.History) < len(w.before.History) {
			s.fail(invHashChain, fmt.Sprintf("row %s: a write by %s shortened its history from %d to %d entries",
				lbl, by, len(w.before.History), len(a.History)), key)
		} else {
			for i, ev := range w.before.History {
				if a.History[i].Hash != ev.Hash {
					s.fail(invHashChain, fmt.Sprintf("row %s: a write by %s rewrote history entry %d", lbl, by, i), key)
					break
				}
			}
		}
	}
	if from != a.State || !w.existed {
		if err := ledger.CanTransition(from, a.State); err != nil {
			s.fail(invIllegalTransition, fmt.Sprintf("row %s moved %s → %s (written by %s: %q), which the transition table forbids",
				lbl, from, a.State, by, a.Last().Reason), key)
		}
	}

	p := s.providers[a.Identity.Channel]
	entered := !w.existed || from != a.State
	if entered && a.State == ledger.Accepted && !p.acks[key][a.AckID] {
		s.fail(invAcceptedNoAck, fmt.Sprintf("row %s recorded accepted by %s (%q) with ack %q, which is no message the provider took under its key (acks %v)",
			lbl, by, a.Last().Reason, a.AckID, sortedKeys(p.acks[key])), key)
	}
	if entered && a.State == ledger.Rejected && !p.refused[key][a.Attempts] {
		s.fail(invRejectedNoRefusal, fmt.Sprintf("row %s recorded rejected for attempt %d by %s (%q); the provider refused no such attempt (refusals %d)",
			lbl, a.Attempts, by, a.Last().Reason, p.rejected[key]), key)
	}
	if entered && a.State == ledger.Expired {
		margin := s.w.policy.ExpiryMargin
		if clock := w.inv.issuedAt(); clock.Add(margin).Before(a.ExpiresAt) && !strings.HasPrefix(a.Reason, ledger.NotSentReason("")) {
			s.fail(invExpiredEarly, fmt.Sprintf("row %s was recorded expired by %s at %s by its clock (%q); expires_at − margin is %s",
				lbl, by, s.rel(clock), a.Reason, s.rel(a.ExpiresAt.Add(-margin))), key)
		}
	}
	if ev := a.Last(); ev.Kind.Provider() && !w.before.Holds(ev.ID) {
		real, ok := s.realEvents[eventSig(key, ev.ProviderType, ev.Detail, ev.AckID, ev.ProviderAt)]
		switch {
		case !ok || !p.acks[key][ev.AckID]:
			s.fail(invForgedEvent, fmt.Sprintf("row %s recorded a provider event %s (message %q) by %s, which the provider never published about a message it took",
				lbl, ev.ProviderType, ev.AckID, by), key)
		case real.Permanent:
			s.bounced(w, key)
		}
	}
	s.limitPaths(w, entered)
	s.checkStarved(w)
	if entered && from == ledger.Held {
		s.checkHandOver(w, key, lbl, by)
	}
	if entered && from == ledger.Dispatching && a.State == ledger.Unknown && w.inv.fn == fnReconcile && s.called[key] == a.Attempts {
		s.stats.Paths[pathLeaseMidSend]++
	}
	if (from == ledger.Unknown || from == ledger.Quarantined) && a.State != from {
		ok := false
		switch a.State {
		case ledger.Accepted, ledger.Rejected:
			ok = true // judged above, for every way in
		case ledger.Deferred:
			ok = p.notSent[key] > 0
		case ledger.Abandoned:
			// Only through the operator function, which names the authenticated session.
			ok = strings.HasPrefix(by, "operator:"+simOperatorRole+"/")
		case ledger.Quarantined:
			ok = true
		}
		if !ok {
			s.fail(invUnknownExit, fmt.Sprintf("row %s left %s for %s by %s (%q) without that evidence from the provider (acks %v, refusals %d, not-sent answers %d)",
				lbl, from, a.State, by, a.Last().Reason, sortedKeys(p.acks[key]), p.rejected[key], p.notSent[key]), key)
		}
	}

	if a.State == ledger.Quarantined && from != ledger.Quarantined && unsent(from) {
		s.fail(invQuarantinedUnsent, fmt.Sprintf("row %s was %s (nothing sent, or every attempt answered not sent) and %s quarantined it: %q",
			lbl, from, by, a.Reason), key)
	}
}

// unsent reports whether a row in state st provably has nothing sent: it
// waits for its claim (the transition table lets it become claimed) or for
// an attempt to start (the table lets it move to dispatching), so no
// attempt of it is in flight or unanswered. By ledger's table these are
// none, held, claimed and deferred. The protocol quarantines such a row
// only when its sealed content is gone or fails verification, which the
// simulated content store and opener never make happen.
func unsent(st ledger.State) bool {
	return ledger.CanTransition(st, ledger.Claimed) == nil || ledger.CanTransition(st, ledger.Dispatching) == nil
}

func (s *sim) checkSend(f sendFact) {
	lbl := s.label(f.key)
	s.checkOpened(f)
	s.called[f.key] = f.attempt
	s.stats.Sends++
	if f.res.recorded {
		s.stats.Recorded++
	}
	if f.res.reached && !f.at.Before(f.expiresAt) {
		s.stats.LateArrivals++
		s.stats.MaxLateness = max(s.stats.MaxLateness, f.at.Sub(f.expiresAt))
		if !s.on(ClassDeadline) {
			s.fail(invLateArrival, fmt.Sprintf("%s sent %s (attempt %d) reached the provider at %s, %s after expires_at",
				f.inv, lbl, f.attempt, s.rel(f.at), f.at.Sub(f.expiresAt)), f.key)
		}
	}
	if deadline := f.expiresAt.Add(-s.w.policy.SendGuard); f.res.reached && s.on(ClassDeadline) {
		allowed := deadline.Add(max(-f.inv.skew, 0))
		switch {
		case !f.at.Before(allowed):
			s.fail(invLateArrival, fmt.Sprintf("%s sent %s (attempt %d) reached the provider at %s by the world's clock, %s after its send deadline %s (expires_at − guard; the sender's clock skew %s)",
				f.inv, lbl, f.attempt, s.rel(f.at), f.at.Sub(deadline), s.rel(deadline), f.inv.skew), f.key)
		case !f.at.Before(f.expiresAt.Add(-s.w.policy.ExpiryMargin)):
			s.stats.Paths[pathNearDeadline]++
		}
	}
	s.checkCallDeadline(f, lbl)
	margin := s.w.policy.ExpiryMargin
	if !f.callAt.Add(margin).Before(f.expiresAt) {
		s.fail(invLateCall, fmt.Sprintf("%s called the transport for %s (attempt %d) at %s by its clock; expires_at − margin is %s",
			f.inv, lbl, f.attempt, s.rel(f.callAt), s.rel(f.expiresAt.Add(-margin))), f.key)
	}
	if f.fn == fnReconcile && f.attempt > s.w.policy.MaxAttempts {
		s.fail(invAttemptBound, fmt.Sprintf("%s made a same-key retry of %s as attempt %d; the policy allows %d attempts",
			f.inv, lbl, f.attempt, s.w.policy.MaxAttempts), f.key)
	}
	if f.evidenced {
		s.fail(invEvidenceResent, fmt.Sprintf("%s sent %s again (attempt %d), though its row held a provider event saying the provider took it",
			f.inv, lbl, f.attempt), f.key)
	}
	if !f.auth.Add(margin).Before(f.expiresAt) {
		s.fail(invLateSend, fmt.Sprintf("%s sent %s (attempt %d) started at %s by its clock; expires_at − margin is %s",
			f.inv, lbl, f.attempt, s.rel(f.auth), s.rel(f.expiresAt.Add(-margin))), f.key)
	}
	p := s.providers[s.w.rows[f.key].channel]
	if f.behavior == throttle && f.res.reached && p.notSent[f.key] == 3 {
		s.stats.Paths[pathThrottled3]++
	}
	if st := p.spec.streak; f.res.recorded && st > 0 && p.notSent[f.key] > 0 && !f.at.Before(ledgertest.Epoch.Add(st)) {
		s.stats.Paths[pathSentAfterStreak]++
	}
	if rs := p.msgs[f.key]; p.spec.cap == capKey && f.res.reached && len(rs) > 0 && rs[0].attempt < f.attempt {
		end := rs[0].at.Add(p.spec.window)
		if !f.at.Before(end) {
			s.fail(invRetryWindow, fmt.Sprintf("%s's same-key retry of %s (attempt %d) reached the provider at %s; its window (%s) from the first message under the key (%s at %s) ended at %s",
				f.inv, lbl, f.attempt, s.rel(f.at), p.spec.window, rs[0].ack, s.rel(rs[0].at), s.rel(end)), f.key)
		} else if pol := s.w.policy; p.spec.window < time.Hour && !f.at.Before(end.Add(-pol.Lease-pol.ExpiryMargin-pol.RecheckAfter)) {
			s.stats.Paths[pathLateRetry]++
		}
	}
	if rs := p.msgs[f.key]; f.res.recorded && len(rs) > 1 {
		var at []string
		for _, r := range rs {
			at = append(at, r.ack+" at "+s.rel(r.at))
		}
		name := invDuplicateSend
		if p.spec.cap == capKey {
			name = invKeyWindow
		}
		s.fail(name, fmt.Sprintf("the %s provider (%s) took %d messages for %s: %s", p.ch, p.spec, len(rs), lbl, strings.Join(at, ", ")), f.key)
	}
	s.checkLimits(f)
	for _, e := range f.earlier {
		if _, bounced := s.delivered[e.Key]; e.State != ledger.Rejected && !(e.State == ledger.Accepted && bounced) {
			s.fail(invFallback, fmt.Sprintf("%s sent fallback channel %s (attempt %d) while the earlier channel %s was %s",
				f.inv, lbl, f.attempt, s.label(e.Key), e.State), f.key, e.Key)
		}
	}
}

// checkSecrets fails if text holds any secret of the world.
func (s *sim) checkSecrets(where, text string, keys []string) {
	for _, sec := range s.w.secrets {
		if strings.Contains(text, sec) {
			s.fail(invSecret, fmt.Sprintf("%s holds a secret (%d bytes of token, body or address)", where, len(sec)), keys...)
			return
		}
	}
}

// failLiveness reports the messages that did not end after the faults stopped.
func (s *sim) failLiveness() {
	var open []string
	var keys []string
	for _, k := range s.w.keys {
		e, ok := s.peek(k)
		switch {
		case !ok:
			open = append(open, s.label(k)+" (no row)")
		case !e.State.Terminal():
			open = append(open, fmt.Sprintf("%s (%s: %s)", s.label(k), e.State, e.Reason))
		default:
			continue
		}
		keys = append(keys, k)
	}
	for _, t := range s.triggers {
		if t.fn == fnClaim {
			open = append(open, fmt.Sprintf("intent %s %s still queued", t.msg.label, t.msg.kind))
		}
	}
	s.fail(invLiveness, fmt.Sprintf("%d steps and %s after the faults stopped, not ended: %s",
		s.step-s.liveStep, s.now.Sub(s.liveStart), strings.Join(open, "; ")), keys...)
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkEvent judges what one events invocation did.
func (s *sim) checkEvent(f eventFact) {
	ev := f.pev.ev
	if f.pev.forged != "" {
		if f.err == nil {
			s.fail(invForgedEvent, fmt.Sprintf("%s recorded a forged event (%s) for %s: %s", f.inv, f.pev.forged, s.label(ev.Key), f.res.Outcome), ev.Key)
		} else {
			s.stats.Paths[pathForgedRefused]++
		}
		return
	}
	if f.err != nil {
		return
	}
	switch {
	case f.res.Outcome == ledger.OutcomeDuplicate:
		s.stats.Paths[pathDuplicateEvent]++
	case f.res.Outcome == ledger.OutcomeResolved:
		s.stats.Paths[pathResolvedByEvent]++
	case f.before.State == ledger.Dispatching:
		s.stats.Paths[pathEventBeforeOutcome]++
	}
}

// eventSig names a provider event by what the ledger records of it.
func eventSig(key, typ, detail, msgID string, at time.Time) string {
	return key + "|" + typ + "|" + detail + "|" + msgID + "|" + at.UTC().Format(time.RFC3339Nano)
}

// bounced notes the permanent delivery failure the write w recorded on the
// row key (the provider really reported one), and judges the hand-over it
// owes: within the fallback wait (the row still open, or accepted less
// than the wait before), the next channel must never be suppressed.
func (s *sim) bounced(w writeFact, key string) {
	if _, seen := s.delivered[key]; seen {
		return
	}
	before := w.before
	b := bounceFact{at: s.now, inWait: !before.State.Terminal()}
	if before.State == ledger.Accepted {
		for _, h := range before.History {
			if h.To == ledger.Accepted && h.From != ledger.Accepted {
				b.inWait = s.now.Add(skewSlack).Before(h.At.Add(s.w.policy.FallbackWait))
				break
			}
		}
	}
	s.delivered[key] = b
	if next, ok := s.successor(key); ok && b.inWait {
		if e, ok := s.peek(next); ok && e.State == ledger.Suppressed {
			s.fail(invHandOver, fmt.Sprintf("%s recorded a permanent delivery failure of %s within the fallback wait, but %s was already suppressed (%q)",
				w.inv, s.label(key), s.label(next), e.Reason), key, next)
		}
	}
}

// skewSlack covers the workers' clock skews when the simulator compares
// the true clock with a time a worker recorded.
const skewSlack = 2 * time.Second

// successor returns the key of the fallback channel after key's, if any.
func (s *sim) successor(key string) (string, bool) {
	info, ok := s.w.rows[key]
	if !ok || info.challenge.workflow.Kind != ledger.Fallback {
		return "", false
	}
	order := info.challenge.workflow.Order
	for i, ch := range order[:len(order)-1] {
		if ch == info.channel {
			return ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: info.challenge.id, Channel: order[i+1]}.Key(), true
		}
	}
	return "", false
}

// checkHandOver judges a held fallback channel leaving held.
func (s *sim) checkHandOver(w writeFact, key, lbl, by string) {
	info := s.w.rows[key]
	var prev string
	for i, ch := range info.challenge.workflow.Order {
		if ch == info.channel && i > 0 {
			prev = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: info.challenge.id, Channel: info.challenge.workflow.Order[i-1]}.Key()
		}
	}
	if prev == "" {
		return
	}
	p, _ := s.peek(prev)
	switch b, bounced := s.delivered[prev]; {
	case w.after.State == ledger.Suppressed && bounced && b.inWait:
		s.fail(invHandOver, fmt.Sprintf("%s suppressed %s (%q), though the provider's permanent delivery failure of %s was recorded within the fallback wait",
			by, lbl, w.after.Reason, s.label(prev)), key, prev)
	case w.after.State == ledger.Claimed && p.State == ledger.Accepted:
		s.stats.Paths[pathHandOver]++
	}
}

// verify is Entry.Verify for the row a write left, checking only the
// entries it added when the row kept its history as it was (checkWrite
// compares the older entries' hashes, verified when they were written).
func (s *sim) verify(w writeFact) error {
	a, n := w.after, len(w.before.History)
	if !w.existed || n == 0 || n > len(a.History) || a.History[n-1].Hash != w.before.History[n-1].Hash {
		return a.Verify()
	}
	prev := a.History[n-1].Hash
	for i := n; i < len(a.History); i++ {
		ev := a.History[i]
		if ev.Prev != prev {
			return &ledger.ChainError{Key: a.Key, Index: i, Detail: "link does not match previous entry (removed or reordered)"}
		}
		if ledger.EventHash(a.Key, ev) != ev.Hash {
			return &ledger.ChainError{Key: a.Key, Index: i, Detail: "content does not match its hash (edited)"}
		}
		prev = ev.Hash
	}
	if int64(len(a.History)) != a.Version {
		return &ledger.ChainError{Key: a.Key, Index: len(a.History), Detail: fmt.Sprintf("%d entries but the row is at version %d", len(a.History), a.Version)}
	}
	if last := a.Last(); last.To != a.State {
		return &ledger.ChainError{Key: a.Key, Index: len(a.History) - 1, Detail: fmt.Sprintf("it ends in %s but the row is %s", last.To, a.State)}
	}
	return nil
}

// ctxSlack is how far past a bound a call's context may end before
// invCallOutlives fails: more than the millisecond contextDeadline may be
// off by (it measures only calls made within ctxMeasurable of the clock's
// reading), and less than a step (10 ms), the least a deadline measured
// from before a write is late.
const ctxSlack = 5 * time.Millisecond

// checkCallDeadline judges the context a transport call was handed
// (ClassContext): it must end by the send deadline, and a reconcile
// retry's by the lease its retry record granted, by the caller's clock.
func (s *sim) checkCallDeadline(f sendFact, lbl string) {
	if !s.on(ClassContext) || !f.measured {
		return
	}
	deadline := f.expiresAt.Add(-s.w.policy.SendGuard)
	switch {
	case !f.bounded:
		s.fail(invCallOutlives, fmt.Sprintf("%s called the transport for %s (attempt %d) with no deadline in its context; its send deadline is %s (expires_at − guard)",
			f.inv, lbl, f.attempt, s.rel(deadline)), f.key)
	case f.callEnd.After(deadline.Add(ctxSlack)):
		s.fail(invCallOutlives, fmt.Sprintf("%s called the transport for %s (attempt %d) at %s by its clock with a context that ends at %s, %s after its send deadline %s (expires_at − guard %s)",
			f.inv, lbl, f.attempt, s.rel(f.callAt), s.rel(f.callEnd), f.callEnd.Sub(deadline), s.rel(deadline), s.w.policy.SendGuard), f.key)
	case f.fn == fnReconcile && !f.lease.IsZero() && f.callEnd.After(f.lease.Add(ctxSlack)):
		s.fail(invCallOutlives, fmt.Sprintf("%s's same-key retry of %s (attempt %d) has a context that ends at %s by its clock, %s after the next look its retry record wrote (%s)",
			f.inv, lbl, f.attempt, s.rel(f.callEnd), f.callEnd.Sub(f.lease), s.rel(f.lease)), f.key)
	}
}
