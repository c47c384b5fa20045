// Package evidence records provider events as evidence on their entries
// (functions/events).
package evidence

import (
	"context"
	"fmt"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// RecordProviderEvent appends the provider event p to its entry's history, as
// an entry of its own kind, whatever the entry's state: evidence is kept even
// when it arrives out of order, or before the outcome write of the send it
// reports (a dispatch that then records its outcome re-reads the entry and
// records it after the event). Every provider event shows that the provider
// took the request, so an unknown, quarantined or deferred entry is resolved
// to accepted with the event as its evidence. On an entry that ended accepted,
// a delivery or a permanent failure settles a held fallback channel at once.
//
// Only an event that proves it answers an attempt this system made counts:
// its attempt proof must verify (s.proofs) before the entry is read, and the
// attempt it names must be one the entry has made. Anyone who can put a
// message on the events route can write an event carrying a dedupe key (a
// key is the hash of a challenge id); no one but the senders can sign one.
//
// It fails with ErrInvalidProviderEvent, ErrUnproven, ErrNotFound (no entry for
// the key) or ErrEventChannel; a repeated event is OutcomeDuplicate, not an
// error.
func (r *Recorder) RecordProviderEvent(ctx context.Context, p ledger.ProviderEvent, w ledger.Worker) (ledger.EventResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.EventResult{}, err
	}
	if err := r.verifyAttempt(ctx, p); err != nil {
		return ledger.EventResult{}, fmt.Errorf("provider event for %s: %w", p.Key, err)
	}
	e, err := r.core.Store().Get(ctx, p.Key)
	if err != nil {
		return ledger.EventResult{}, fmt.Errorf("provider event for %s: %w", p.Key, err)
	}
	if e.Identity.Channel != p.Channel {
		return ledger.EventResult{}, fmt.Errorf("provider event for %s: %s event, %s row: %w", p.Key, p.Channel, e.Identity.Channel, ledger.ErrEventChannel)
	}
	if p.Attempt > e.Attempts {
		return ledger.EventResult{}, fmt.Errorf("provider event for %s: names attempt %d, the row made %d: %w", p.Key, p.Attempt, e.Attempts, ledger.ErrUnproven)
	}
	var res ledger.EventResult
	err = r.core.OnConflict(ctx, e, func(e ledger.Entry) (err error) {
		res, err = r.recordEvent(ctx, e, p, w)
		return err
	}, func(ledger.Entry) bool { return true })
	return res, err
}

// verifyAttempt checks p's attempt proof (NewRecorder refuses to
// build without a verifier).
func (r *Recorder) verifyAttempt(ctx context.Context, p ledger.ProviderEvent) error {
	switch {
	case p.Attempt < 1:
		return fmt.Errorf("the event names no attempt: %w", ledger.ErrUnproven)
	case p.Proof == "":
		return fmt.Errorf("the event carries no attempt proof: %w", ledger.ErrUnproven)
	}
	return r.proofs.Verify(ctx, p.AttemptRef(), p.Proof)
}

func (r *Recorder) recordEvent(ctx context.Context, e ledger.Entry, p ledger.ProviderEvent, w ledger.Worker) (ledger.EventResult, error) {
	if e.Holds(p.ID()) {
		return ledger.EventResult{Outcome: ledger.OutcomeDuplicate, Entry: e}, nil
	}
	switch e.State {
	case ledger.Unknown, ledger.Quarantined, ledger.Deferred:
		reason := fmt.Sprintf("provider event %s (message %s) is transport evidence that the message was accepted; resolved without an operator", p.Type, p.MessageID)
		c, err := r.core.Decision(e, ledger.Accepted, w, reason, p.MessageID)
		if err != nil {
			return ledger.EventResult{}, err
		}
		c.Amend(e.Key, p)
		res, err := r.core.Apply(ctx, c, "")
		return ledger.EventResult{Outcome: ledger.OutcomeResolved, Entry: res.Entry}, err
	}
	c := r.core.Record(e, p.Kind, e.State, w, describeEvent(p), nil)
	c.Amend(e.Key, p)
	n, err := r.core.Write(ctx, c)
	if err != nil {
		return ledger.EventResult{}, fmt.Errorf("provider event for %s: %w", e.Key, err)
	}
	if n.State == ledger.Accepted && (p.Permanent || p.Kind == ledger.KindDelivered) {
		r.core.SettleSuccessor(ctx, n, w)
	}
	return ledger.EventResult{Outcome: ledger.OutcomeRecorded, Entry: n}, nil
}

func describeEvent(p ledger.ProviderEvent) string {
	what := "provider reported " + p.Type
	if p.Detail != "" {
		what += " (" + p.Detail + ")"
	}
	if p.Permanent {
		what += ": permanent delivery failure"
	}
	return what
}

// Recorder records provider events (functions/events).
type Recorder struct {
	core   ledger.Core
	proofs ledger.Proofs
}

// New builds the provider-events use case: the Core and the attempt
// proofs every event's proof must verify under.
func New(core ledger.Core, proofs ledger.Proofs) (*Recorder, error) {
	if proofs == nil {
		return nil, &ledger.MissingPortError{UseCase: "events", Ports: []string{"Proofs"}}
	}
	return &Recorder{core: core, proofs: proofs}, nil
}
