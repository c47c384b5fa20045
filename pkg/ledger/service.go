package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

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
	// Retention is how long a row (and its history) is kept after its last
	// write. It becomes the table's TTL.
	Retention time.Duration
	// MaxAttempts bounds transport attempts per row, the first included.
	MaxAttempts int
	// SettlePeriod is how long a lookup-capable transport is given to show a
	// message before "not found" counts as evidence of nothing.
	SettlePeriod time.Duration
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
}

// DefaultPolicy returns the policy used when a field is left zero.
func DefaultPolicy() Policy {
	return Policy{
		Version:      "policy-1",
		Lease:        2 * time.Minute,
		ExpiryMargin: 30 * time.Second,
		Retention:    400 * 24 * time.Hour,
		MaxAttempts:  3,
		SettlePeriod: 5 * time.Minute,
		RecheckAfter: time.Minute,
		RetryBase:    2 * time.Second,
		RetryMax:     time.Minute,
		BudgetWait:   2 * time.Second,
		RedriveAfter: 20 * time.Second,
	}
}

// Validate reports a policy field that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.Version == "":
		return errors.New("ledger: policy version is empty")
	case p.Lease <= 0:
		return errors.New("ledger: lease must be positive")
	case p.ExpiryMargin < 0:
		return errors.New("ledger: expiry margin must not be negative")
	case p.Retention <= 0:
		return errors.New("ledger: retention must be positive")
	case p.MaxAttempts < 1:
		return errors.New("ledger: max attempts must be at least 1")
	case p.RecheckAfter <= 0:
		return errors.New("ledger: recheck interval must be positive")
	case p.RetryBase <= 0 || p.RetryMax < p.RetryBase:
		return errors.New("ledger: retry backoff base must be positive and at most the maximum")
	case p.BudgetWait < 0:
		return errors.New("ledger: budget wait must not be negative")
	case p.RedriveAfter <= 0:
		return errors.New("ledger: re-drive delay must be positive")
	}
	return nil
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

// transition builds the compare-and-set change that moves e to state to,
// after the mutations in mut, and appends the history event.
func (s *Service) transition(e Entry, to State, w Worker, reason string, mut func(*Entry)) (Change, error) {
	if err := CanTransition(e.State, to); err != nil {
		return Change{}, err
	}
	return s.record(e, KindTransition, to, w, reason, mut), nil
}

// record builds a change that appends an event of kind k and moves the row to
// state to (which may equal its current state for non-transition events).
func (s *Service) record(e Entry, k EventKind, to State, w Worker, reason string, mut func(*Entry)) Change {
	now := s.now()
	next := e
	next.History = append([]Event(nil), e.History...)
	next.State = to
	next.Version = e.Version + 1
	next.UpdatedAt = now
	next.RetainUntil = now.Add(s.Policy.Retention)
	if mut != nil {
		mut(&next)
	}
	ev := Event{
		ID: s.newID(), Kind: k, From: e.State, To: to, At: now, Worker: string(w), Reason: reason,
		PolicyVersion: s.Policy.Version, Attempt: next.Attempts, AckID: next.AckID, ContentHash: next.ContentHash,
	}
	ev = chain(e.Key, e.Last().Hash, ev)
	next.History = append(next.History, ev)
	return Change{From: e.State, Version: e.Version, Next: next, Event: ev}
}

// expiredAt reports whether the challenge counts as expired at now: the
// worker's clock, minus the safety margin.
func (s *Service) expiredAt(expires, now time.Time) bool {
	return !now.Add(s.Policy.ExpiryMargin).Before(expires)
}

// ClaimOutcome says what Claim did.
type ClaimOutcome string

// Claim outcomes.
const (
	ClaimCreated    ClaimOutcome = "claimed"    // new row, claimed
	ClaimExpired    ClaimOutcome = "expired"    // new row, recorded expired: intent arrived too late
	ClaimSuppressed ClaimOutcome = "suppressed" // new row, recorded suppressed: fallback not needed
	ClaimHeld       ClaimOutcome = "held"       // new row, held until the earlier fallback channel ends
	ClaimDuplicate  ClaimOutcome = "duplicate"  // row existed with the same content: no-op
	ClaimMismatch   ClaimOutcome = "mismatch"   // row existed with other content: blocked and recorded
)

// ClaimResult is the row after Claim and what happened.
type ClaimResult struct {
	Outcome ClaimOutcome
	Entry   Entry
}

// Claim records intent in as one logical message, before any side effect.
// sealed is the sealed message; it is stored in the content store (never in
// the ledger) when the claim is new and live. A fallback channel whose
// earlier channel has not ended is recorded held. It returns an error
// wrapping ErrInvalidIntent (nothing written) or a store error.
func (s *Service) Claim(ctx context.Context, in Intent, sealed []byte, w Worker) (ClaimResult, error) {
	if err := in.Validate(); err != nil {
		return ClaimResult{}, err
	}
	if len(sealed) == 0 {
		return ClaimResult{}, fieldErr("sealed_content", "missing")
	}
	now := s.now()
	key := in.Key()
	row := Entry{
		Key: key, Identity: in.Identity, Workflow: in.Workflow, ContentHash: in.ContentHash,
		DestinationRef: in.DestinationRef, TemplateID: in.TemplateID, TemplateVersion: in.TemplateVersion,
		PolicyVersion: in.PolicyVersion, ExpiresAt: in.ExpiresAt.UTC().Truncate(Precision), CreatedAt: now,
	}

	// An existing identity wins over everything else: redeliveries are
	// no-ops whatever the clock says now.
	existing, err := s.Store.Get(ctx, key)
	switch {
	case err == nil:
		return s.existing(ctx, existing, in, w)
	case !errors.Is(err, ErrNotFound):
		return ClaimResult{}, fmt.Errorf("claim %s: %w", key, err)
	}

	to, reason := Claimed, "intent claimed"
	if s.expiredAt(row.ExpiresAt, now) {
		to, reason = Expired, "challenge already expired when the intent arrived"
	} else if prev, ok := in.Workflow.neighbor(in.Channel, -1); ok {
		to, reason, err = s.fallbackGate(ctx, in, prev)
		if err != nil {
			return ClaimResult{}, err
		}
	}
	c, err := s.transition(row, to, w, reason, func(e *Entry) { e.Reason = reason })
	if err != nil {
		return ClaimResult{}, err
	}

	wrote := false
	if to == Claimed || to == Held {
		// Content first: the stream record of the claim triggers dispatch,
		// which must find the content. An existing blob is left alone.
		if wrote, err = s.Content.Put(ctx, contentKey(key, in.ContentHash), sealed, row.ExpiresAt); err != nil {
			return ClaimResult{}, fmt.Errorf("claim %s: store content: %w", key, err)
		}
	}
	out := map[State]ClaimOutcome{Claimed: ClaimCreated, Held: ClaimHeld, Expired: ClaimExpired, Suppressed: ClaimSuppressed}[to]
	created, err := s.Store.Create(ctx, c.Next)
	if err != nil && !errors.Is(err, ErrConflict) {
		// The create may have landed before the failure was reported.
		if fresh, gerr := s.Store.Get(ctx, key); gerr == nil && fresh.Holds(c.Event.ID) {
			created, err = fresh, nil
		}
	}
	if errors.Is(err, ErrConflict) && created.Holds(c.Event.ID) {
		// Our own create landed; its response was lost and the request retried.
		err = nil
	}
	if errors.Is(err, ErrConflict) {
		// Lost a race with a concurrent claim of the same identity. Content
		// we stored that the winning row will never read is purged now.
		if wrote && (created.ContentHash != in.ContentHash || created.State.Terminal() || created.State == Quarantined) {
			_ = s.Content.Delete(ctx, contentKey(key, in.ContentHash))
		}
		return s.existing(ctx, created, in, w)
	}
	if err != nil {
		return ClaimResult{}, fmt.Errorf("claim %s: %w", key, err)
	}
	s.transitioned(None, created)
	return ClaimResult{Outcome: out, Entry: created}, nil
}

// fallbackGate decides the first state of a fallback channel whose
// predecessor is prev. The predecessor's terminal state is immutable, so
// reading it is safe.
func (s *Service) fallbackGate(ctx context.Context, in Intent, prev Channel) (State, string, error) {
	pid := in.Identity
	pid.Channel = prev
	p, err := s.Store.Get(ctx, pid.Key())
	if err != nil && !errors.Is(err, ErrNotFound) {
		return None, "", fmt.Errorf("claim %s: read fallback predecessor: %w", in.Key(), err)
	}
	to, reason := heldNext(p.State, prev)
	return to, reason, nil
}

// heldNext is the one fallback rule: given the state of the earlier channel
// prev (None if it has no claim yet), the next channel is claimed if prev
// ended rejected, suppressed if it ended otherwise, and held while it is
// open or unclaimed.
func heldNext(p State, prev Channel) (State, string) {
	switch {
	case p == Rejected:
		return Claimed, fmt.Sprintf("fallback: %s ended rejected", prev)
	case p.Terminal():
		return Suppressed, fmt.Sprintf("fallback not needed: %s ended %s", prev, p)
	case p == None:
		return Held, fmt.Sprintf("fallback: held until %s ends (not claimed yet)", prev)
	default:
		return Held, fmt.Sprintf("fallback: held until %s ends (now %s)", prev, p)
	}
}

// settleSuccessor moves the held fallback channel after e, if any, now that
// e has ended. It is best effort; the expire sweep settles whatever it
// misses.
func (s *Service) settleSuccessor(ctx context.Context, e Entry, w Worker) {
	next, ok := e.Workflow.neighbor(e.Identity.Channel, +1)
	if !ok || !e.State.Terminal() {
		return
	}
	id := e.Identity
	id.Channel = next
	if h, err := s.Store.Get(ctx, id.Key()); err == nil && h.State == Held {
		_, _ = s.settleHeld(ctx, h, e.State, w)
	}
}

// settleHeld moves the held row h given the state p of its predecessor:
// expired if its challenge expired, else as heldNext says. It reports the
// new state; Held means nothing was written.
func (s *Service) settleHeld(ctx context.Context, h Entry, p State, w Worker) (State, error) {
	prev, _ := h.Workflow.neighbor(h.Identity.Channel, -1)
	to, reason := heldNext(p, prev)
	if s.expiredAt(h.ExpiresAt, s.now()) {
		to, reason = Expired, "challenge expired while held for the earlier fallback channel"
	}
	if to == Held {
		return Held, nil
	}
	c, err := s.transition(h, to, w, reason, func(n *Entry) { n.Reason = reason })
	if err != nil {
		return Held, err
	}
	if _, err := s.apply(ctx, c, ""); err != nil {
		return Held, err
	}
	return to, nil
}

// existing handles an intent whose identity already has a row.
func (s *Service) existing(ctx context.Context, e Entry, in Intent, w Worker) (ClaimResult, error) {
	for attempt := 0; attempt < maxRaces; attempt++ {
		if e.ContentHash == in.ContentHash {
			return ClaimResult{Outcome: ClaimDuplicate, Entry: e}, nil
		}
		reason := "content hash " + in.ContentHash + " differs from recorded " + e.ContentHash + "; blocked"
		c := s.record(e, KindContentMismatch, e.State, w, reason, func(n *Entry) { n.Mismatches++ })
		// The event records the offered hash; the row keeps its own.
		c.Event.ContentHash = in.ContentHash
		c.Event = chain(e.Key, e.Last().Hash, c.Event)
		c.Next.History[len(c.Next.History)-1] = c.Event
		got, err := s.write(ctx, c)
		if err == nil {
			return ClaimResult{Outcome: ClaimMismatch, Entry: got}, nil
		}
		if !errors.Is(err, ErrConflict) {
			return ClaimResult{}, fmt.Errorf("claim %s: record mismatch: %w", e.Key, err)
		}
		if e, err = s.Store.Get(ctx, e.Key); err != nil {
			return ClaimResult{}, fmt.Errorf("claim %s: %w", in.Key(), err)
		}
	}
	return ClaimResult{}, fmt.Errorf("claim %s: record mismatch: %w", e.Key, ErrConflict)
}
