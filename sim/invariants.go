package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

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
	// No provider receives a send at or after expires_at (by the true
	// clock), however long the call took to get there: the send deadline
	// (expiry minus Policy.SendGuard) cuts it first.
	invLateArrival = "late-arrival"
	// unknown (and quarantined) is left only with transport evidence (an ack
	// the provider issued for the key, a refusal, a not-sent answer), to
	// quarantined by policy, or by an operator's decision.
	invUnknownExit = "unknown-exit"
	// accepted always carries an ack id the provider issued for the key.
	invAcceptedNoAck = "accepted-without-ack"
	// In a fallback workflow, a later channel is sent only after the
	// earlier one ended rejected: never two channels of one challenge.
	invFallback = "fallback-two-channels"
	// Every stored row's history verifies and only ever grows.
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
)

// Invariants lists the invariants checked after every step.
var Invariants = []string{invDuplicateSend, invKeyWindow, invLateSend, invLateAttempt, invLateArrival, invUnknownExit, invAcceptedNoAck, invFallback,
	invHashChain, invIllegalTransition, invSecret, invLiveness, invQuarantinedUnsent, invPanic}

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
	expiresAt time.Time
	// earlier holds the rows of the earlier fallback channels as they were
	// when the send was made.
	earlier []ledger.Entry
}

type endFact struct {
	inv  *invocation
	line string
	err  error
}

func (s *sim) sendFact(inv *invocation, m ledger.Send, b behavior, res sendResult) sendFact {
	f := sendFact{inv: inv, key: m.IdempotencyKey, attempt: m.Attempt, behavior: b, res: res, at: s.now, expiresAt: m.ExpiresAt}
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
	for _, e := range s.facts.ends {
		s.checkSecrets("log line of "+e.inv.String(), e.line, nil)
		if e.err != nil {
			s.checkSecrets("error of "+e.inv.String(), e.err.Error(), nil)
		}
	}
	s.facts = facts{writes: s.facts.writes[:0], sends: s.facts.sends[:0], ends: s.facts.ends[:0]}
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

func (s *sim) checkWrite(w writeFact) {
	key, a := w.after.Key, w.after
	lbl := s.label(key)
	by := a.Last().Worker
	raw, _ := json.Marshal(a)
	s.checkSecrets("stored row "+lbl, string(raw), []string{key})

	if err := a.Verify(); err != nil {
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
	if (from == ledger.Unknown || from == ledger.Quarantined) && a.State != from {
		ok := false
		switch a.State {
		case ledger.Accepted:
			ok = p.acks[key][a.AckID]
		case ledger.Rejected:
			ok = p.rejected[key] > 0
		case ledger.Deferred:
			ok = p.notSent[key] > 0
		case ledger.Abandoned:
			ok = strings.HasPrefix(by, "operator:")
		case ledger.Quarantined:
			ok = true
		}
		if !ok {
			s.fail(invUnknownExit, fmt.Sprintf("row %s left %s for %s by %s (%q) without that evidence from the provider (acks %v, refusals %d, not-sent answers %d)",
				lbl, from, a.State, by, a.Last().Reason, sortedKeys(p.acks[key]), p.rejected[key], p.notSent[key]), key)
		}
	} else if a.State == ledger.Accepted && from != ledger.Accepted && !p.acks[key][a.AckID] {
		s.fail(invAcceptedNoAck, fmt.Sprintf("row %s recorded accepted by %s with ack %q, which the provider never issued for it (acks %v)",
			lbl, by, a.AckID, sortedKeys(p.acks[key])), key)
	}

	if a.State == ledger.Quarantined && from != ledger.Quarantined {
		switch from {
		case ledger.None, ledger.Held, ledger.Claimed, ledger.Deferred:
			s.fail(invQuarantinedUnsent, fmt.Sprintf("row %s was %s (nothing sent, or every attempt answered not sent) and %s quarantined it: %q",
				lbl, from, by, a.Reason), key)
		}
	}
}

func (s *sim) checkSend(f sendFact) {
	lbl := s.label(f.key)
	s.stats.Sends++
	if f.res.recorded {
		s.stats.Recorded++
	}
	if f.res.reached && !f.at.Before(f.expiresAt) {
		s.stats.LateArrivals++
		s.stats.MaxLateness = max(s.stats.MaxLateness, f.at.Sub(f.expiresAt))
		s.fail(invLateArrival, fmt.Sprintf("%s sent %s (attempt %d) reached the provider at %s, %s after expires_at",
			f.inv, lbl, f.attempt, s.rel(f.at), f.at.Sub(f.expiresAt)), f.key)
	}
	margin := s.w.policy.ExpiryMargin
	if !f.auth.Add(margin).Before(f.expiresAt) {
		s.fail(invLateSend, fmt.Sprintf("%s sent %s (attempt %d) started at %s by its clock; expires_at − margin is %s",
			f.inv, lbl, f.attempt, s.rel(f.auth), s.rel(f.expiresAt.Add(-margin))), f.key)
	}
	p := s.providers[s.w.rows[f.key].channel]
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
	for _, e := range f.earlier {
		if e.State != ledger.Rejected {
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
