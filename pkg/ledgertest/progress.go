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
	{"a mark only moves forward", progressForwardOnly},
	{"the sources and the hand-back are independent", progressIndependent},
	{"concurrent advances keep the furthest", progressConcurrent},
}

// RunProgressContract checks that a Progress starts with zero marks, moves a
// mark only forward (a write that finds it further is no error), keeps the
// stream, the queue and the last hand-back apart, and keeps the furthest of
// concurrent advances.
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

func advance(t *testing.T, p ledger.Progress, src ledger.Source, through, at time.Time) {
	t.Helper()
	if err := p.Advance(context.Background(), src, through, at); err != nil {
		t.Fatalf("advance %s to %s: %v", src, through, err)
	}
}

func progressEmpty(t *testing.T, newProgress NewProgress) {
	if m := marks(t, newProgress(t)); m != (ledger.Marks{}) {
		t.Fatalf("marks of an empty progress: %+v", m)
	}
}

func progressForwardOnly(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	advance(t, p, ledger.FromStream, progressT0.Add(time.Minute), progressT0.Add(2*time.Minute))
	advance(t, p, ledger.FromStream, progressT0, progressT0.Add(3*time.Minute)) // behind: ignored
	want := ledger.Mark{Through: progressT0.Add(time.Minute), At: progressT0.Add(2 * time.Minute)}
	if got := marks(t, p).Stream; !got.Through.Equal(want.Through) || !got.At.Equal(want.At) {
		t.Fatalf("stream mark %+v, want %+v", got, want)
	}
	advance(t, p, ledger.FromStream, progressT0.Add(90*time.Second), progressT0.Add(4*time.Minute))
	if got := marks(t, p).Stream; !got.Through.Equal(progressT0.Add(90*time.Second)) || !got.At.Equal(progressT0.Add(4*time.Minute)) {
		t.Fatalf("stream mark %+v after a later advance", got)
	}
}

func progressIndependent(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	advance(t, p, ledger.FromQueue, progressT0, progressT0.Add(time.Second))
	if err := p.Redriven(context.Background(), progressT0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	m := marks(t, p)
	if !m.Stream.Through.IsZero() || !m.Queue.Through.Equal(progressT0) || !m.Queue.At.Equal(progressT0.Add(time.Second)) ||
		!m.Redriven.Equal(progressT0.Add(5*time.Second)) {
		t.Fatalf("marks %+v", m)
	}
}

func progressConcurrent(t *testing.T, newProgress NewProgress) {
	p := newProgress(t)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := p.Advance(context.Background(), ledger.FromQueue, progressT0.Add(time.Duration(i)*time.Second), progressT0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := marks(t, p).Queue.Through; !got.Equal(progressT0.Add(19 * time.Second)) {
		t.Fatalf("queue mark %s after concurrent advances, want the furthest", got)
	}
}
