package dispatch_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/dispatch"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// sendTimes records the clock at each transport call.
func sendTimes(e *ledgertest.Scenario, behavior func(ledger.Send) ledgertest.Behavior) *[]time.Time {
	var at []time.Time
	e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
		at = append(at, e.Clock.Now())
		return behavior(s)
	}
	return &at
}

func TestNotSentIsRetriedUnderTheSameKeyWithBackoff(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	e.Cases.Policy.BudgetWait = 0 // every early hand-back is refused, none waited out
	sendTimes(e, func(s ledger.Send) ledgertest.Behavior {
		if s.Attempt <= 3 {
			return ledgertest.Throttle
		}
		return ledgertest.Accept
	})
	in, _, _ := e.Claim(t, 1, ledger.Email, ledger.OutcomeClaimed)
	base := e.Cases.Policy.RetryBase
	for attempt := 1; attempt <= 3; attempt++ {
		res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
		if err != nil || res.Outcome != ledger.OutcomeDeferred {
			t.Fatalf("attempt %d: %s, %v; want deferred", attempt, res.Outcome, err)
		}
		row := res.Entry
		ev := row.Last()
		// Jitter 0.5 puts the wait at three quarters of base * 2^(n-1).
		wantWait := (base << (attempt - 1)) * 3 / 4
		if row.State != ledger.Deferred || ev.Code != ledgertest.ThrottleCode || ev.Attempt != attempt ||
			!ev.NextAttemptAt.Equal(e.Clock.Now().Add(wantWait)) || !row.NextAttemptAt.Equal(ev.NextAttemptAt) {
			t.Fatalf("attempt %d: state %s, event %+v; want deferred with code, attempt and next attempt %s later", attempt, row.State, ev, wantWait)
		}
		if at, _ := sch.Last(in.Key()); !at.Equal(row.NextAttemptAt) {
			t.Fatalf("attempt %d: wake-up scheduled at %s, want %s", attempt, at, row.NextAttemptAt)
		}
		// Handed back early: nothing is sent or written; only a wake-up that
		// came early is scheduled again.
		_, wakes := sch.Last(in.Key())
		early, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-2")
		if err != nil || early.Outcome != ledger.OutcomeNotDue || early.Entry.Version != row.Version {
			t.Fatalf("attempt %d handed back early: %s v%d, %v; want not_due, nothing written", attempt, early.Outcome, early.Entry.Version, err)
		}
		if _, n := sch.Last(in.Key()); n != wakes {
			t.Fatalf("a not-due delivery scheduled another wake-up")
		}
		if err := e.Cases.RescheduleNotDue(ctx, early); err != nil {
			t.Fatal(err)
		}
		if at, n := sch.Last(in.Key()); n != wakes+1 || !at.Equal(row.NextAttemptAt) {
			t.Fatalf("rescheduled at %s (%d wake-ups), want %s", at, n-wakes, row.NextAttemptAt)
		}
		e.Clock.Advance(row.NextAttemptAt.Sub(e.Clock.Now()))
	}
	res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-3")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.Entry.Attempts != 4 {
		t.Fatalf("fourth attempt: %s attempt %d, %v", res.Outcome, res.Entry.Attempts, err)
	}
	for i, s := range e.Transport.Sent {
		if s.IdempotencyKey != in.Key() || s.ContentHash != in.ContentHash || s.Attempt != i+1 {
			t.Fatalf("send %d: key %s hash %s attempt %d; want the row's key and hash, attempt %d", i, s.IdempotencyKey, s.ContentHash, s.Attempt, i+1)
		}
	}
	if n := e.Transport.Calls(); n != 4 {
		t.Fatalf("%d transport calls, want 4", n)
	}
	ledgertest.MustVerify(t, res.Entry)
	for _, ev := range res.Entry.History {
		if ev.To == ledger.Unknown || ev.To == ledger.Quarantined {
			t.Fatalf("a not-sent answer was recorded as %s: %+v", ev.To, ev)
		}
	}
}

func TestNotSentHonorsRetryAfter(t *testing.T) {
	for _, tt := range []struct {
		name       string
		retryAfter time.Duration
		want       time.Duration
	}{
		{"longer than the backoff wins", 45 * time.Second, 45 * time.Second},
		{"shorter than the backoff is not a shortcut", 100 * time.Millisecond, 1500 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := ledgertest.PacedScenario(t)
			e.Transport.RetryAfter = tt.retryAfter
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
			in, _, _ := e.Claim(t, 2, ledger.SMS, ledger.OutcomeClaimed)
			res, err := e.Cases.Dispatch(context.Background(), in.Key(), "dispatch/req-1")
			if err != nil || res.Outcome != ledger.OutcomeDeferred {
				t.Fatalf("%s, %v", res.Outcome, err)
			}
			if got := res.Entry.NextAttemptAt.Sub(e.Clock.Now()); got != tt.want {
				t.Fatalf("next attempt in %s, want %s", got, tt.want)
			}
		})
	}
}

func TestNotSentUntilExpiryEndsExpiredWithTheCode(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	e.Cases.Jitter = func() float64 { return 0.99 }
	starts := sendTimes(e, func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle })
	in, _, _ := e.Claim(t, 3, ledger.Email, ledger.OutcomeClaimed)
	deadline := in.ExpiresAt.Add(-e.Cases.Policy.ExpiryMargin)
	var res ledger.DispatchResult
	for i := 0; i < 100; i++ {
		var err error
		if res, err = e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1"); err != nil {
			t.Fatal(err)
		}
		if res.Outcome != ledger.OutcomeDeferred {
			break
		}
		e.Clock.Advance(res.Entry.NextAttemptAt.Sub(e.Clock.Now()))
	}
	row := res.Entry
	if row.State != ledger.Expired || row.Reason != "not sent before the challenge expired: "+ledgertest.ThrottleCode {
		t.Fatalf("ended %s (%q), want expired with the not-sent reason", row.State, row.Reason)
	}
	if len(*starts) < 5 {
		t.Fatalf("only %d attempts in a %s challenge", len(*starts), ledgertest.ScenarioTTL)
	}
	for i, at := range *starts {
		if !at.Before(deadline) {
			t.Fatalf("attempt %d started at %s, after expiry minus the margin (%s)", i+1, at, deadline)
		}
	}
	if e.HasContent(t, in.Key()) {
		t.Fatal("sealed content kept after the row ended")
	}
	ledgertest.MustVerify(t, row)
}

func TestBudgetPacesSendsAndDefersBeyondTheWait(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	budget := &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 2}}
	e.Cases.Budget = budget
	e.Cases.Policy.BudgetWait = time.Second
	starts := sendTimes(e, func(ledger.Send) ledgertest.Behavior { return ledgertest.Accept })
	t0 := e.Clock.Now()
	// Another dispatch instance booked the next 1.5 s of the budget.
	for range 3 {
		if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	a, _, _ := e.Claim(t, 10, ledger.Email, ledger.OutcomeClaimed)
	b, _, _ := e.Claim(t, 11, ledger.Email, ledger.OutcomeClaimed)
	c, _, _ := e.Claim(t, 12, ledger.Email, ledger.OutcomeClaimed)
	for i, k := range []string{a.Key(), b.Key()} {
		res, err := e.Cases.Dispatch(ctx, k, "dispatch/req-1")
		if err != nil || res.Outcome != ledger.OutcomeDeferred {
			t.Fatalf("row %d: %s, %v; want deferred (slot beyond the 1 s wait)", i, res.Outcome, err)
		}
		want := t0.Add(time.Duration(3+i) * 500 * time.Millisecond)
		if res.Entry.NotSentCode != ledger.BudgetCode || !res.Entry.SlotAt.Equal(want) || !res.Entry.NextAttemptAt.Equal(want) {
			t.Fatalf("row %d deferral: code %q slot %s next %s; want the budget code and slot %s", i, res.Entry.NotSentCode, res.Entry.SlotAt, res.Entry.NextAttemptAt, want)
		}
		if at, _ := sch.Last(k); !at.Equal(want) {
			t.Fatalf("row %d wake-up at %s, want the booked slot %s", i, at, want)
		}
	}
	if len(*starts) != 0 {
		t.Fatal("a deferred row was sent")
	}
	// a wakes at its slot; b wakes at the same moment and waits the half
	// second to its own; c, claimed later, books the next slot and waits.
	e.Clock.Advance(1500 * time.Millisecond)
	for _, k := range []string{a.Key(), b.Key(), c.Key()} {
		res, err := e.Cases.Dispatch(ctx, k, "dispatch/req-2")
		if err != nil || res.Outcome != ledger.OutcomeAccepted {
			t.Fatalf("%s, %v", res.Outcome, err)
		}
	}
	for i, at := range *starts {
		if want := t0.Add(time.Duration(3+i) * 500 * time.Millisecond); !at.Equal(want) {
			t.Fatalf("send %d at +%s, want its slot +%s", i, at.Sub(t0), want.Sub(t0))
		}
	}
}

func TestLateWakeUpBooksANewSlot(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 1}}
	e.Cases.Policy.BudgetWait = 0
	in1, _, _ := e.Claim(t, 20, ledger.Email, ledger.OutcomeClaimed)
	in2, _, _ := e.Claim(t, 21, ledger.Email, ledger.OutcomeClaimed)
	if res, _ := e.Cases.Dispatch(ctx, in1.Key(), "d"); res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("first: %s", res.Outcome)
	}
	res, err := e.Cases.Dispatch(ctx, in2.Key(), "d")
	if err != nil || res.Outcome != ledger.OutcomeDeferred {
		t.Fatalf("second: %s, %v", res.Outcome, err)
	}
	slot := res.Entry.SlotAt
	// Woken 30 s late: the old slot is gone; it books a new one (now).
	e.Clock.Advance(slot.Sub(e.Clock.Now()) + 30*time.Second)
	res, err = e.Cases.Dispatch(ctx, in2.Key(), "d")
	if err != nil || res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("late wake-up: %s, %v", res.Outcome, err)
	}
	// The budget knows about that send: the next booking is a second later.
	at, err := e.Cases.Budget.Reserve(ctx, ledger.Email, e.Clock.Now(), e.Clock.Now().Add(time.Hour))
	if err != nil || !at.Equal(e.Clock.Now().Add(time.Second)) {
		t.Fatalf("next booking %s, %v; want one interval after the late send", at, err)
	}
}

func TestBudgetFullUntilExpiryEndsExpired(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.SMS: 1.0 / 3600}}
	in1, _, _ := e.Claim(t, 30, ledger.SMS, ledger.OutcomeClaimed)
	in2, _, _ := e.Claim(t, 31, ledger.SMS, ledger.OutcomeClaimed)
	if res, _ := e.Cases.Dispatch(ctx, in1.Key(), "d"); res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("first: %s", res.Outcome)
	}
	res, err := e.Cases.Dispatch(ctx, in2.Key(), "d")
	if err != nil || res.Entry.State != ledger.Expired || res.Entry.Reason != ledger.NotSentReason(ledger.BudgetCode) {
		t.Fatalf("no slot before expiry: %s %q, %v; want expired, not sent", res.Entry.State, res.Entry.Reason, err)
	}
	if e.Transport.Recorded(in2.Key()) != 0 {
		t.Fatal("sent without a budget slot")
	}
}

// TestStaleImageBooksNoSlot: a stream record's image can be stale by the
// time it is delivered (reconcile re-drove the claimed row, past its re-drive
// time, while the stream lagged, and dispatch already deferred it to a
// booked slot). Dispatching from that image must not book a second send
// slot for the row: the conditional write would lose after the booking, and
// the slot would stay booked with nobody to send in it, send capacity lost
// for good. An image past its re-drive time is therefore read again.
func TestStaleImageBooksNoSlot(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	budget := &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 1}}
	e.Cases.Budget = budget
	e.Cases.Policy.BudgetWait = 0
	in, _, image := e.Claim(t, 40, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter) // reconcile hands back only claims past this
	t0 := e.Clock.Now()
	// Another instance holds the slot at t0: the row's own booking is later.
	if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/redrive")
	if err != nil || res.Outcome != ledger.OutcomeDeferred || !res.Entry.SlotAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("re-driven dispatch: %s (slot %s), %v; want deferred to t0+1s", res.Outcome, res.Entry.SlotAt, err)
	}
	_, wakeUps := sch.Last(in.Key())

	// The stream record of the claim arrives now, with the claimed image.
	res, err = e.Cases.DispatchRow(ctx, image, "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeNotDue || res.Entry.State != ledger.Deferred {
		t.Fatalf("stale image: %s %s, %v; want not due, still deferred", res.Outcome, res.Entry.State, err)
	}
	if _, n := sch.Last(in.Key()); n > wakeUps+1 {
		t.Fatalf("%d wake-ups scheduled for one stale delivery", n-wakeUps)
	}
	// Nothing else was booked: the next free slot follows the row's own.
	if at, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("next free slot %s, %v; want t0+2s (the stale delivery booked one for nothing)", at.Sub(t0), err)
	}
	if e.Transport.Recorded(in.Key()) != 0 {
		t.Fatal("sent before its slot")
	}
}

// TestSecondDeliveryDuringTheBudgetWaitBooksNoSlot: while one dispatch
// waits in-process for its booked slot, a second delivery of the same row
// arrives (a re-drive and the stream record, or two copies of a wake-up).
// It must wait for the same slot, not book another: a slot booked by the
// delivery that then loses the move to dispatching is never sent in.
func TestSecondDeliveryDuringTheBudgetWaitBooksNoSlot(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	budget := &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 1}}
	e.Cases.Budget = budget
	e.Cases.Policy.BudgetWait = 2 * time.Second
	in, _, _ := e.Claim(t, 50, ledger.Email, ledger.OutcomeClaimed)
	// The claim waited past its re-drive time (its stream record was
	// lost): a re-drive can hand it back while the first dispatch waits.
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + time.Second)
	t0 := e.Clock.Now()
	if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var second ledger.DispatchResult
	var secondErr error
	nested := false
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error {
		if !nested {
			nested = true
			second, secondErr = e.Cases.Dispatch(ctx, in.Key(), "dispatch/redrive")
		}
		e.Clock.Advance(d)
		return nil
	}
	first, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/stream")
	if err != nil || secondErr != nil {
		t.Fatalf("dispatch: %v / %v", err, secondErr)
	}
	outcomes := []ledger.Outcome{first.Outcome, second.Outcome}
	if e.Transport.Recorded(in.Key()) != 1 || !(slices.Contains(outcomes, ledger.OutcomeAccepted) && slices.Contains(outcomes, ledger.OutcomeSkipped)) {
		t.Fatalf("outcomes %v, %d sends; want one accepted send and one skip", outcomes, e.Transport.Recorded(in.Key()))
	}
	if at, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("next free slot t0+%s, %v; want t0+2s (the second delivery booked a slot for nothing)", at.Sub(t0), err)
	}
	row := e.Get(t, in.Key())
	if row.State != ledger.Accepted || row.Attempts != 1 {
		t.Fatalf("row %s after %d attempts", row.State, row.Attempts)
	}
	ledgertest.MustVerify(t, row)
}

// TestFreshClaimWaitsForItsSlotWithoutAHold: a claim whose send slot comes
// before its re-drive time waits for it in-process without the deferral
// write that holds a slot (no other delivery can book one then, but a
// duplicate stream record): claimed, dispatching, accepted, three writes.
func TestFreshClaimWaitsForItsSlotWithoutAHold(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	budget := &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 1}}
	e.Cases.Budget = budget
	e.Cases.Policy.BudgetWait = 2 * time.Second
	in, _, _ := e.Claim(t, 51, ledger.Email, ledger.OutcomeClaimed)
	t0 := e.Clock.Now()
	if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.BudgetWait != time.Second {
		t.Fatalf("%s after waiting %s, %v; want accepted after waiting 1s", res.Outcome, res.BudgetWait, err)
	}
	row := e.Get(t, in.Key())
	var path []ledger.State
	for _, ev := range row.History {
		path = append(path, ev.To)
	}
	if !slices.Equal(path, []ledger.State{ledger.Claimed, ledger.Dispatching, ledger.Accepted}) {
		t.Fatalf("history %v, want claimed, dispatching, accepted (no deferral to hold the slot)", path)
	}
	ledgertest.MustVerify(t, row)
	// Past its re-drive time the same wait holds the slot on the row.
	late, _, _ := e.Claim(t, 52, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter)
	t1 := e.Clock.Now()
	if _, err := budget.Reserve(ctx, ledger.Email, t1, t1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Cases.Dispatch(ctx, late.Key(), "dispatch/redrive"); err != nil || res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	if row := e.Get(t, late.Key()); len(row.History) != 4 || row.History[1].To != ledger.Deferred || row.History[1].Code != ledger.BudgetCode {
		t.Fatalf("a wait past the re-drive time: %d entries, the second to %s; want the slot held (deferred, %s)", len(row.History), row.History[1].To, ledger.BudgetCode)
	}
}

func TestNoSendStartsTooCloseToTheInvocationDeadline(t *testing.T) {
	e, sch := ledgertest.PacedScenario(t)
	sendTimes(e, func(ledger.Send) ledgertest.Behavior { return ledgertest.Accept })
	in, _, _ := e.Claim(t, 60, ledger.Email, ledger.OutcomeClaimed)
	// The function's timeout is 5 s away: a send could be cut off mid-call,
	// leaving the row dispatching and then unknown. It is handed off instead.
	ctx, cancel := context.WithTimeout(context.Background(), dispatch.SendReserve/2)
	defer cancel()
	res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || res.Outcome != ledger.OutcomeDeferred || res.Entry.NotSentCode != ledger.HandOffCode {
		t.Fatalf("near the deadline: %s (%q), %v; want deferred, handed off", res.Outcome, res.Entry.NotSentCode, err)
	}
	if e.Transport.Calls() != 0 {
		t.Fatal("a send started with less than SendReserve left")
	}
	if at, n := sch.Last(in.Key()); n != 1 || !at.Equal(e.Clock.Now()) {
		t.Fatalf("wake-up at %s (%d scheduled), want now", at, n)
	}
	// The next invocation, with time to spare, sends it.
	res, err = e.Cases.Dispatch(context.Background(), in.Key(), "dispatch/req-2")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.Entry.Attempts != 1 {
		t.Fatalf("next invocation: %s attempt %d, %v", res.Outcome, res.Entry.Attempts, err)
	}
}
