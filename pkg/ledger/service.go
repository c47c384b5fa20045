package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"
)

// Service, its policy and the helpers every use case shares.

// Policy holds the tunables of the use cases.
type Policy struct {
	// Version is recorded in every history entry.
	Version string
	// Lease is how long a dispatching row may stay without an outcome
	// before reconcile marks it unknown.
	Lease time.Duration
	// ExpiryMargin is subtracted from a challenge's expiry before any send,
	// to cover clock skew and transport latency.
	ExpiryMargin time.Duration
	// SendGuard bounds every transport call, not only its start: the call
	// runs under a context deadline of the challenge's expiry minus
	// SendGuard, by the worker's clock, and is cut there (its outcome is
	// what the transport makes of a cut call: unknown where the provider
	// may have taken it). It covers the worker's clock skew and the time a
	// request already on its way takes to reach the provider. An attempt
	// with no time left before that deadline is not made (not sent).
	SendGuard time.Duration
	// Retention is how long a row (and its history) is kept after its last
	// write. It becomes the table's TTL.
	Retention time.Duration
	// MaxAttempts bounds transport attempts per row, the first included.
	MaxAttempts int
	// SettlePeriod is how long a lookup-capable transport is given to show a
	// message before "not found" counts as evidence of nothing.
	SettlePeriod time.Duration
	// FallbackWait is how long a held fallback channel stays held after the
	// earlier channel was accepted, waiting for the provider to report its
	// delivery (the held channel is then suppressed) or a permanent delivery
	// failure (it is then claimed). Past it, with no such event, the held
	// channel is suppressed. Zero suppresses it at acceptance.
	FallbackWait time.Duration
	// RecheckAfter is how long reconcile waits between looks at an unknown row.
	RecheckAfter time.Duration
	// RetryBase and RetryMax shape the backoff after a not-sent answer:
	// attempt n waits RetryBase * 2^(n-1), at most RetryMax, with jitter
	// (half of it random), or the provider's Retry-After if that is longer.
	RetryBase, RetryMax time.Duration
	// BudgetWait is the longest dispatch waits in-process for a send-rate
	// budget slot; a later slot defers the row to it instead.
	BudgetWait time.Duration
	// RedriveAfter is how long past due a claimed or deferred row may wait
	// for a dispatch before reconcile hands it back to dispatch.
	RedriveAfter time.Duration
	// MaxChallengeLifetime bounds how far past the claim's time a
	// challenge may expire: an intent whose expires_at lies further out is
	// refused before any row exists. A reset link should not live long,
	// and a far-future challenge would otherwise keep its content, and its
	// place as a subject's newest, that long.
	MaxChallengeLifetime time.Duration
}

// DefaultPolicy returns the policy used when a field is left zero.
func DefaultPolicy() Policy {
	return Policy{
		Version:      "policy-1",
		Lease:        2 * time.Minute,
		ExpiryMargin: 30 * time.Second,
		SendGuard:    5 * time.Second,
		Retention:    400 * 24 * time.Hour,
		MaxAttempts:  3,
		SettlePeriod: 5 * time.Minute,
		FallbackWait: 2 * time.Minute,
		RecheckAfter: time.Minute,
		RetryBase:    2 * time.Second,
		RetryMax:     time.Minute,
		BudgetWait:   2 * time.Second,
		RedriveAfter: 20 * time.Second,

		MaxChallengeLifetime: time.Hour,
	}
}

// PolicyError is one policy field, or one relation between fields, that
// cannot work. Field names the Policy field the error is reported against;
// Related, for a relation, the other field, which Why names.
type PolicyError struct {
	Field, Related string
	Why            string
}

func (e *PolicyError) Error() string { return "ledger: policy " + e.Field + ": " + e.Why }

// Validate reports every policy field, and every relation between fields,
// that cannot work: each as a *PolicyError, joined. It is the one place
// these rules live: the functions' settings and the stack both refuse
// exactly what it refuses, with its message.
func (p Policy) Validate() error {
	var errs []error
	bad := func(ok bool, field, why string) {
		if !ok {
			errs = append(errs, &PolicyError{Field: field, Why: why})
		}
	}
	relation := func(ok bool, field, related, why string) {
		if !ok {
			errs = append(errs, &PolicyError{Field: field, Related: related, Why: why})
		}
	}
	bad(p.Version != "", "Version", "must not be empty (it is recorded in every history entry)")
	bad(p.Lease > 0, "Lease", "must be positive")
	// The worker's clock may be behind the producer's: a margin of zero
	// would let a send start at the very instant the challenge expires.
	bad(p.ExpiryMargin > 0, "ExpiryMargin", "must be positive (it covers the workers' clock skew)")
	bad(p.SendGuard > 0, "SendGuard", "must be positive")
	// A send may start up to the margin before expiry and is cut at the
	// guard: with no time between them, a call that starts late is cut at
	// once and its outcome is unknown for nothing.
	relation(p.SendGuard <= 0 || p.ExpiryMargin > p.SendGuard, "ExpiryMargin", "SendGuard",
		"must exceed SendGuard ("+p.SendGuard.String()+"): a send that starts at the margin has their difference to finish")
	bad(p.Retention > 0, "Retention", "must be positive")
	bad(p.MaxAttempts >= 1, "MaxAttempts", "must be at least 1")
	bad(p.SettlePeriod >= 0, "SettlePeriod", "must not be negative")
	bad(p.RecheckAfter > 0, "RecheckAfter", "must be positive")
	bad(p.RetryBase > 0, "RetryBase", "must be positive")
	relation(p.RetryMax >= p.RetryBase, "RetryMax", "RetryBase", "must be at least RetryBase ("+p.RetryBase.String()+")")
	bad(p.FallbackWait >= 0, "FallbackWait", "must not be negative")
	bad(p.BudgetWait >= 0, "BudgetWait", "must not be negative")
	bad(p.RedriveAfter > 0, "RedriveAfter", "must be positive")
	relation(p.MaxChallengeLifetime > p.ExpiryMargin, "MaxChallengeLifetime", "ExpiryMargin",
		"must exceed ExpiryMargin ("+p.ExpiryMargin.String()+"): a challenge must be sendable for some time")
	return errors.Join(errs...)
}

// Worker identifies who performed a transition: a function invocation
// ("claim/<request id>") or an operator ("operator:<identity>").
type Worker string

// Service runs the use cases over the ports. Its zero value is not usable;
// set Store and Clock at least, and Content, Opener and Transports for the
// dispatch path.
type Service struct {
	Store      Store
	Content    ContentStore
	Opener     Opener
	Transports map[Channel]Transport
	// Budget, if set, paces sends per channel; Scheduler hands deferred
	// and re-driven rows back to dispatch. Both belong to the dispatch
	// path; reconcile needs only the Scheduler.
	Budget    Budget
	Scheduler Scheduler
	// Progress, if set, keeps how far dispatch has read the stream and the
	// dispatch queue (Read), so that Redrive hands back only rows neither
	// can still deliver. Without it every due row is handed back.
	Progress Progress
	// Proofs signs every attempt through a transport that reports events
	// (dispatch) and verifies the proof a provider event carries back
	// (RecordProviderEvent). Without it, such sends are not made and every
	// provider event is refused.
	Proofs Proofs
	// Limits is the send-limit policy; Limiter keeps its counters,
	// Challenges the newest challenge per subject (supersession),
	// Fingerprints the destination keys and NumberOf the SMS regions and
	// number kinds. A
	// limit whose port is missing is not applied: see limitsOn.
	Limits       Limits
	Limiter      Limiter
	Challenges   Challenges
	Fingerprints Fingerprinter
	NumberOf     NumberOf
	// Timeline, if set, lets a refused admission find the subject's older
	// challenges that hold counts while they wait, supersede them and give
	// the counts back (admitReclaiming). Without it they keep their counts
	// until they wake.
	Timeline Timeline
	// Sleep waits for d or until ctx ends; a timer if nil.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1) for backoff jitter; math/rand if nil.
	Jitter func() float64
	Clock  Clock
	Policy Policy
	// NewID returns a unique event id; random 128-bit hex if nil.
	NewID func() string
	// OnTransition, if set, is called once for every stored state change
	// (a new row included), wherever it was made: the one place metrics
	// of transitions are counted.
	OnTransition func(e Entry)
}

func (s *Service) transitioned(from State, e Entry) {
	if s.OnTransition != nil && from != e.State {
		s.OnTransition(e)
	}
}

// Precision is the resolution of every time the ledger records. Millisecond
// timestamps keep rows small (a row is charged write capacity on its whole
// size) and are exact when stored.
const Precision = time.Millisecond

func (s *Service) now() time.Time { return s.Clock().UTC().Truncate(Precision) }

func (s *Service) newID() string {
	if s.NewID != nil {
		return s.NewID()
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// expiredAt reports whether the challenge counts as expired at now: the
// worker's clock, minus the safety margin.
func (s *Service) expiredAt(expires, now time.Time) bool {
	return !now.Add(s.Policy.ExpiryMargin).Before(expires)
}

var timeZero time.Time
