package reconcile_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// unknownPolicyStep is one reconcile pass: the clock moves on by advance,
// then reconcile runs with sends answered by behavior.
type unknownPolicyStep struct {
	advance  time.Duration
	behavior ledgertest.Behavior // of a send during this reconcile, if any
}

// unknownPolicyCase is a transport's capabilities (retry window, lookup),
// the send that left the row unknown, the reconcile passes that follow, and
// the row and sends they must end with.
type unknownPolicyCase struct {
	name     string
	window   time.Duration
	lookup   bool
	dispatch ledgertest.Behavior
	steps    []unknownPolicyStep
	// want
	state    ledger.State
	sends    int
	recorded int
	attempts int
	ackID    string
	reason   string // substring of the row's reason
}

// unknownPolicyCases covers each way a transport lets reconcile settle an
// unknown outcome: a same-key retry window, a lookup, both, or neither.
func unknownPolicyCases() []unknownPolicyCase {
	const (
		A    = ledgertest.Accept
		R    = ledgertest.Reject
		Drop = ledgertest.AcceptThenDrop
		Fail = ledgertest.FailBeforeReach
	)
	type step = unknownPolicyStep
	return []unknownPolicyCase{
		{name: "window: same-key retry accepted with the original id", window: 24 * time.Hour, dispatch: Drop,
			steps: []step{{time.Minute, A}}, state: ledger.Accepted, sends: 2, recorded: 1, attempts: 2, ackID: "msg-1", reason: "same-key retry"},
		{name: "window: same-key retry refused", window: 24 * time.Hour, dispatch: Fail,
			steps: []step{{time.Minute, R}}, state: ledger.Rejected, sends: 2, recorded: 0, attempts: 2, reason: "destination suppressed"},
		{name: "window: retry unanswered stays unknown", window: 24 * time.Hour, dispatch: Drop,
			steps: []step{{time.Minute, Drop}}, state: ledger.Unknown, sends: 2, recorded: 1, attempts: 2},
		{name: "window: not due yet", window: 24 * time.Hour, dispatch: Drop,
			steps: []step{{30 * time.Second, A}}, state: ledger.Unknown, sends: 1, recorded: 1, attempts: 1},
		{name: "window: attempts bounded by MaxAttempts, then quarantined", window: 24 * time.Hour, dispatch: Drop,
			steps: []step{{time.Minute, Drop}, {time.Minute, Drop}, {time.Minute, A}, {time.Minute, A}},
			state: ledger.Quarantined, sends: 3, recorded: 1, attempts: 3, reason: "budget of 3 attempts"},
		{name: "window: attempts bounded when nothing reaches the provider", window: 24 * time.Hour, dispatch: Fail,
			steps: []step{{time.Minute, Fail}, {time.Minute, Fail}, {time.Minute, A}},
			state: ledger.Quarantined, sends: 3, recorded: 0, attempts: 3, reason: "outcome unknown"},
		{name: "window passed", window: 5 * time.Minute, dispatch: Drop,
			steps: []step{{5 * time.Minute, A}}, state: ledger.Quarantined, sends: 1, recorded: 1, attempts: 1, reason: "window passed"},
		// A retry may take its lease to reach the provider, and clocks are
		// skewed by up to the margin: none starts unless both fit in the
		// window (found by the simulator, sim/).
		{name: "window: no retry that could not finish within its lease before the window ends", window: 5 * time.Minute, dispatch: Drop,
			steps: []step{{3 * time.Minute, A}}, state: ledger.Quarantined, sends: 1, recorded: 1, attempts: 1, reason: "window passed"},
		{name: "window: a retry that finishes within its lease before the window ends", window: 5 * time.Minute, dispatch: Drop,
			steps: []step{{2*time.Minute + 29*time.Second, A}}, state: ledger.Accepted, sends: 2, recorded: 1, attempts: 2, ackID: "msg-1", reason: "same-key retry"},
		{name: "challenge expired: no retry", window: 24 * time.Hour, dispatch: Drop,
			steps: []step{{ledgertest.ScenarioTTL, A}}, state: ledger.Quarantined, sends: 1, recorded: 1, attempts: 1, reason: "challenge expired"},
		{name: "challenge inside the expiry margin: no retry", window: 24 * time.Hour, dispatch: Fail,
			steps: []step{{ledgertest.ScenarioTTL - 20*time.Second, A}}, state: ledger.Quarantined, sends: 1, recorded: 0, attempts: 1, reason: "challenge expired"},
		{name: "lookup: found is accepted with the provider's id", lookup: true, dispatch: Drop,
			steps: []step{{time.Minute, A}}, state: ledger.Accepted, sends: 1, recorded: 1, attempts: 1, ackID: "msg-1", reason: "lookup found"},
		{name: "lookup: found even after the challenge expired", lookup: true, dispatch: Drop,
			steps: []step{{time.Hour, A}}, state: ledger.Accepted, sends: 1, recorded: 1, attempts: 1, ackID: "msg-1"},
		{name: "lookup: not found inside the settle period stays unknown", lookup: true, dispatch: Fail,
			steps: []step{{time.Minute, A}, {time.Minute, A}}, state: ledger.Unknown, sends: 1, recorded: 0, attempts: 1},
		{name: "lookup: not found after settling is quarantined", lookup: true, dispatch: Fail,
			steps: []step{{time.Minute, A}, {4 * time.Minute, A}}, state: ledger.Quarantined, sends: 1, recorded: 0, attempts: 1, reason: "no idempotency key or lookup"},
		{name: "lookup and window: not found after settling retries", lookup: true, window: 24 * time.Hour, dispatch: Fail,
			steps: []step{{time.Minute, A}, {4 * time.Minute, A}}, state: ledger.Accepted, sends: 2, recorded: 1, attempts: 2, ackID: "msg-2"},
		{name: "neither: quarantined, no send", dispatch: Drop,
			steps: []step{{time.Minute, A}}, state: ledger.Quarantined, sends: 1, recorded: 1, attempts: 1, reason: "needs an operator decision"},
		{name: "neither: a later sweep does not send either", dispatch: Fail,
			steps: []step{{time.Minute, A}, {time.Hour, A}}, state: ledger.Quarantined, sends: 1, recorded: 0, attempts: 1},
	}
}

func TestReconcileUnknownPolicy(t *testing.T) {
	for _, tt := range unknownPolicyCases() {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Window, e.Transport.CanLookup = tt.window, tt.lookup
			behavior := tt.dispatch
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return behavior }
			in, _, _ := e.Claim(t, 40, ledger.Email, ledger.OutcomeClaimed)
			ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)

			for i, st := range tt.steps {
				e.Clock.Advance(st.advance)
				behavior = st.behavior
				reconcileStep(t, e, in.Key(), i)
			}
			checkUnknownSettled(t, e, in, tt)
		})
	}
}

// reconcileStep runs reconcile pass i and checks that it looked at the row
// if and only if the row was due.
func reconcileStep(t *testing.T, e *ledgertest.Scenario, key string, i int) {
	t.Helper()
	before := e.Get(t, key)
	ledgertest.MustReconcile(t, e)
	after := e.Get(t, key)
	if before.State == ledger.Unknown && !before.NextCheckAt.After(e.Clock.Now()) && after.Version == before.Version {
		t.Fatalf("step %d: a due unknown row was not looked at", i)
	}
	if before.NextCheckAt.After(e.Clock.Now()) && after.Version != before.Version {
		t.Fatalf("step %d: a row not yet due was changed", i)
	}
}

// checkUnknownSettled checks the row and the sends after the case's last
// reconcile pass.
func checkUnknownSettled(t *testing.T, e *ledgertest.Scenario, in ledger.Intent, tt unknownPolicyCase) {
	t.Helper()
	got := e.Get(t, in.Key())
	if got.State != tt.state || got.Attempts != tt.attempts || got.AckID != tt.ackID {
		t.Fatalf("row %s attempts %d ack %q (reason %q), want %s %d %q", got.State, got.Attempts, got.AckID, got.Reason, tt.state, tt.attempts, tt.ackID)
	}
	if !strings.Contains(got.Reason, tt.reason) {
		t.Fatalf("reason %q does not mention %q", got.Reason, tt.reason)
	}
	if len(e.Transport.Sent) != tt.sends || e.Transport.Recorded(in.Key()) != tt.recorded {
		t.Fatalf("sends %d recorded %d, want %d %d", len(e.Transport.Sent), e.Transport.Recorded(in.Key()), tt.sends, tt.recorded)
	}
	for i, s := range e.Transport.Sent {
		if s.IdempotencyKey != in.Key() || s.ContentHash != in.ContentHash || s.Attempt != i+1 {
			t.Fatalf("send %d: key %s hash %s attempt %d", i, s.IdempotencyKey, s.ContentHash, s.Attempt)
		}
	}
	if got.Attempts > e.Cases.Policy.MaxAttempts {
		t.Fatalf("%d attempts exceed MaxAttempts %d", got.Attempts, e.Cases.Policy.MaxAttempts)
	}
	if want := got.State == ledger.Unknown; e.HasContent(t, in.Key()) != want {
		t.Fatalf("content kept = %v in state %s", !want, got.State)
	}
	if got.State == ledger.Quarantined && (!strings.Contains(got.Reason, "outcome unknown") || !got.NextCheckAt.IsZero()) {
		t.Fatalf("quarantine reason %q next check %v", got.Reason, got.NextCheckAt)
	}
	if got.State == ledger.Unknown && !got.NextCheckAt.After(e.Clock.Now()) {
		t.Fatalf("unknown row's next check %v is not in the future", got.NextCheckAt)
	}
	ledgertest.CheckHistory(t, got)
	if got.State == ledger.Accepted || got.State == ledger.Rejected {
		// Evidence: the entry that closed the row came from the
		// transport, in a reconcile, not from an operator.
		last := got.Last()
		if last.From != ledger.Unknown || last.Worker != "reconcile/req-1" || last.AckID != tt.ackID {
			t.Fatalf("closing event %+v", last)
		}
	}
}

func TestReconcileDispatchingPastLease(t *testing.T) {
	tests := []struct {
		name   string
		window time.Duration
		lookup bool
		// the provider's side of the send the crashed worker made
		provider ledgertest.Behavior
		want     ledger.State
		wantLast ledger.EventKind
	}{
		{"lookup, nothing recorded: waits for the settle period", 0, true, ledgertest.FailBeforeReach, ledger.Unknown, ledger.KindRecheck},
		{"lookup, provider recorded it", 0, true, ledgertest.Accept, ledger.Accepted, ledger.KindTransition},
		{"window: same-key retry", 24 * time.Hour, false, ledgertest.Accept, ledger.Accepted, ledger.KindTransition},
		{"neither: quarantined", 0, false, ledgertest.Accept, ledger.Quarantined, ledger.KindTransition},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Window, e.Transport.CanLookup = tt.window, tt.lookup
			in := e.StuckDispatching(t, 41, ledger.SMS, tt.provider)
			sends := len(e.Transport.Sent)

			// Inside the lease nothing happens.
			e.Clock.Advance(e.Cases.Policy.Lease - time.Second)
			if rep := ledgertest.MustReconcile(t, e); rep.Seen != 0 {
				t.Fatalf("saw %d rows inside the lease", rep.Seen)
			}
			if got := e.Get(t, in.Key()); got.State != ledger.Dispatching || got.Version != 2 {
				t.Fatalf("inside the lease: %s v%d", got.State, got.Version)
			}

			e.Clock.Advance(time.Second)
			rep := ledgertest.MustReconcile(t, e)
			if rep.Actions["dispatching->unknown"] != 1 {
				t.Fatalf("actions %v", rep.Actions)
			}
			got := e.Get(t, in.Key())
			if got.State != tt.want || got.Last().Kind != tt.wantLast {
				t.Fatalf("row %s last %s (%q), want %s %s", got.State, got.Last().Kind, got.Reason, tt.want, tt.wantLast)
			}
			lease := got.History[2]
			if lease.From != ledger.Dispatching || lease.To != ledger.Unknown || !strings.Contains(lease.Reason, "lease expired") ||
				lease.Worker != "reconcile/req-1" || !lease.At.Equal(e.Clock.Now()) {
				t.Fatalf("lease event %+v", lease)
			}
			if !got.LeaseUntil.IsZero() {
				t.Fatalf("lease not cleared: %v", got.LeaseUntil)
			}
			if tt.window == 0 && len(e.Transport.Sent) != sends {
				t.Fatal("reconcile sent through a transport that honors no key")
			}
			if n := e.Transport.Recorded(in.Key()); n > 1 {
				t.Fatalf("provider recorded %d messages", n)
			}
			ledgertest.CheckHistory(t, got)
		})
	}
}

// The worker's acknowledgement is lost after the provider accepted, and the
// transport honors no idempotency key: a retry would send a second message.
// Reconcile must quarantine instead, and the provider keeps exactly one.
func TestCrashAfterProviderAccepted(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, e *ledgertest.Scenario) ledger.Intent
	}{
		{"ack lost, unknown recorded", func(t *testing.T, e *ledgertest.Scenario) ledger.Intent {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			in, _, _ := e.Claim(t, 42, ledger.Email, ledger.OutcomeClaimed)
			ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
			return in
		}},
		{"worker died before recording anything", func(t *testing.T, e *ledgertest.Scenario) ledger.Intent {
			return e.StuckDispatching(t, 42, ledger.Email, ledgertest.Accept)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := ledgertest.NewScenario(t)
			in := tt.setup(t, e)
			e.Transport.Script = nil // the provider would accept (and record) again
			if e.Transport.Recorded(in.Key()) != 1 {
				t.Fatalf("setup: recorded %d", e.Transport.Recorded(in.Key()))
			}
			for range 5 {
				e.Clock.Advance(e.Cases.Policy.Lease)
				ledgertest.MustReconcile(t, e)
				// Redeliveries and duplicate stream records are harmless too.
				sealed := ledgertest.Seal(ledgertest.Message(42, ledger.Email))
				if r, err := e.Cases.Claim(ctx, in, sealed, "claim/redelivery"); err != nil || r.Outcome != ledger.OutcomeDuplicate {
					t.Fatalf("redelivery: %s %v", r.Outcome, err)
				}
				if r, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/dup"); err != nil || r.Outcome != ledger.OutcomeSkipped {
					t.Fatalf("dispatch: %s %v", r.Outcome, err)
				}
			}
			got := e.Get(t, in.Key())
			if got.State != ledger.Quarantined || e.Transport.Recorded(in.Key()) != 1 || e.Transport.Calls() != 1 {
				t.Fatalf("row %s, recorded %d, calls %d", got.State, e.Transport.Recorded(in.Key()), e.Transport.Calls())
			}
			if got.AckID != "" {
				t.Fatalf("quarantined row claims ack %q", got.AckID)
			}
			if strings.Contains(ledgertest.HistoryPath(got), ">accepted") || strings.Contains(ledgertest.HistoryPath(got), ">rejected") {
				t.Fatalf("unknown resolved without evidence: %s", ledgertest.HistoryPath(got))
			}
			ledgertest.CheckHistory(t, got)
		})
	}
}

func TestReconcileLimitAndNoTransport(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	var keys []string
	for i := range 3 {
		in, _, _ := e.Claim(t, 50+i, ledger.Email, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
		keys = append(keys, in.Key())
	}
	e.Clock.Advance(time.Minute)
	rep, err := e.Cases.Reconcile(ctx, "reconcile/req-1", 2)
	if err != nil || rep.Seen != 2 || rep.Actions["unknown->quarantined"] != 2 {
		t.Fatalf("limited sweep: %+v %v", rep, err)
	}
	delete(e.Cases.Transports, ledger.Email)
	rep, err = e.Cases.Reconcile(ctx, "reconcile/req-2", 10)
	if err != nil || rep.Seen != 1 || len(rep.Errors) != 1 || rep.Err() == nil {
		t.Fatalf("sweep without transport: %+v %v", rep, err)
	}
	unknown := 0
	for _, k := range keys {
		if e.Get(t, k).State == ledger.Unknown {
			unknown++
		}
	}
	if unknown != 1 {
		t.Fatalf("%d rows left unknown, want 1", unknown)
	}
}

func TestReconcileRetryWithoutContent(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Window = 24 * time.Hour
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.FailBeforeReach }
	in, _, _ := e.Claim(t, 96, ledger.SMS, ledger.OutcomeClaimed)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
	_ = e.Content.Delete(context.Background(), e.ContentKey(in.Key()))
	e.Clock.Advance(time.Minute)
	ledgertest.MustReconcile(t, e)
	got := e.Get(t, in.Key())
	if got.State != ledger.Quarantined || !strings.Contains(got.Reason, "content unavailable") || e.Transport.Calls() != 1 {
		t.Fatalf("row %s %q, calls %d", got.State, got.Reason, e.Transport.Calls())
	}
	ledgertest.CheckHistory(t, got)
}

// With provider events, reconcile waits the settle period for one before it
// quarantines an unknown row; without them it quarantines at once.
func TestReconcileWaitsForProviderEvents(t *testing.T) {
	for _, events := range []bool{true, false} {
		e := ledgertest.NewScenario(t)
		e.Transport.Events = events
		in, _, _ := e.Claim(t, 4, ledger.Email, ledger.OutcomeClaimed)
		e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
		e.Clock.Advance(e.Cases.Policy.RecheckAfter)
		if _, err := e.Cases.Reconcile(context.Background(), "reconcile/req-1", 10); err != nil {
			t.Fatal(err)
		}
		row := e.Get(t, in.Key())
		if events != (row.State == ledger.Unknown) {
			t.Fatalf("events %v: first look leaves the row %s", events, row.State)
		}
		if !events {
			continue
		}
		if last := row.Last(); last.Kind != ledger.KindRecheck || !strings.Contains(last.Reason, "no provider event yet") {
			t.Fatalf("first look wrote %+v", last)
		}
		e.Clock.Advance(e.Cases.Policy.SettlePeriod)
		if _, err := e.Cases.Reconcile(context.Background(), "reconcile/req-1", 10); err != nil {
			t.Fatal(err)
		}
		if row = e.Get(t, in.Key()); row.State != ledger.Quarantined || !strings.Contains(row.Reason, "no provider event within the settle period") {
			t.Fatalf("after the settle period: %s %q", row.State, row.Reason)
		}
		ledgertest.MustVerify(t, row)
	}
}
