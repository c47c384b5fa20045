package resolve_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const resolveOperator = ledger.Worker("operator:alice")

// prepareResolve holds, per state, a function that returns the key of a row
// in that state.
var prepareResolve = map[ledger.State]func(t *testing.T, e *ledgertest.Scenario) string{
	ledger.Claimed: func(t *testing.T, e *ledgertest.Scenario) string {
		in, _, _ := e.Claim(t, 80, ledger.Email, ledger.OutcomeClaimed)
		return in.Key()
	},
	ledger.Dispatching: func(t *testing.T, e *ledgertest.Scenario) string {
		return e.StuckDispatching(t, 80, ledger.Email, ledgertest.Accept).Key()
	},
	ledger.Accepted: func(t *testing.T, e *ledgertest.Scenario) string {
		in, _, _ := e.Claim(t, 80, ledger.Email, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
		return in.Key()
	},
	ledger.Unknown: func(t *testing.T, e *ledgertest.Scenario) string {
		e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
		in, _, _ := e.Claim(t, 80, ledger.Email, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
		return in.Key()
	},
	ledger.Quarantined: func(t *testing.T, e *ledgertest.Scenario) string {
		e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
		in, _, _ := e.Claim(t, 80, ledger.Email, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
		e.Clock.Advance(time.Minute)
		ledgertest.MustReconcile(t, e)
		return in.Key()
	},
}

// resolveCase is an operator decision on a row in state from, and the state
// it must lead to or the error it must be refused with.
type resolveCase struct {
	name     string
	from     ledger.State
	decision ledger.Decision
	reason   string
	evidence string
	want     ledger.State // "" when an error is expected
	wantErr  error
	field    string // for *FieldError
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	tests := []resolveCase{
		{"unknown accepted without evidence", ledger.Unknown, ledger.DecideAccepted, "provider says fine", "", "", ledger.ErrNoEvidence, ""},
		{"unknown rejected without evidence", ledger.Unknown, ledger.DecideRejected, "probably bounced", "", "", ledger.ErrNoEvidence, ""},
		{"quarantined accepted without evidence", ledger.Quarantined, ledger.DecideAccepted, "provider says fine", "", "", ledger.ErrNoEvidence, ""},
		{"quarantined rejected without evidence", ledger.Quarantined, ledger.DecideRejected, "probably bounced", "", "", ledger.ErrNoEvidence, ""},
		{"unknown accepted with evidence", ledger.Unknown, ledger.DecideAccepted, "found in provider console", "provider-msg-991", ledger.Accepted, nil, ""},
		{"quarantined rejected with evidence", ledger.Quarantined, ledger.DecideRejected, "bounce in provider log", "bounce-77", ledger.Rejected, nil, ""},
		{"unknown abandoned", ledger.Unknown, ledger.DecideAbandoned, "provider has no record either way", "", ledger.Abandoned, nil, ""},
		{"quarantined abandoned, evidence ignored", ledger.Quarantined, ledger.DecideAbandoned, "gave up", "provider-msg-991", ledger.Abandoned, nil, ""},
		{"claimed accepted", ledger.Claimed, ledger.DecideAccepted, "x", "provider-msg-1", "", ledger.ErrInvalidTransition, ""},
		{"claimed abandoned", ledger.Claimed, ledger.DecideAbandoned, "x", "", "", ledger.ErrInvalidTransition, ""},
		{"dispatching abandoned", ledger.Dispatching, ledger.DecideAbandoned, "x", "", "", ledger.ErrInvalidTransition, ""},
		{"accepted rejected", ledger.Accepted, ledger.DecideRejected, "x", "bounce-1", "", ledger.ErrInvalidTransition, ""},
		{"accepted abandoned", ledger.Accepted, ledger.DecideAbandoned, "x", "", "", ledger.ErrInvalidTransition, ""},
		{"accepted accepted again", ledger.Accepted, ledger.DecideAccepted, "x", "provider-msg-2", "", ledger.ErrInvalidTransition, ""},
		{"missing reason", ledger.Unknown, ledger.DecideAbandoned, "", "", "", ledger.ErrInvalidIntent, "reason"},
		{"unknown decision", ledger.Unknown, "delivered", "x", "provider-msg-1", "", ledger.ErrInvalidIntent, "decision"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			key := prepareResolve[tt.from](t, e)
			before := e.Get(t, key)
			if before.State != tt.from {
				t.Fatalf("prepared %s, want %s", before.State, tt.from)
			}
			e.Clock.Advance(time.Hour)
			got, err := e.Cases.Resolve(ctx, key, tt.decision, tt.reason, tt.evidence, resolveOperator)
			if tt.wantErr != nil {
				checkResolveRefused(t, e, key, before, tt, err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkResolved(t, e, key, before, got, tt)
		})
	}
	t.Run("missing row", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		_, err := e.Cases.Resolve(ctx, "00", ledger.DecideAbandoned, "x", "", resolveOperator)
		if !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("want ErrNotFound, got %v", err)
		}
	})
}

// checkResolveRefused checks that a refused decision failed with the case's
// error (naming the from-state or the field) and wrote nothing (before is
// the row before the decision).
func checkResolveRefused(t *testing.T, e *ledgertest.Scenario, key string, before ledger.Entry, tt resolveCase, err error) {
	t.Helper()
	if !errors.Is(err, tt.wantErr) {
		t.Fatalf("want %v, got %v", tt.wantErr, err)
	}
	var te *ledger.TransitionError
	if tt.wantErr == ledger.ErrInvalidTransition && (!errors.As(err, &te) || te.From != tt.from) {
		t.Fatalf("want *TransitionError from %s, got %v", tt.from, err)
	}
	var fe *ledger.FieldError
	if tt.field != "" && (!errors.As(err, &fe) || fe.Field != tt.field) {
		t.Fatalf("want *FieldError on %s, got %v", tt.field, err)
	}
	if after := e.Get(t, key); after.Version != before.Version || after.State != before.State {
		t.Fatalf("failed resolve wrote: %s v%d", after.State, after.Version)
	}
}

// checkResolved checks that an accepted decision closed the row with one
// operator event carrying the reason and the evidence, and purged the
// content (got is what Resolve returned, before the row before it).
func checkResolved(t *testing.T, e *ledgertest.Scenario, key string, before, got ledger.Entry, tt resolveCase) {
	t.Helper()
	stored := e.Get(t, key)
	if got.State != tt.want || stored.State != tt.want || stored.Version != before.Version+1 {
		t.Fatalf("resolved to %s/%s v%d", got.State, stored.State, stored.Version)
	}
	last := stored.Last()
	if last.Worker != string(resolveOperator) || last.PolicyVersion != ledgertest.ScenarioPolicyVersion || last.From != tt.from || last.To != tt.want ||
		!last.At.Equal(e.Clock.Now()) || last.Attempt != before.Attempts || last.Kind != ledger.KindTransition || last.ID == "" {
		t.Fatalf("decision event %+v", last)
	}
	if !strings.Contains(last.Reason, tt.reason) || last.Reason != stored.Reason {
		t.Fatalf("reason %q / %q", last.Reason, stored.Reason)
	}
	switch tt.want {
	case ledger.Abandoned:
		if !strings.HasPrefix(stored.Reason, "abandoned, outcome unknown") || stored.AckID != "" || last.AckID != "" {
			t.Fatalf("abandoned reason %q ack %q", stored.Reason, stored.AckID)
		}
	default:
		if stored.AckID != tt.evidence || last.AckID != tt.evidence || strings.Contains(stored.Reason, "outcome unknown:") {
			t.Fatalf("evidence %q recorded as %q / %q, reason %q", tt.evidence, stored.AckID, last.AckID, stored.Reason)
		}
	}
	if e.HasContent(t, key) {
		t.Fatal("content kept after the decision closed the row")
	}
	ledgertest.CheckHistory(t, stored)
}

func TestOperatorTextKeepsPersonalDataOut(t *testing.T) {
	e := ledgertest.NewScenario(t)
	ctx := context.Background()
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	in, _, _ := e.Claim(t, 4, ledger.Email, ledger.OutcomeClaimed)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
	for _, tt := range []struct{ field, reason, evidence string }{
		{"reason", "player jane@example.test asked", ""},
		{"reason", "called +1 555 123 4567", ""},
		{"reason", "line\nbreak", ""},
		{"evidence", "provider ok", "to: jane@example.test"},
	} {
		d := ledger.DecideAbandoned
		if tt.evidence != "" {
			d = ledger.DecideAccepted
		}
		_, err := e.Cases.Resolve(ctx, in.Key(), d, tt.reason, tt.evidence, "operator:t")
		var fe *ledger.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Fatalf("%q/%q: want a %s field error, got %v", tt.reason, tt.evidence, tt.field, err)
		}
	}
	if _, err := e.Cases.Resolve(ctx, in.Key(), ledger.DecideAccepted, "provider dashboard shows delivery at 10:02", "ses-0100019a", "operator:t"); err != nil {
		t.Fatal(err)
	}
}
