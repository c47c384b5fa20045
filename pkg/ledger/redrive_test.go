package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestRedriveHandsBackDueRowsOnly(t *testing.T) {
	ctx := context.Background()
	e, sch := pacedEnv(t)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	after := e.Svc.Policy.RedriveAfter

	lost, _, _ := e.claim(t, 40, ledger.Email, ledger.ClaimCreated) // its stream record is lost
	wake, _, _ := e.claim(t, 41, ledger.Email, ledger.ClaimCreated) // deferred; its wake-up is lost
	res, err := e.Svc.Dispatch(ctx, wake.Key(), "d")
	if err != nil || res.Outcome != ledger.DispatchDeferred {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	_, wakes := sch.last(wake.Key())
	e.Clock.Advance(res.Entry.NextAttemptAt.Sub(e.Clock.Now()) + after)
	fresh, _, _ := e.claim(t, 42, ledger.Email, ledger.ClaimCreated) // just claimed: its stream record is on its way
	if _, err := e.Svc.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch.last(lost.Key()); n != 1 {
		t.Errorf("claimed row not picked up for %s: re-driven %d times, want 1", after, n)
	}
	if _, n := sch.last(wake.Key()); n != wakes+1 {
		t.Errorf("deferred row %s past due: re-driven %d times, want 1", after, n-wakes)
	}
	if _, n := sch.last(fresh.Key()); n != 0 {
		t.Errorf("a row claimed just now was re-driven")
	}
	// A moment earlier, the deferred row was not yet late.
	e2, sch2 := pacedEnv(t)
	e2.Transport.Script = e.Transport.Script
	w2, _, _ := e2.claim(t, 43, ledger.Email, ledger.ClaimCreated)
	res, _ = e2.Svc.Dispatch(ctx, w2.Key(), "d")
	e2.Clock.Advance(res.Entry.NextAttemptAt.Sub(e2.Clock.Now()) + after - time.Second)
	_, before := sch2.last(w2.Key())
	if _, err := e2.Svc.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch2.last(w2.Key()); n != before {
		t.Errorf("deferred row re-driven before it was %s late", after)
	}
}
