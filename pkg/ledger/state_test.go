package ledger_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func allStates() []ledger.State {
	return append([]ledger.State{ledger.None}, ledger.States...)
}

func TestStatesList(t *testing.T) {
	want := []ledger.State{ledger.Held, ledger.Claimed, ledger.Dispatching, ledger.Deferred, ledger.Accepted, ledger.Rejected, ledger.Unknown,
		ledger.Expired, ledger.Quarantined, ledger.Abandoned, ledger.Suppressed, ledger.Limited}
	if fmt.Sprint(ledger.States) != fmt.Sprint(want) {
		t.Fatalf("States = %v, want %v (update the matrix tests)", ledger.States, want)
	}
}

func TestCanTransitionMatrix(t *testing.T) {
	for _, from := range allStates() {
		for _, to := range allStates() {
			t.Run(from.String()+"->"+to.String(), func(t *testing.T) {
				err := ledger.CanTransition(from, to)
				if ledgertest.AllowedTransitions[[2]ledger.State{from, to}] {
					if err != nil {
						t.Fatalf("want allowed, got %v", err)
					}
					return
				}
				var te *ledger.TransitionError
				if !errors.As(err, &te) {
					t.Fatalf("want *TransitionError, got %T %v", err, err)
				}
				if te.From != from || te.To != to {
					t.Fatalf("TransitionError{%s, %s}, want {%s, %s}", te.From, te.To, from, to)
				}
				if !errors.Is(err, ledger.ErrInvalidTransition) {
					t.Fatalf("%v does not unwrap to ErrInvalidTransition", err)
				}
				if want := fmt.Sprintf("ledger: invalid transition %s -> %s", from, to); err.Error() != want {
					t.Fatalf("message %q, want %q", err.Error(), want)
				}
			})
		}
	}
}

func TestStatePredicates(t *testing.T) {
	tests := []struct {
		s              ledger.State
		terminal, open bool
		valid          bool
	}{
		{ledger.None, false, false, false},
		{ledger.Held, false, true, true},
		{ledger.Claimed, false, true, true},
		{ledger.Dispatching, false, true, true},
		{ledger.Deferred, false, true, true},
		{ledger.Accepted, true, false, true},
		{ledger.Rejected, true, false, true},
		{ledger.Unknown, false, true, true},
		{ledger.Expired, true, false, true},
		{ledger.Quarantined, false, true, true},
		{ledger.Abandoned, true, false, true},
		{ledger.Suppressed, true, false, true},
		{ledger.Limited, true, false, true},
	}
	if len(tests) != len(allStates()) {
		t.Fatalf("table covers %d states, want %d", len(tests), len(allStates()))
	}
	for _, tt := range tests {
		t.Run(tt.s.String(), func(t *testing.T) {
			if got := tt.s.Terminal(); got != tt.terminal {
				t.Errorf("Terminal() = %v, want %v", got, tt.terminal)
			}
			if got := tt.s.Open(); got != tt.open {
				t.Errorf("Open() = %v, want %v", got, tt.open)
			}
			if got := tt.s.Valid(); got != tt.valid {
				t.Errorf("Valid() = %v, want %v", got, tt.valid)
			}
			// A terminal state has no way out, an open one has one.
			outs := 0
			for _, to := range allStates() {
				if ledgertest.AllowedTransitions[[2]ledger.State{tt.s, to}] {
					outs++
				}
			}
			if tt.terminal && outs != 0 || tt.open && outs == 0 {
				t.Errorf("terminal=%v open=%v but %d allowed exits", tt.terminal, tt.open, outs)
			}
			if tt.valid {
				got, err := ledger.ParseState(string(tt.s))
				if err != nil || got != tt.s {
					t.Errorf("ParseState(%q) = %v, %v", tt.s, got, err)
				}
			} else if _, err := ledger.ParseState(string(tt.s)); err == nil {
				t.Errorf("ParseState(%q) succeeded", tt.s)
			}
		})
	}
	if _, err := ledger.ParseState("delivered"); err == nil {
		t.Error(`ParseState("delivered") succeeded`)
	}
}

// TestTriggersDispatch: exactly the two ways a row becomes claimed start a dispatch; every other
// allowed transition, and every write that changes no state, does not.
func TestTriggersDispatch(t *testing.T) {
	want := map[[2]ledger.State]bool{
		{ledger.None, ledger.Claimed}: true, // inserted claimed
		{ledger.Held, ledger.Claimed}: true, // held fallback channel released
	}
	for _, from := range allStates() {
		for _, to := range allStates() {
			if got := ledger.TriggersDispatch(from, to); got != want[[2]ledger.State{from, to}] {
				t.Errorf("TriggersDispatch(%s, %s) = %v", from, to, got)
			}
		}
	}
}
