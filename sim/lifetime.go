package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Lifetimes at their bound (ClassLifetime): challenges issued long before
// their claim, expiring up to MAX_CHALLENGE_LIFETIME after it, and
// version-1 intents. The claim's rule (docs/design.md, "No challenge
// outlives its purpose"), by the claim's own clock: it refuses, with no
// row, an expires_at more than MAX_CHALLENGE_LIFETIME past its clock, and
// an issued_at past its clock by more than the expiry margin (the skew
// between the producer's clock and the worker's that the margin covers,
// DESIGN 4); it claims every other intent, however long before it was
// issued, and records the sealed issued_at (a version-1 intent, which has
// none, the claim's own time).

// invLifetime is the name of a violation of the claim's lifetime rule.
const invLifetime = "lifetime-bound"

// refusesIntent says whether the claim's rule refuses in at clock, and why.
func (s *sim) refusesIntent(in ledger.Intent, clock time.Time) (string, bool) {
	p := s.w.policy
	now := clock.UTC().Truncate(ledger.Precision)
	switch {
	case in.ExpiresAt.Truncate(ledger.Precision).After(now.Add(p.MaxChallengeLifetime)):
		return fmt.Sprintf("expires_at %s is more than %s past the claim's clock %s", s.rel(in.ExpiresAt), p.MaxChallengeLifetime, s.rel(now)), true
	case in.IssuedAt.Truncate(ledger.Precision).After(now.Add(p.ExpiryMargin)):
		return fmt.Sprintf("issued_at %s is more than the margin %s past the claim's clock %s", s.rel(in.IssuedAt), p.ExpiryMargin, s.rel(now)), true
	}
	return "", false
}

// claimRefused handles a claim that refused its intent as invalid: the
// claim function dead-letters it (no row, no retry), and the refusal must
// be the rule's.
func (s *sim) claimRefused(inv *invocation, err error) bool {
	if inv.fn != fnClaim || !errors.Is(err, ledger.ErrInvalidIntent) {
		return false
	}
	m := inv.trig.msg
	s.consumed[m.id] = true
	s.deadLettered[m.intent.Key()] = true
	s.note(inv, "intent dead-lettered", m.intent.Key(), m.label+" "+m.kind)
	if !s.on(ClassLifetime) {
		return true
	}
	if _, ok := s.refusesIntent(m.intent, inv.firstClock); ok {
		s.stats.Paths[pathIntentRefused]++
	} else {
		s.fail(invLifetime, fmt.Sprintf("%s refused intent %s (%s; issued_at %s, expires_at %s) at %s by its clock, which its rule claims: %v",
			inv, m.label, m.kind, s.relOrNone(m.intent.IssuedAt), s.rel(m.intent.ExpiresAt), s.rel(inv.firstClock), err), m.intent.Key())
	}
	return true
}

// checkClaimed judges the row a claim created: the rule admits its intent
// at the claim's clock, and the row holds the sealed issued_at, or the
// claim's own time for a version-1 intent.
func (s *sim) checkClaimed(w writeFact) {
	inv := w.inv
	if w.existed || inv.fn != fnClaim || !s.on(ClassLifetime) {
		return
	}
	in := inv.trig.msg.intent
	if in.Key() != w.after.Key {
		return
	}
	if why, refused := s.refusesIntent(in, inv.firstClock); refused {
		s.fail(invLifetime, fmt.Sprintf("%s claimed %s though its rule refuses it: %s", inv, s.label(in.Key()), why), in.Key())
		return
	}
	want := in.IssuedAt
	if want.IsZero() {
		want = inv.firstClock
	}
	want = want.UTC().Truncate(ledger.Precision)
	if !w.after.IssuedAt.Equal(want) {
		what := "the sealed issued_at"
		if in.IssuedAt.IsZero() {
			what = "its clock at the claim (a version-1 intent has none)"
		}
		s.fail(invLifetime, fmt.Sprintf("%s claimed %s with issued_at %s; want %s, %s", inv, s.label(in.Key()), s.rel(w.after.IssuedAt), s.rel(want), what), in.Key())
	}
	if in.IssuedAt.IsZero() {
		s.stats.Paths[pathV1Claimed]++
	}
	if age := s.w.rows[in.Key()].challenge.age; age > 0 {
		s.stats.Paths[pathOldIntent]++
	}
}

// markOf is challenge ch as supersession orders it on channel chn: by its
// sealed issue time, or, for a version-1 intent, by the claim's time its
// row recorded (checkClaimed judged it against the claim's clock).
func (s *sim) markOf(ch *challenge, chn ledger.Channel) ledger.Challenge {
	m := ch.mark()
	if ch.v1 {
		if e, ok := s.peek(ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: ch.id, Channel: chn}.Key()); ok {
			m.IssuedAt = e.IssuedAt
		}
	}
	return m
}

// unordered reports whether a and b cannot be ordered on chn: one is a
// version-1 challenge, and their issue times lie within the workers' clock
// skew of each other. A version-1 challenge counts as issued at its claim,
// by the claiming worker's clock; two claims of it racing (an intent and
// its redelivery) note it at their own times, which differ by up to the
// skew, and the row keeps the winner's. The world does not judge such a
// pair.
func (s *sim) unordered(a, b *challenge, chn ledger.Channel) bool {
	if !a.v1 && !b.v1 {
		return false
	}
	d := s.markOf(a, chn).IssuedAt.Sub(s.markOf(b, chn).IssuedAt)
	return d <= skewSlack && d >= -skewSlack
}

func (s *sim) relOrNone(t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return s.rel(t)
}
