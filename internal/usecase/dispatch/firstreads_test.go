package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// readsTogether is memstore.FirstReads over the env's own ports, counting
// its calls.
type readsTogether struct {
	memstore.FirstReads
	calls int
}

func (r *readsTogether) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	r.calls++
	return r.FirstReads.ReadFirst(ctx, q)
}

// countingChallenges and countingContent count the calls the dispatch
// makes on its own ports.
type countingChallenges struct {
	ledger.Challenges
	newest int
}

func (c *countingChallenges) Newest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	c.newest++
	return c.Challenges.Newest(ctx, ref)
}

type countingContent struct {
	ledger.ContentStore
	gets int
}

func (c *countingContent) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets++
	return c.ContentStore.Get(ctx, key)
}

// togetherEnv is a limits env whose dispatch reads its first three values
// together (when together is set), with its ports counted.
func togetherEnv(t *testing.T, together bool) (*ledgertest.Scenario, *countingChallenges, *countingContent, *readsTogether) {
	t.Helper()
	e, lim := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 3, Window: time.Hour}, Supersede: true})
	ch := &countingChallenges{Challenges: lim}
	ct := &countingContent{ContentStore: e.Cases.Content}
	r := &readsTogether{FirstReads: memstore.FirstReads{Store: e.Cases.Store, Challenges: lim, Content: e.Cases.Content}}
	e.Cases.Challenges, e.Cases.Content = ch, ct
	if together {
		e.Cases.FirstReads = r
	}
	return e, ch, ct, r
}

// TestFirstReadsAnswerTheFirstNewestAndContent: a stream record whose
// dispatch reads its row, newest challenge and content together makes
// neither of the other two reads again (docs/design.md, "A decision is
// made from the row"); without FirstReads each is its own read.
func TestFirstReadsAnswerTheFirstNewestAndContent(t *testing.T) {
	for _, together := range []bool{true, false} {
		e, ch, ct, r := togetherEnv(t, together)
		in := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "acct-1", 0)
		image := e.Get(t, in.Key())
		ch.newest, ct.gets = 0, 0
		res, err := e.Cases.DispatchRow(context.Background(), image, "dispatch/stream")
		if err != nil || res.Outcome != ledger.OutcomeAccepted {
			t.Fatalf("together=%v: %s %v", together, res.Outcome, err)
		}
		want := 1 // the ports' own reads
		if together {
			want = 0
			if r.calls != 1 {
				t.Fatalf("FirstReads called %d times, want 1", r.calls)
			}
		}
		if ch.newest != want || ct.gets != want {
			t.Fatalf("together=%v: Newest %d, content Get %d; want %d each", together, ch.newest, ct.gets, want)
		}
	}
}

// TestFirstReadsSupersedeAndReadAfreshAfterAWait: the newest challenge of
// the first read supersedes an older row, and one claimed while the row
// waits for its slot is read afresh, not taken from the first read.
func TestFirstReadsSupersedeAndReadAfreshAfterAWait(t *testing.T) {
	e, ch, _, _ := togetherEnv(t, true)
	older := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "acct-1", 0)
	e.ClaimTo(t, 2, ledger.Email, "p@example.test", "acct-1", time.Minute)
	res, err := e.Cases.DispatchRow(context.Background(), e.Get(t, older.Key()), "dispatch/stream")
	if err != nil || res.Outcome != ledger.OutcomeSuppressed || ch.newest != 0 {
		t.Fatalf("older: %s %v after %d Newest calls; want suppressed, from the first read", res.Outcome, err, ch.newest)
	}

	e, ch, _, _ = togetherEnv(t, true)
	e.Cases.Scheduler = &ledgertest.RecordingScheduler{}
	e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 0.2}}
	e.Cases.Policy.BudgetWait = 10 * time.Second
	warm := e.ClaimTo(t, 1, ledger.Email, "other@example.test", "", 0)
	ledgertest.MustDispatch(t, e, warm.Key(), ledger.OutcomeAccepted) // the next slot is 5 s away
	waiting := e.ClaimTo(t, 2, ledger.Email, "p@example.test", "acct-1", 0)
	claimedNewer := false
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error {
		if !claimedNewer {
			claimedNewer = true
			e.ClaimTo(t, 3, ledger.Email, "p@example.test", "acct-1", time.Minute)
		}
		e.Clock.Advance(d)
		return nil
	}
	ch.newest = 0
	res, err = e.Cases.DispatchRow(context.Background(), e.Get(t, waiting.Key()), "dispatch/stream")
	if err != nil || res.Entry.Reason != "superseded by challenge chal-000003" || ch.newest != 1 {
		t.Fatalf("waited: %s %q %v after %d Newest calls; want superseded by the challenge claimed during the wait, read afresh once",
			res.Outcome, res.Entry.Reason, err, ch.newest)
	}
}
