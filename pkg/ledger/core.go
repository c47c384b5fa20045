package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The policy and the write path (Core) every use case holds.

// Policy holds the tunables of the use cases.
type Policy struct {
	// Version is recorded in every history entry.
	Version string
	// Lease is how long a dispatching entry may stay without an outcome
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
	// Retention is how long an entry (and its history) is kept after its last
	// write. It becomes the table's TTL.
	Retention time.Duration
	// MaxAttempts bounds transport attempts per entry, the first included.
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
	// RecheckAfter is how long reconcile waits between looks at an unknown entry.
	RecheckAfter time.Duration
	// RetryBase and RetryMax shape the backoff after a not-sent answer:
	// attempt n waits RetryBase * 2^(n-1), at most RetryMax, with jitter
	// (half of it random), or the provider's Retry-After if that is longer.
	RetryBase, RetryMax time.Duration
	// BudgetWait is the longest dispatch waits in-process for a send-rate
	// budget slot; a later slot defers the entry to it instead.
	BudgetWait time.Duration
	// RedriveAfter is how long past due a claimed or deferred entry may wait
	// for a dispatch before reconcile hands it back to dispatch.
	RedriveAfter time.Duration
	// MaxChallengeLifetime bounds how far past the claim's time a
	// challenge may expire: an intent whose expires_at lies further out is
	// refused before any entry exists. A reset link should not live long,
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
// that cannot work (Problems), joined into one error.
func (p Policy) Validate() error {
	var errs []error
	for _, pe := range p.Problems() {
		errs = append(errs, pe)
	}
	return errors.Join(errs...)
}

// Problems lists every policy field, and every relation between fields,
// that cannot work. It is the one place these rules live: the functions'
// settings and the stack both refuse exactly what it lists, with its
// message.
func (p Policy) Problems() []*PolicyError {
	var out []*PolicyError
	bad := func(ok bool, field, why string) {
		if !ok {
			out = append(out, &PolicyError{Field: field, Why: why})
		}
	}
	relation := func(ok bool, field, related, why string) {
		if !ok {
			out = append(out, &PolicyError{Field: field, Related: related, Why: why})
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
	return out
}

// Worker identifies who performed a transition: a function invocation
// ("claim/<request id>") or an operator ("operator:<identity>").
type Worker string

// Core is what every use case holds: the ledger's tables, clock and
// policy, and the one write path (write.go).
type Core struct {
	store        Store
	content      ContentStore
	clock        Clock
	policy       Policy
	ids          func() string
	onTransition func(e Entry)
	// giveBack gives back the send-limit count of an entry a write ended
	// unsent. Only dispatch, which counts, sets it (admission.Gate.ReleaseUnsent);
	// a row another use case ends keeps its count, too high, never too low
	// (docs/design.md, "Counts are exact").
	giveBack func(ctx context.Context, e Entry) error
}

// Hooks are the core's optional settings.
type Hooks struct {
	// NewID returns a unique event id; random 128-bit hex if nil.
	NewID func() string
	// OnTransition, if set, is called once for every stored state change
	// (a new entry included), wherever it was made: the one place metrics
	// of transitions are counted.
	OnTransition func(e Entry)
}

// NewCore checks and keeps what every use case needs: the ledger's tables,
// the worker's clock and a valid policy. role names the use case in its
// errors.
func NewCore(role string, store Store, content ContentStore, clock Clock, policy Policy, h Hooks) (Core, error) {
	need := PortCheck{UseCase: role}
	need.Port(store != nil, "Store")
	need.Port(content != nil, "Content")
	need.Port(clock != nil, "Clock")
	if err := need.Err(); err != nil {
		return Core{}, err
	}
	if err := policy.Validate(); err != nil {
		return Core{}, fmt.Errorf("ledger: %s: %w", role, err)
	}
	c := Core{store: store, content: content, clock: clock, policy: policy, ids: h.NewID, onTransition: h.OnTransition}
	if c.ids == nil {
		c.ids = randomID
	}
	return c, nil
}

// Store is the ledger's table.
func (s *Core) Store() Store { return s.store }

// Content is the store of sealed content.
func (s *Core) Content() ContentStore { return s.content }

// Policy is the use cases' tunables.
func (s *Core) Policy() Policy { return s.policy }

// Clock reads the worker's clock, unrounded (Now rounds it).
func (s *Core) Clock() time.Time { return s.clock() }

// WithContent returns a copy of s that reads and purges content through c
// (dispatch's first reads, primed).
func (s Core) WithContent(c ContentStore) Core {
	s.content = c
	return s
}

// WithGiveBack returns a copy of s whose writes that end an entry unsent
// give its send-limit count back through f. Only dispatch, which counts,
// sets it; a row another use case ends keeps its count, too high, never
// too low (docs/design.md, "Counts are exact").
func (s Core) WithGiveBack(f func(ctx context.Context, e Entry) error) Core {
	s.giveBack = f
	return s
}

// MissingPortError is a use case built without a port it needs.
type MissingPortError struct {
	UseCase string
	Ports   []string
}

func (e *MissingPortError) Error() string {
	return "ledger: " + e.UseCase + ": missing port " + strings.Join(e.Ports, ", missing port ")
}

// PortCheck gathers the ports a constructor finds missing.
type PortCheck struct {
	UseCase string
	missing []string
}

// Port notes Port as missing unless ok.
func (c *PortCheck) Port(ok bool, port string) {
	if !ok {
		c.missing = append(c.missing, port)
	}
}

// Err is a *MissingPortError naming every missing port, or nil.
func (c *PortCheck) Err() error {
	if len(c.missing) == 0 {
		return nil
	}
	return &MissingPortError{UseCase: c.UseCase, Ports: c.missing}
}

func (s *Core) Transitioned(from State, e Entry) {
	if s.onTransition != nil && from != e.State {
		s.onTransition(e)
	}
}

// Precision is the resolution of every time the ledger records. Millisecond
// timestamps keep entries small (an entry is charged write capacity on its whole
// size) and are exact when stored.
const Precision = time.Millisecond

func (s *Core) Now() time.Time { return s.clock().UTC().Truncate(Precision) }

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ExpiredAt reports whether the challenge counts as expired at now: the
// worker's clock, minus the safety margin.
func (s *Core) ExpiredAt(expires, now time.Time) bool {
	return !now.Add(s.policy.ExpiryMargin).Before(expires)
}

var timeZero time.Time
