package ledgertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// NewProgress builds an empty ledger.Progress under test.
type NewProgress func(t *testing.T) ledger.Progress

// progressContract is what every ledger.Progress keeps.
var progressContract = []property[NewProgress]{
	{"no marks until one is written", progressEmpty},
	{"the queue's mark only moves forward", progressForwardOnly},
	{"the stream's lateness keeps the largest within its window", progressLagWindow},
	{"the stream, the queue and the hand-back are independent", progressIndependent},
	{"concurrent advances keep the furthest", progressConcurrent},
	{"the stream's lateness answers with the stored lag, and Seen keeps it", progressLaggingAnswers},
}

// RunProgressContract checks that a Progress starts with zero marks, moves
// the queue's mark only forward (a write that finds it further is no
// error), keeps the stream's largest lateness until it is stale, keeps the
// stream, the queue and the last hand-back apart, keeps the furthest of
// concurrent advances, and answers a lateness with the lag then stored,
// which Seen returns until a newer read.
func RunProgressContract(t *testing.T, newProgress NewProgress) {
	runProperties(t, progressContract, newProgress)
}

var progressT0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func marks(t *testing.T, p ledger.Progress) ledger.Marks {
	t.Helper()
	m, err := p.Marks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func advance(t *testing.T, p ledger.Progress, through, at time.Time) {
	t.Helper()
	if err := p.Advance(context.Background(), through, at); err != nil {
		t.Fatalf("advance the queue to %s: %v", through, err)
	}
}

func lagging(t *testing.T, p ledger.Progress, behind time.Duration, at time.Time) {
	t.Helper()
	if _, err := p.Lagging(context.Background(), behind, at, at.Add(-20*time.Second)); err != nil {
		t.Fatalf("lagging %s at %s: %v", behind, at, err)
	}
}

func progressEmpty(t *testing.T, newProgress NewProgress) {
	if m := marks(t, newProgress(t)); m != (ledger.Marks{}) {
		t.Fatalf("marks of an empty progress: %+v", m)
	}
}

func progressForwardOnly(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	advance(t, p, progressT0.Add(time.Minute), progressT0.Add(2*time.Minute))
	advance(t, p, progressT0, progressT0.Add(3*time.Minute)) // behind: ignored
	if got := marks(t, p).Queue; !got.Through.Equal(progressT0.Add(time.Minute)) || !got.At.Equal(progressT0.Add(2*time.Minute)) {
		t.Fatalf("queue mark %+v", got)
	}
	advance(t, p, progressT0.Add(90*time.Second), progressT0.Add(4*time.Minute))
	if got := marks(t, p).Queue; !got.Through.Equal(progressT0.Add(90*time.Second)) || !got.At.Equal(progressT0.Add(4*time.Minute)) {
		t.Fatalf("queue mark %+v after a later advance", got)
	}
}

func progressLagWindow(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	lagging(t, p, 40*time.Second, progressT0)
	lagging(t, p, 5*time.Second, progressT0.Add(10*time.Second)) // a faster shard, inside the window: kept out
	if got := marks(t, p).Stream; got.Behind != 40*time.Second || !got.At.Equal(progressT0) {
		t.Fatalf("stream lag %+v, want the 40 s the slowest batch showed", got)
	}
	lagging(t, p, 50*time.Second, progressT0.Add(15*time.Second))
	if got := marks(t, p).Stream; got.Behind != 50*time.Second || !got.At.Equal(progressT0.Add(15*time.Second)) {
		t.Fatalf("stream lag %+v, want the larger 50 s", got)
	}
	lagging(t, p, 2*time.Second, progressT0.Add(time.Minute)) // the 50 s is stale by then
	if got := marks(t, p).Stream; got.Behind != 2*time.Second || !got.At.Equal(progressT0.Add(time.Minute)) {
		t.Fatalf("stream lag %+v, want the fresh 2 s once the old one is stale", got)
	}
}

func progressIndependent(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	advance(t, p, progressT0, progressT0.Add(time.Second))
	if err := p.Redriven(context.Background(), progressT0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	m := marks(t, p)
	if m.Stream != (ledger.Lag{}) || !m.Queue.Through.Equal(progressT0) || !m.Queue.At.Equal(progressT0.Add(time.Second)) ||
		!m.Redriven.Equal(progressT0.Add(5*time.Second)) {
		t.Fatalf("marks %+v", m)
	}
	lagging(t, p, time.Second, progressT0.Add(6*time.Second))
	if m2 := marks(t, p); m2.Queue != m.Queue || !m2.Redriven.Equal(m.Redriven) || m2.Stream.Behind != time.Second {
		t.Fatalf("marks %+v after the stream's lag was written", m2)
	}
}

func progressConcurrent(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := p.Advance(context.Background(), progressT0.Add(time.Duration(i)*time.Second), progressT0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := marks(t, p).Queue.Through; !got.Equal(progressT0.Add(19 * time.Second)) {
		t.Fatalf("queue mark %s after concurrent advances, want the furthest", got)
	}
}

func progressLaggingAnswers(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	if m := p.Seen(); m != (ledger.Marks{}) {
		t.Fatalf("seen before any request: %+v", m)
	}
	ctx := context.Background()
	stale := func(at time.Time) time.Time { return at.Add(-20 * time.Second) }
	got, err := p.Lagging(ctx, 40*time.Second, progressT0, stale(progressT0))
	if err != nil || got != (ledger.Lag{Behind: 40 * time.Second, At: progressT0, Heard: progressT0}) {
		t.Fatalf("lagging 40 s answered %+v, %v; want the lag it wrote", got, err)
	}
	// Kept out by the larger lag in its window: the answer is the lag
	// kept, and the stream was heard now.
	got, err = p.Lagging(ctx, 5*time.Second, progressT0.Add(10*time.Second), stale(progressT0.Add(10*time.Second)))
	if err != nil || got != (ledger.Lag{Behind: 40 * time.Second, At: progressT0, Heard: progressT0.Add(10 * time.Second)}) {
		t.Fatalf("a smaller lateness in the window answered %+v, %v; want the 40 s kept, heard at +10s", got, err)
	}
	if m := marks(t, p); !m.Stream.Heard.Equal(progressT0.Add(10 * time.Second)) {
		t.Fatalf("stored heard %s, want +10s", m.Stream.Heard)
	}
	if err := p.Redriven(ctx, progressT0.Add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	// Seen is what the last request answered: the hand-back, written
	// since, is not in it until a request reads it back.
	if m := p.Seen(); m.Stream != got {
		t.Fatalf("seen %+v after the lateness, want its answer %+v", m.Stream, got)
	}
	m := marks(t, p)
	if seen := p.Seen(); seen != m || !seen.Redriven.Equal(progressT0.Add(11*time.Second)) {
		t.Fatalf("seen %+v after Marks read %+v", seen, m)
	}
}
