// Package resolve records operators' decisions on unknown and quarantined
// entries (functions/operate).
package resolve

import (
	"context"
	"fmt"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Resolve records an operator's decision on an unknown or quarantined entry.
// evidence is the transport's acknowledgement or reference; a decision of
// accepted or rejected without it fails with ErrNoEvidence.
func (r *Resolver) Resolve(ctx context.Context, key string, d ledger.Decision, reason, evidence string, w ledger.Worker) (ledger.Entry, error) {
	if reason == "" {
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, &ledger.FieldError{Field: "reason", Reason: "missing"})
	}
	// Operator text lands in the evidence trail: keep addresses and phone
	// numbers out of it, as everywhere else.
	if err := ledger.CheckFreeText("reason", reason, true); err != nil {
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	// Provider ids are long and digit-heavy; only addresses are refused there.
	if err := ledger.CheckFreeText("evidence", evidence, false); err != nil {
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	e, err := r.core.Store().Get(ctx, key)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, err)
	}
	var to ledger.State
	switch d {
	case ledger.DecideAccepted:
		to = ledger.Accepted
	case ledger.DecideRejected:
		to = ledger.Rejected
	case ledger.DecideAbandoned:
		to = ledger.Abandoned
		reason = "abandoned, outcome unknown: " + reason
		evidence = ""
	default:
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, &ledger.FieldError{Field: "decision", Reason: "want accepted, rejected or abandoned"})
	}
	if to != ledger.Abandoned && evidence == "" {
		return ledger.Entry{}, fmt.Errorf("resolve %s as %s: %w", key, d, ledger.ErrNoEvidence)
	}
	if e.State != ledger.Unknown && e.State != ledger.Quarantined {
		return ledger.Entry{}, fmt.Errorf("resolve %s: %w", key, &ledger.TransitionError{From: e.State, To: to})
	}
	if to != ledger.Abandoned {
		reason = "operator decision with transport evidence: " + reason
	}
	return r.core.Decide(ctx, e, to, w, reason, evidence)
}

// Resolver records operators' decisions on quarantined entries
// (functions/operate).
type Resolver struct{ core ledger.Core }

// New builds the operator use case. It needs the ledger's tables alone.
func New(core ledger.Core) *Resolver { return &Resolver{core: core} }
