package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// readCounter counts the rows the sweeps' listings return: the rows a
// DynamoDB store reads.
type readCounter struct {
	ledger.Store
	rows int
}

func (c *readCounter) ListOpen(ctx context.Context, s ledger.State, dueBy time.Time, limit int) ([]ledger.Entry, error) {
	rows, err := c.Store.ListOpen(ctx, s, dueBy, limit)
	c.rows += len(rows)
	return rows, err
}

func (c *readCounter) ListExpired(ctx context.Context, s ledger.State, by time.Time, limit int) ([]ledger.Entry, error) {
	rows, err := c.Store.ListExpired(ctx, s, by, limit)
	c.rows += len(rows)
	return rows, err
}

// TestSweepsReadOnlyDueClaims: claims the stream has not yet had
// RedriveAfter to deliver are read by no sweep (re-drive, reconcile,
// expire) and counted by no figure; a claim is read once it is due for a
// re-drive the stream no longer owes, or expired.
func TestSweepsReadOnlyDueClaims(t *testing.T) {
	ctx := context.Background()
	e, sch := ledgertest.PacedScenario(t)
	prog := &memstore.Progress{}
	e.Cases.Progress = prog
	reads := &readCounter{Store: e.Cases.Store}
	e.Cases.Store = reads
	after := e.Cases.Policy.RedriveAfter
	var keys []string
	for i := range 20 {
		in, _, _ := e.Claim(t, 500+i, ledger.Email, ledger.OutcomeClaimed) // challenges of ten minutes
		keys = append(keys, in.Key())
	}
	pass := func() (handed int, stats map[ledger.State]ledger.StateStats) {
		t.Helper()
		reads.rows = 0
		before := sch.Count()
		if _, err := e.Cases.Reconcile(ctx, "reconcile/test", 100); err != nil {
			t.Fatal(err)
		}
		stats, err := e.Cases.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cases.Redrive(ctx, 100); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cases.ExpireSweep(ctx, "expire/test", 100); err != nil {
			t.Fatal(err)
		}
		return sch.Count() - before, stats
	}

	e.Clock.Advance(after - time.Second)
	if handed, stats := pass(); reads.rows != 0 || handed != 0 || stats[ledger.Claimed].Count != 0 {
		t.Fatalf("claims not yet due: the sweeps read %d rows, handed back %d, counted %d due", reads.rows, handed, stats[ledger.Claimed].Count)
	}
	// Due for a re-drive, but the stream runs 30 s late and moves: it
	// still owes them, and they are not read.
	e.Clock.Advance(2 * time.Second)
	_, _ = prog.Lagging(ctx, 30*time.Second, e.Clock.Now(), e.Clock.Now().Add(-after))
	if handed, _ := pass(); reads.rows != 0 || handed != 0 {
		t.Fatalf("claims the stream owes: the sweeps read %d rows, handed back %d", reads.rows, handed)
	}
	// The stream is on time (the late batch's mark has gone stale): the
	// claims were lost, and are read and handed back.
	e.Clock.Advance(time.Second)
	_, _ = prog.Lagging(ctx, 0, e.Clock.Now(), e.Clock.Now())
	if handed, stats := pass(); reads.rows != len(keys) || handed != len(keys) || stats[ledger.Claimed].Count != 0 {
		t.Fatalf("lost claims: the sweeps read %d rows and handed back %d, want %d; counted %d expired", reads.rows, handed, len(keys), stats[ledger.Claimed].Count)
	}
	// Past their expiry: the figures count them, and the expire sweep
	// closes them (re-drive leaves expired rows to it).
	e.Clock.Advance(10 * time.Minute)
	_ = prog.Advance(ctx, e.Clock.Now(), e.Clock.Now())
	_, stats := pass()
	if got := stats[ledger.Claimed].Count; got != len(keys) {
		t.Fatalf("expired claims counted %d, want %d", got, len(keys))
	}
	for _, k := range keys {
		if row, _ := e.Store.Get(ctx, k); row.State != ledger.Expired {
			t.Fatalf("%s is %s after the expire sweep, want expired", k, row.State)
		}
	}
}
