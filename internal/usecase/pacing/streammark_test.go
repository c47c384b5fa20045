package pacing_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// countingProgress counts the stream lateness writes.
type countingProgress struct {
	*memstore.Progress
	laggings int
}

func (p *countingProgress) Lagging(ctx context.Context, behind time.Duration, at, staleBefore time.Time) (ledger.Lag, error) {
	p.laggings++
	return p.Progress.Lagging(ctx, behind, at, staleBefore)
}

// markedEnv is pacedEnv with an email send-rate budget of one send a second,
// the in-process budget wait given, and, if marked, the dispatch marks.
func markedEnv(t *testing.T, wait time.Duration, marked bool) (*ledgertest.Scenario, *ledgertest.RecordingScheduler, *memstore.Budget, *memstore.Progress) {
	e, sch := ledgertest.PacedScenario(t)
	budget := &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 1}}
	e.Cases.Budget = budget
	e.Cases.Policy.BudgetWait = wait
	var prog *memstore.Progress
	if marked {
		prog = &memstore.Progress{}
		e.Cases.Progress = prog
	}
	return e, sch, budget, prog
}

func states(row ledger.Entry) []ledger.State {
	var path []ledger.State
	for _, ev := range row.History {
		path = append(path, ev.To)
	}
	return path
}

// TestLateStreamClaimWaitsOnTheStreamMark: in a surge the stream delivers
// claims past their re-drive time. A claim that then waits in-process for its
// send slot needs no hold on the row (a deferral write, an index move and a
// history entry) when the stream's mark keeps reconcile from handing it back
// until the slot: dispatch records the claim's own lateness first, and a
// re-drive pass during the wait hands back nothing. The next claim, as
// late, rests on the mark already seen: no write at all. Its image is
// trusted too (no hand-back since it became due), so it is not read.
func TestLateStreamClaimWaitsOnTheStreamMark(t *testing.T) {
	ctx := context.Background()
	e, sch, budget, marks := markedEnv(t, 2*time.Second, true)
	counting := &ledgertest.CountingStore{Store: e.Cases.Store}
	e.Cases.Store = counting
	prog := &countingProgress{Progress: marks}
	e.Cases.Progress = prog
	first, _, image1 := e.Claim(t, 70, ledger.Email, ledger.OutcomeClaimed)
	second, _, image2 := e.Claim(t, 71, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + 10*time.Second) // the stream runs 30 s late
	t0 := e.Clock.Now()
	if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	handedBack := -1
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error {
		if handedBack < 0 {
			// Reconcile runs while the first claim waits for its slot.
			if _, err := e.Cases.Redrive(ctx, 100); err != nil {
				t.Fatal(err)
			}
			_, n1 := sch.Last(first.Key())
			_, n2 := sch.Last(second.Key())
			handedBack = n1 + n2
		}
		e.Clock.Advance(d)
		return nil
	}
	counting.Gets = 0
	res, err := e.Cases.DispatchRow(ctx, image1, "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.BudgetWait != time.Second {
		t.Fatalf("first: %s after waiting %s, %v; want accepted after 1s", res.Outcome, res.BudgetWait, err)
	}
	if handedBack != 0 {
		t.Fatalf("reconcile handed back %d claims while the stream was delivering them", handedBack)
	}
	if got := states(e.Get(t, first.Key())); !slices.Equal(got, []ledger.State{ledger.Claimed, ledger.Dispatching, ledger.Accepted}) {
		t.Fatalf("first: history %v; want no hold (claimed, dispatching, accepted)", got)
	}
	if prog.laggings != 1 || counting.Gets != 1 {
		t.Fatalf("first: %d lateness writes, %d row reads; want 1 and 1", prog.laggings, counting.Gets)
	}
	m, _ := prog.Marks(ctx)
	if m.Stream.Behind != e.Cases.Policy.RedriveAfter+10*time.Second {
		t.Fatalf("stream lag %s; want the claim's own lateness", m.Stream.Behind)
	}

	counting.Gets = 0
	res, err = e.Cases.DispatchRow(ctx, image2, "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || res.BudgetWait != time.Second {
		t.Fatalf("second: %s after waiting %s, %v; want accepted after 1s", res.Outcome, res.BudgetWait, err)
	}
	if got := states(e.Get(t, second.Key())); len(got) != 3 {
		t.Fatalf("second: history %v; want no hold", got)
	}
	if prog.laggings != 1 || counting.Gets != 1 {
		t.Fatalf("second: %d more lateness writes, %d row reads; want no lateness write (the mark seen covers it) and the one read", prog.laggings-1, counting.Gets)
	}
	if e.Transport.Recorded(first.Key()) != 1 || e.Transport.Recorded(second.Key()) != 1 {
		t.Fatal("each claim must be sent exactly once")
	}
}

// TestLateStreamClaimHoldsWithoutAMark: the same late claim with no
// Progress to rest on holds its slot on the row, as before.
func TestLateStreamClaimHoldsWithoutAMark(t *testing.T) {
	ctx := context.Background()
	e, _, budget, _ := markedEnv(t, 2*time.Second, false)
	in, _, image := e.Claim(t, 72, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + 10*time.Second)
	if _, err := budget.Reserve(ctx, ledger.Email, e.Clock.Now(), e.Clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Cases.DispatchRow(ctx, image, "dispatch/stream"); err != nil || res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	if got := states(e.Get(t, in.Key())); len(got) != 4 || got[1] != ledger.Deferred {
		t.Fatalf("history %v; want the slot held (claimed, deferred, dispatching, accepted)", got)
	}
}

// TestStreamImageReadAfterAHandBack: once reconcile has handed back a claim
// past its re-drive time (recorded as the marks' Redriven), a stream image of
// that claim may be stale even while the stream's lag is fresh: it is read,
// and books no second slot.
func TestStreamImageReadAfterAHandBack(t *testing.T) {
	ctx := context.Background()
	e, sch, budget, prog := markedEnv(t, 0, true)
	in, _, image := e.Claim(t, 73, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + 3*time.Second)
	// No stream mark yet: reconcile hands the claim back.
	if _, err := e.Cases.Redrive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if _, n := sch.Last(in.Key()); n != 1 {
		t.Fatalf("handed back %d times, want 1", n)
	}
	t0 := e.Clock.Now()
	if _, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	// The hand-back arrives first and defers the row to its slot.
	if res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/queue"); err != nil || res.Outcome != ledger.OutcomeDeferred {
		t.Fatalf("hand-back: %s, %v; want deferred", res.Outcome, err)
	}
	// The stream catches up: a fresh lag that covers the claim.
	if _, err := prog.Lagging(ctx, e.Cases.Policy.RedriveAfter+3*time.Second, t0, t0.Add(-e.Cases.Policy.RedriveAfter)); err != nil {
		t.Fatal(err)
	}
	res, err := e.Cases.DispatchRow(ctx, image, "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeNotDue || res.Entry.State != ledger.Deferred {
		t.Fatalf("stale image: %s %s, %v; want not due, still deferred (the row read)", res.Outcome, res.Entry.State, err)
	}
	if at, err := budget.Reserve(ctx, ledger.Email, t0, t0.Add(time.Hour)); err != nil || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("next free slot t0+%s, %v; want t0+2s (the stale image booked a slot for nothing)", at.Sub(t0), err)
	}
}

// TestLateStreamRecordReadsOnceAndWritesNothing: a stream record arrives
// for a claim the expire sweep has already closed. Dispatch decides from the
// row it reads, not from the stale image: a skip, after one read and no
// write.
func TestLateStreamRecordReadsOnceAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	counting := &ledgertest.CountingStore{Store: e.Cases.Store}
	e.Cases.Store = counting
	in, _, image := e.Claim(t, 74, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(in.ExpiresAt.Sub(e.Clock.Now()) + time.Second)
	if _, err := e.Cases.ExpireSweep(ctx, "expire/sweep", 10); err != nil {
		t.Fatal(err)
	}
	if row := e.Get(t, in.Key()); row.State != ledger.Expired {
		t.Fatalf("after the sweep: %s", row.State)
	}
	counting.Gets = 0
	res, err := e.Cases.DispatchRow(ctx, image, "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeSkipped || res.Entry.State != ledger.Expired {
		t.Fatalf("late stream record: %s %s, %v; want skipped, the row expired", res.Outcome, res.Entry.State, err)
	}
	if counting.Gets != 1 {
		t.Fatalf("%d reads of the row; want one", counting.Gets)
	}
	if row := e.Get(t, in.Key()); len(row.History) != 2 {
		t.Fatalf("history of %d entries; want 2 (claimed, expired): the late record wrote", len(row.History))
	}
}

// TestHeardStreamDoesNotCoverAWait: the marks say the stream was heard a
// second ago, but its largest lateness (40 s) was recorded 19.5 s ago, so
// its window ends during this claim's wait and a smaller lateness (5 s)
// may replace it. Heard says the stream moves; it does not keep the 40 s.
// The wait must not rest on those marks: the claim (30 s late) holds its
// slot, and the re-drive pass that runs once the 5 s replaced the 40 s
// hands nothing back.
func TestHeardStreamDoesNotCoverAWait(t *testing.T) {
	ctx := context.Background()
	e, sch, budget, prog := markedEnv(t, 2*time.Second, true)
	in, _, image := e.Claim(t, 75, ledger.Email, ledger.OutcomeClaimed)
	e.Clock.Advance(30 * time.Second)
	now := e.Clock.Now()
	stale := func(at time.Time) time.Time { return at.Add(-e.Cases.Policy.RedriveAfter) }
	if _, err := prog.Lagging(ctx, 40*time.Second, now.Add(-19500*time.Millisecond), stale(now.Add(-19500*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if _, err := prog.Lagging(ctx, 5*time.Second, now.Add(-time.Second), stale(now.Add(-time.Second))); err != nil {
		t.Fatal(err)
	}
	if _, err := budget.Reserve(ctx, ledger.Email, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	handedBack := -1
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error {
		e.Clock.Advance(d)
		if handedBack < 0 {
			// Another shard's batch, 5 s late, once the 40 s is stale;
			// then reconcile.
			at := e.Clock.Now()
			if _, err := prog.Lagging(ctx, 5*time.Second, at, stale(at)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Cases.Redrive(ctx, 100); err != nil {
				t.Fatal(err)
			}
			_, handedBack = sch.Last(in.Key())
		}
		return nil
	}
	if res, err := e.Cases.DispatchRow(ctx, image, "dispatch/stream"); err != nil || res.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	if handedBack != 0 {
		t.Fatalf("reconcile handed the waiting claim back %d times", handedBack)
	}
	if got := states(e.Get(t, in.Key())); len(got) != 4 || got[1] != ledger.Deferred {
		t.Fatalf("history %v; want the slot held (claimed, deferred, dispatching, accepted)", got)
	}
}

// TestPromptStreamWritesFewMarks: a prompt stream's batches, each less
// late than the largest lateness of the window this process saw, write no
// mark (the store would refuse it), except to say the stream was heard,
// once per HeardEvery; a batch later than the window's largest, or one
// after the window ended, writes.
func TestPromptStreamWritesFewMarks(t *testing.T) {
	ctx := context.Background()
	e, _, _, marks := markedEnv(t, 0, true)
	prog := &countingProgress{Progress: marks}
	e.Cases.Progress = prog
	batch := func(late time.Duration) {
		t.Helper()
		if err := e.Cases.Read(ctx, ledger.FromStream, e.Clock.Now().Add(-late)); err != nil {
			t.Fatal(err)
		}
	}
	step := func(name string, late time.Duration, wantWrites int) {
		t.Helper()
		before := prog.laggings
		batch(late)
		if got := prog.laggings - before; got != wantWrites {
			t.Fatalf("%s: %d mark writes, want %d", name, got, wantWrites)
		}
	}
	step("the first batch", 300*time.Millisecond, 1)
	for i := range 8 {
		e.Clock.Advance(500 * time.Millisecond)
		step(fmt.Sprintf("a batch less late, the stream heard %v ago", time.Duration(i+1)*500*time.Millisecond), 200*time.Millisecond, 0)
	}
	e.Clock.Advance(time.Second) // 5 s since the stream was last heard
	step("a batch less late, heard HeardEvery ago", 200*time.Millisecond, 1)
	e.Clock.Advance(time.Second)
	step("a batch later than the window's largest", 400*time.Millisecond, 1)
	e.Clock.Advance(time.Second)
	step("a batch as late as the window's largest", 400*time.Millisecond, 1)
	e.Clock.Advance(e.Cases.Policy.RedriveAfter + time.Millisecond)
	step("a batch less late after the window ended", 100*time.Millisecond, 1)
	if l := marks.Seen().Stream; l.Behind != 100*time.Millisecond {
		t.Fatalf("stored lateness after the window: %v, want 100ms", l.Behind)
	}
}
