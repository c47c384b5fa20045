package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestRedriveHandsBackDueRowsOnly(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	after := e.Cases.Policy.RedriveAfter

	lost, _, _ := e.Claim(t, 40, ledger.Email, ledger.OutcomeClaimed) // its stream record is lost
	wake, _, _ := e.Claim(t, 41, ledger.Email, ledger.OutcomeClaimed) // deferred; its wake-up is lost
	res, err := e.Cases.Dispatch(ctx, wake.Key(), "d")
	if err != nil || res.Outcome != ledger.OutcomeDeferred {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	_, wakes := sch.Last(wake.Key())
	e.Clock.Advance(res.Entry.NextAttemptAt.Sub(e.Clock.Now()) + after)
	fresh, _, _ := e.Claim(t, 42, ledger.Email, ledger.OutcomeClaimed) // just claimed: its stream record is on its way
	if _, err := e.Cases.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch.Last(lost.Key()); n != 1 {
		t.Errorf("claimed row not picked up for %s: re-driven %d times, want 1", after, n)
	}
	if _, n := sch.Last(wake.Key()); n != wakes+1 {
		t.Errorf("deferred row %s past due: re-driven %d times, want 1", after, n-wakes)
	}
	if _, n := sch.Last(fresh.Key()); n != 0 {
		t.Errorf("a row claimed just now was re-driven")
	}
	// A moment earlier, the deferred row was not yet late.
	e2, sch2 := ledgertest.PacedScenario(t)
	e2.Transport.Script = e.Transport.Script
	w2, _, _ := e2.Claim(t, 43, ledger.Email, ledger.OutcomeClaimed)
	res, _ = e2.Cases.Dispatch(ctx, w2.Key(), "d")
	e2.Clock.Advance(res.Entry.NextAttemptAt.Sub(e2.Clock.Now()) + after - time.Second)
	_, before := sch2.Last(w2.Key())
	if _, err := e2.Cases.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch2.Last(w2.Key()); n != before {
		t.Errorf("deferred row re-driven before it was %s late", after)
	}
}

// owedSetup is a claimed row, past RedriveAfter, in a paced env whose
// dispatch marks a test moves by hand.
type owedSetup struct {
	e    *ledgertest.Scenario
	sch  *ledgertest.RecordingScheduler
	prog *memstore.Progress
	row  ledger.Entry
}

// claimedPastRedrive claims one row and moves the clock past RedriveAfter.
func claimedPastRedrive(t *testing.T) owedSetup {
	e, sch := ledgertest.PacedScenario(t)
	prog := &memstore.Progress{}
	e.Cases.Progress = prog
	_, _, row := e.Claim(t, 60, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + time.Second)
	return owedSetup{e, sch, prog, row}
}

// redriven runs a re-drive pass and returns how many times the row has been
// handed back in all.
func (s owedSetup) redriven(t *testing.T) int {
	t.Helper()
	if _, err := s.e.Cases.Redrive(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	_, n := s.sch.Last(s.row.Key)
	return n
}

func (s owedSetup) now() time.Time { return s.e.Clock.Now() }

// lag records a batch behind late, heard at at.
func (s owedSetup) lag(behind time.Duration, at time.Time) {
	_, _ = s.prog.Lagging(context.Background(), behind, at, at.Add(-s.e.Cases.Policy.RedriveAfter))
}

// TestRedriveLeavesRowsTheSourcesStillOwe: with the dispatch marks, a row is
// handed back only when neither the stream nor the dispatch queue can still
// deliver it: the source has passed it, or stopped moving.
func TestRedriveLeavesRowsTheSourcesStillOwe(t *testing.T) {
	t.Run("the stream runs late and moves", func(t *testing.T) {
		s := claimedPastRedrive(t)
		s.lag(30*time.Second, s.now().Add(-time.Second))
		if n := s.redriven(t); n != 0 {
			t.Fatalf("re-driven %d times while the stream still owes the row", n)
		}
	})
	t.Run("the stream is on time and the claim waited longer", func(t *testing.T) {
		s := claimedPastRedrive(t)
		s.lag(0, s.now().Add(-time.Second))
		if n := s.redriven(t); n != 1 {
			t.Fatalf("re-driven %d times after the stream should have delivered the row (its record was lost), want 1", n)
		}
	})
	t.Run("the stream stopped moving", func(t *testing.T) {
		s := claimedPastRedrive(t)
		s.lag(30*time.Second, s.now().Add(-s.e.Cases.Policy.RedriveAfter))
		if n := s.redriven(t); n != 1 {
			t.Fatalf("re-driven %d times with a stalled stream, want 1", n)
		}
	})
	t.Run("the largest lateness is old but the stream is still heard", func(t *testing.T) {
		// A batch 30 s late set the window's largest lateness 19 s ago;
		// later batches, less late, were kept out of the window but heard.
		// When the 30 s grows stale by its own time the stream is still
		// moving: the claim, younger than 30 s + RedriveAfter, is owed.
		// (Judged by the window's time alone, the stream looked stopped
		// and every due claim was handed back: 452 of 10,000 in a surge.)
		s := claimedPastRedrive(t)
		s.lag(30*time.Second, s.now().Add(-19*time.Second))
		s.lag(5*time.Second, s.now().Add(-time.Second))
		s.e.Clock.Advance(2 * time.Second)
		if n := s.redriven(t); n != 0 {
			t.Fatalf("re-driven %d times while the stream still delivers", n)
		}
	})
	t.Run("a hand-back the queue still owes is not repeated", testRedriveQueueOwesHandBack)
	t.Run("a deferred row's wake-up the queue still owes", testRedriveQueueOwesWakeUp)
}

// testRedriveQueueOwesHandBack: a row handed back once is not handed back
// again while the dispatch queue still owes that hand-back, and is once the
// queue passed it with the row still claimed.
func testRedriveQueueOwesHandBack(t *testing.T) {
	ctx := context.Background()
	s := claimedPastRedrive(t)
	s.lag(0, s.now())
	if n := s.redriven(t); n != 1 {
		t.Fatalf("first pass: re-driven %d times, want 1", n)
	}
	handedAt := s.now()
	// The queue is moving but has not reached the hand-back: the next
	// pass, past RedriveAfter again, hands nothing back.
	s.e.Clock.Advance(s.e.Cases.Policy.RedriveAfter + time.Second)
	s.lag(0, s.now())
	_ = s.prog.Advance(ctx, handedAt.Add(-time.Second), s.now())
	if n := s.redriven(t); n != 1 {
		t.Fatalf("second pass: re-driven %d times in all while the queue owes the first, want 1", n)
	}
	// The queue passed the hand-back and the row is still claimed: lost again.
	_ = s.prog.Advance(ctx, handedAt.Add(3*time.Second), s.now())
	if n := s.redriven(t); n != 2 {
		t.Fatalf("after the queue passed the first hand-back: re-driven %d times in all, want 2", n)
	}
}

// testRedriveQueueOwesWakeUp: a deferred row is not re-driven while the
// dispatch queue still owes its wake-up, and is once the queue passed it.
func testRedriveQueueOwesWakeUp(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	prog := &memstore.Progress{}
	e.Cases.Progress = prog
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	in, _, _ := e.Claim(t, 61, ledger.Email, ledger.OutcomeClaimed)
	res := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
	_, wakes := sch.Last(in.Key())
	e.Clock.Advance(res.NextAttemptAt.Sub(e.Clock.Now()) + e.Cases.Policy.RedriveAfter + time.Second)
	_ = prog.Advance(ctx, res.NextAttemptAt.Add(-time.Second), e.Clock.Now())
	if _, err := e.Cases.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch.Last(in.Key()); n != wakes {
		t.Fatalf("re-driven while the queue owes its wake-up")
	}
	_ = prog.Advance(ctx, res.NextAttemptAt.Add(3*time.Second), e.Clock.Now())
	if _, err := e.Cases.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch.Last(in.Key()); n != wakes+1 {
		t.Fatalf("not re-driven once the queue passed its wake-up (lost)")
	}
}
