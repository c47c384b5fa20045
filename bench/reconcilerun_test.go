package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// noScheduler takes hand-offs and drops them; a reconcile run over rows
// that are not due makes none.
type noScheduler struct{ n int }

func (s *noScheduler) Schedule(context.Context, string, time.Time) error { s.n++; return nil }

// runReads is what one reconcile run read.
type runReads struct {
	open     int
	counts   Counts
	rcu      float64
	rcuByOp  map[string]float64
	handed   int
	seen     int
	duration time.Duration
}

// reconcileRunReport measures the reads of one reconcile run (what the
// reconcile function does per invocation: Reconcile, the open-row figures,
// Redrive) among sc.runSmall and then sc.runLarge open rows that are not
// due: claims the stream has not yet had REDRIVE_AFTER to deliver and
// dispatching rows inside their lease, half each, on a service whose clock
// stands a second after they were written.
func reconcileRunReport(t *testing.T, rep *Report, sc scale) {
	ctx := context.Background()
	r := newRig(t, "bench-run")
	r.addBudget(t, "bench-run")
	reads := &ReadCapacity{}
	db := dynamodb.NewFromConfig(r.cfg, r.counter.Option, reads.Option)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	sch := &noScheduler{}
	cases := r.service(db, newClock(), nil, ackTransport{})
	cases.Clock = func() time.Time { return t0.Add(time.Second) }
	cases.Scheduler = sch
	cases.Progress = dynamostore.NewProgress(db, r.budget)
	const limit = 500 // the deployed SWEEP_LIMIT
	next := 0
	seed := func(n int) {
		start := time.Now()
		batchWrite(t, r.raw, r.ledger, items(t, claimedRow, next, n/2, t0))
		batchWrite(t, r.raw, r.ledger, items(t, dispatchingRow, next+n/2, n-n/2, t0))
		next += n
		t.Logf("seeded %d open rows in %s", n, time.Since(start).Round(time.Millisecond))
	}
	run := func(open int) runReads {
		r.counter.Reset()
		reads.Reset()
		handed := sch.n
		start := time.Now()
		seen := 0
		rec, err := cases.Reconcile(ctx, "reconcile/bench", limit)
		if err == nil {
			err = rec.Err()
		}
		if err == nil {
			_, err = cases.Stats(ctx)
		}
		var red ledger.SweepReport
		if err == nil {
			red, err = cases.Redrive(ctx, limit)
		}
		if err == nil {
			err = red.Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		seen = rec.Seen + red.Seen
		return runReads{open: open, counts: r.counter.Snapshot(), rcu: reads.Total(), rcuByOp: reads.Units(),
			handed: sch.n - handed, seen: seen, duration: time.Since(start)}
	}
	seed(sc.runSmall)
	small := run(sc.runSmall)
	seed(sc.runLarge - sc.runSmall)
	large := run(sc.runLarge)
	for _, rr := range []runReads{small, large} {
		// A run that read rows is reported (its ratio misses), never failed;
		// a run that made no request did not run.
		if rr.counts.Total() == 0 {
			t.Fatalf("a run among %d open rows made no request", rr.open)
		}
	}
	reqRatio := float64(large.counts.Total()) / float64(small.counts.Total())
	rcuRatio := large.rcu / max(small.rcu, 1e-9)
	labels := r.labels()
	rep.Add(Figure{
		Name:     fmt.Sprintf("Sweeps cost what is due: a reconcile run's reads (%s vs %s open rows not due)", thousands(sc.runLarge), thousands(sc.runSmall)),
		Measured: fmt.Sprintf("RCU ×%.2f (%.1f vs %.1f), requests ×%.2f (%d vs %d)", rcuRatio, large.rcu, small.rcu, reqRatio, large.counts.Total(), small.counts.Total()),
		Target:   "ratio ≤ 1.1",
		Verdict:  Check(rcuRatio <= 1.1 && reqRatio <= 1.1),
		Note: fmt.Sprintf("One reconcile run as the function makes it (Reconcile, the open-row figures of ledger.ReadStats, Redrive with the dispatch marks; SWEEP_LIMIT %d) on dynamostore, "+
			"among open rows that are not due: half claims made a second before the run (due for a re-drive only REDRIVE_AFTER, %s, after their claim; challenges of 10 minutes), half dispatching rows inside their lease. "+
			"Requests among %s: %s; among %s: %s. RCU as ministack reports them for ReturnConsumedCapacity=TOTAL (BatchGetItem sized from its items): %s vs %s. "+
			"Rows listed (read whole) and handed back: %d and %d among %s, %d and %d among %s. The index is queried for what is due (a claim is indexed at its re-drive time, or its expiry if sooner, and carries its expiry for the expire sweep and the figures); before that change the re-drive read up to SWEEP_LIMIT claims by expiry on every pass, due or not. Time: %s vs %s (not a target).",
			limit, cases.Policy.RedriveAfter,
			thousands(sc.runSmall), small.counts.Format(labels), thousands(sc.runLarge), large.counts.Format(labels),
			formatUnits(small.rcuByOp), formatUnits(large.rcuByOp),
			small.seen, small.handed, thousands(sc.runSmall), large.seen, large.handed, thousands(sc.runLarge), small.duration.Round(time.Millisecond), large.duration.Round(time.Millisecond)),
	})
}

// formatUnits writes units by operation: "GetItem 1, Query 12".
func formatUnits(u map[string]float64) string {
	var parts []string
	for _, op := range slices.Sorted(maps.Keys(u)) {
		parts = append(parts, fmt.Sprintf("%s %g", op, u[op]))
	}
	if len(parts) == 0 {
		return "none reported"
	}
	return strings.Join(parts, ", ")
}
