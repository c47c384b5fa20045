// Package claim claims each intent as one logical message, before any side
// effect (functions/claim).
package claim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Result is the entry after Claim and what happened.
type Result struct {
	Outcome ledger.Outcome
	Entry   ledger.Entry
}

// Claim records intent in as one logical message, before any side effect.
// sealed is the sealed message; it is stored in the content store (never in
// the ledger) when the claim is new and live. A fallback channel whose
// earlier channel has not ended is recorded held. It returns an error
// wrapping ErrInvalidIntent (nothing written) or a store error.
func (cl *Claimer) Claim(ctx context.Context, in ledger.Intent, sealed []byte, w ledger.Worker) (Result, error) {
	if err := in.Validate(); err != nil {
		return Result{}, err
	}
	if len(sealed) == 0 {
		return Result{}, ledger.FieldErr("sealed_content", "missing")
	}
	now := cl.core.Now()
	if err := cl.checkLifetime(in, now); err != nil {
		return Result{}, err
	}
	key := in.Key()
	issued, found, err := cl.issuedAt(ctx, in, now)
	if err != nil {
		return Result{}, err
	}
	if found != nil {
		return cl.existing(ctx, *found, in, w)
	}
	row := ledger.Entry{
		Key: key, Identity: in.Identity, Workflow: in.Workflow, ContentHash: in.ContentHash,
		DestinationRef: in.DestinationRef, SubjectRef: in.SubjectRef, TemplateID: in.TemplateID, TemplateVersion: in.TemplateVersion,
		PolicyVersion: in.PolicyVersion, IssuedAt: issued.UTC().Truncate(ledger.Precision),
		ExpiresAt: in.ExpiresAt.UTC().Truncate(ledger.Precision), CreatedAt: now,
	}

	// No read first: the conditional create finds an existing identity, and
	// an existing identity wins over everything else (redeliveries are
	// no-ops whatever the clock says now). A first claim, by far the most
	// common, then costs one request less; a redelivery costs the writes
	// that fail their conditions instead of a read.
	to, reason := ledger.Expired, "challenge already expired when the intent arrived"
	if !cl.core.ExpiredAt(row.ExpiresAt, now) {
		var err error
		if to, reason, err = cl.core.FallbackGate(ctx, in); err != nil {
			return Result{}, err
		}
	}
	c, err := cl.core.Transition(row, to, w, reason, func(e *ledger.Entry) { e.Reason = reason })
	if err != nil {
		return Result{}, err
	}

	wrote := false
	if to == ledger.Claimed || to == ledger.Held {
		if err := cl.noteChallenge(ctx, row); err != nil {
			return Result{}, err
		}
		// Content first: the stream record of the claim triggers dispatch,
		// which must find the content. An existing blob is left alone.
		if wrote, err = cl.core.Content().Put(ctx, ledger.ContentKeyFor(key, in.ContentHash), sealed, row.ExpiresAt); err != nil {
			return Result{}, fmt.Errorf("claim %s: store content: %w", key, err)
		}
	}
	out := map[ledger.State]ledger.Outcome{ledger.Claimed: ledger.OutcomeClaimed, ledger.Held: ledger.OutcomeHeld, ledger.Expired: ledger.OutcomeExpired, ledger.Suppressed: ledger.OutcomeSuppressed}[to]
	created, err := cl.core.Store().Create(ctx, c.Next)
	if err != nil && !errors.Is(err, ledger.ErrConflict) {
		// The create may have landed before the failure was reported.
		if fresh, gerr := cl.core.Store().Get(ctx, key); gerr == nil && fresh.Holds(c.Event.ID) {
			created, err = fresh, nil
		}
	}
	if errors.Is(err, ledger.ErrConflict) && created.Holds(c.Event.ID) {
		// Our own create landed; its response was lost and the request retried.
		err = nil
	}
	if errors.Is(err, ledger.ErrConflict) {
		// Lost a race with a concurrent claim of the same identity. Content
		// we stored that the winning entry will never read is purged now.
		if wrote && (created.ContentHash != in.ContentHash || created.State.Terminal() || created.State == ledger.Quarantined) {
			_ = cl.core.Content().Delete(ctx, ledger.ContentKeyFor(key, in.ContentHash))
		}
		return cl.existing(ctx, created, in, w)
	}
	if err != nil {
		return Result{}, fmt.Errorf("claim %s: %w", key, err)
	}
	cl.core.Transitioned(ledger.None, created)
	return Result{Outcome: out, Entry: created}, nil
}

// issuedAt is when in's challenge was issued: as sealed, or for a
// version-1 intent (no issued_at) the first claim's time, now. A version-1
// redelivery must not note the challenge as its subject's newest at its
// own, later time (it would supersede every challenge issued since): it
// reads the row first, and returns it as found.
func (cl *Claimer) issuedAt(ctx context.Context, in ledger.Intent, now time.Time) (time.Time, *ledger.Entry, error) {
	if !in.IssuedAt.IsZero() {
		return in.IssuedAt, nil, nil
	}
	e, err := cl.core.Store().Get(ctx, in.Key())
	switch {
	case err == nil:
		return time.Time{}, &e, nil
	case errors.Is(err, ledger.ErrNotFound):
		return now, nil, nil
	}
	return time.Time{}, nil, fmt.Errorf("claim %s: %w", in.Key(), err)
}

// existing handles an intent whose identity already has an entry.
func (cl *Claimer) existing(ctx context.Context, e ledger.Entry, in ledger.Intent, w ledger.Worker) (Result, error) {
	var res Result
	err := cl.core.OnConflict(ctx, e, func(e ledger.Entry) error {
		if e.ContentHash == in.ContentHash {
			res = Result{Outcome: ledger.OutcomeDuplicate, Entry: e}
			return nil
		}
		reason := "content hash " + in.ContentHash + " differs from recorded " + e.ContentHash + "; blocked"
		c := cl.core.Record(e, ledger.KindContentMismatch, e.State, w, reason, func(n *ledger.Entry) { n.Mismatches++ })
		// The event records the offered hash; the entry keeps its own.
		c.Event.ContentHash = in.ContentHash
		c.Event = ledger.Chain(e.Key, e.Last().Hash, c.Event)
		c.Next.History[len(c.Next.History)-1] = c.Event
		got, err := cl.core.Write(ctx, c)
		res = Result{Outcome: ledger.OutcomeMismatch, Entry: got}
		return err
	}, func(ledger.Entry) bool { return true })
	if err != nil {
		return Result{}, fmt.Errorf("claim %s: record mismatch: %w", e.Key, err)
	}
	return res, nil
}

// checkLifetime refuses, before any entry exists, an intent whose challenge
// would outlive Policy.MaxChallengeLifetime past the claim's time now, or
// that says it was issued after now by more than Policy.ExpiryMargin (the
// skew between the producer's clock and this one, which the margin covers:
// a fresh intent from a producer whose clock runs a second ahead is
// claimed). Either is a producer's bug or a forgery: an entry would let it
// shadow the subject's later challenges (and keep its content) for as long
// as it claims to live. A refused intent is an invalid one: the claim
// function dead-letters it with this reason.
func (cl *Claimer) checkLifetime(in ledger.Intent, now time.Time) error {
	if limit := cl.core.Policy().MaxChallengeLifetime; limit > 0 && in.ExpiresAt.Truncate(ledger.Precision).After(now.Add(limit)) {
		return ledger.FieldErr("expires_at", fmt.Sprintf("more than %s after the claim's time (the maximum challenge lifetime)", limit))
	}
	if in.IssuedAt.Truncate(ledger.Precision).After(now.Add(cl.core.Policy().ExpiryMargin)) {
		return ledger.FieldErr("issued_at", fmt.Sprintf("later than the claim's time by more than the expiry margin (%s)", cl.core.Policy().ExpiryMargin))
	}
	return nil
}

// noteChallenge records a claimed entry's challenge as its subject's newest,
// before the entry exists: once a newer entry can be sent, older ones see it.
func (cl *Claimer) noteChallenge(ctx context.Context, e ledger.Entry) error {
	if !cl.supersede || e.SubjectRef == "" {
		return nil
	}
	if err := cl.challenges.Note(ctx, ledger.StreamOf(e), ledger.ChallengeOf(e)); err != nil {
		return fmt.Errorf("claim %s: note newest challenge: %w", e.Key, err)
	}
	return nil
}

// Claimer claims intents (functions/claim).
type Claimer struct {
	core       ledger.Core
	supersede  bool // older challenges are superseded: note each as its subject's newest
	challenges ledger.Challenges
}

// New builds the claim use case. When the send limits supersede older
// challenges (supersede), each claimed challenge is noted in newest as
// its subject's newest, and newest must be given.
func New(core ledger.Core, supersede bool, newest ledger.Challenges) (*Claimer, error) {
	if supersede && newest == nil {
		return nil, &ledger.MissingPortError{UseCase: "claim", Ports: []string{"Challenges (the limits supersede older challenges)"}}
	}
	return &Claimer{core: core, supersede: supersede, challenges: newest}, nil
}
