package ledger

import "fmt"

// State is the lifecycle state of one logical message.
type State string

// The states of the "States" section of docs/design.md. None is the pseudo-state before an entry exists.
const (
	None        State = ""
	Claimed     State = "claimed"
	Dispatching State = "dispatching"
	// Deferred records a message the provider proved it did not take for
	// now (throttling, a quota, a paused account), or one the send-rate
	// budget could not fit in soon: nothing was sent, and another attempt
	// under the same key is due at the entry's NextAttemptAt, while the
	// challenge lasts.
	Deferred    State = "deferred"
	Accepted    State = "accepted"
	Rejected    State = "rejected"
	Unknown     State = "unknown"
	Expired     State = "expired"
	Quarantined State = "quarantined"
	// Abandoned closes an unknown or quarantined entry without transport
	// evidence: the outcome stays unknown, and the record says so.
	Abandoned State = "abandoned"
	// Held records a fallback channel whose earlier channel is still open
	// (or not claimed yet). It sends nothing; it becomes claimed when the
	// earlier channel ends rejected, suppressed when it ends otherwise, and
	// expired when its challenge does.
	Held State = "held"
	// Suppressed records a fallback channel that was not needed because an
	// earlier channel of the same challenge did not end rejected, or an
	// unsent entry whose subject has a newer challenge (superseded).
	Suppressed State = "suppressed"
	// Limited records a message a send limit stopped before its send
	// (Limits): nothing was sent, and its reason names the rule, the
	// window and the count.
	Limited State = "limited"
)

// States lists every real state, in lifecycle order.
var States = []State{Held, Claimed, Dispatching, Deferred, Accepted, Rejected, Unknown, Expired, Quarantined, Abandoned, Suppressed, Limited}

// transitions is the one transition table. A pair not listed is forbidden.
var transitions = map[State][]State{
	None:        {Claimed, Held, Expired, Suppressed},
	Held:        {Claimed, Suppressed, Expired},
	Claimed:     {Dispatching, Deferred, Expired, Quarantined, Limited, Suppressed},
	Dispatching: {Accepted, Rejected, Unknown, Deferred, Expired},
	Deferred:    {Dispatching, Expired, Quarantined, Accepted, Suppressed},
	Unknown:     {Accepted, Rejected, Quarantined, Abandoned, Deferred},
	Quarantined: {Accepted, Rejected, Abandoned},
}

// CanTransition returns nil if from -> to is in the transition table and a
// *TransitionError otherwise.
func CanTransition(from, to State) error {
	for _, s := range transitions[from] {
		if s == to {
			return nil
		}
	}
	return &TransitionError{From: from, To: to}
}

// TriggersDispatch reports whether a stored change from from to to starts a
// dispatch: the entry became claimed (inserted so, or released from held).
// The stream filter, the dispatch function and the test pipeline use it.
func TriggersDispatch(from, to State) bool {
	return to == Claimed && CanTransition(from, to) == nil
}

// Terminal reports whether no transition leaves s.
func (s State) Terminal() bool { return s != None && len(transitions[s]) == 0 }

// Open reports whether entries in state s are kept in the open-row index, so
// that sweeps and operators can find them: every real state some
// transition leaves.
func (s State) Open() bool { return s.Valid() && !s.Terminal() }

// Valid reports whether s is one of States.
func (s State) Valid() bool {
	for _, v := range States {
		if v == s {
			return true
		}
	}
	return false
}

// ParseState returns the State named by v.
func ParseState(v string) (State, error) {
	s := State(v)
	if !s.Valid() {
		return None, fmt.Errorf("ledger: unknown state %q", v)
	}
	return s, nil
}

func (s State) display() string {
	if s == None {
		return "none"
	}
	return string(s)
}

func (s State) String() string { return s.display() }
