package sim

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// randChooser draws from a seeded generator, for tests that need runs
// without rapid's recording.
type randChooser struct{ r *rand.Rand }

func (c randChooser) pick(n int, _ string) int { return c.r.IntN(n) }
func (c randChooser) coin(k int, _ string) bool {
	return c.r.IntN(1<<k) == 0
}

// The mutants' copy of ledger's history hash agrees with ledger on every
// entry the real protocol writes.
func TestEventHashMatchesLedger(t *testing.T) {
	events := 0
	for seed := range uint64(20) {
		s := newSim(randChooser{rand.New(rand.NewPCG(seed, 1))}, Protocol)
		if v := s.run(); v != nil {
			t.Fatalf("seed %d: %s", seed, v)
		}
		for _, k := range s.w.keys {
			e, ok := s.peek(k)
			if !ok {
				continue
			}
			for i, ev := range e.History {
				if got := eventHash(k, ev); got != ev.Hash {
					t.Fatalf("seed %d, row %s, entry %d (%s): hash %s, ledger wrote %s", seed, s.label(k), i, ev.Kind, got, ev.Hash)
				}
				events++
			}
		}
	}
	if events < 100 {
		t.Fatalf("only %d history entries checked", events)
	}
}

// The liveness invariant has teeth: without the operator, a quarantined
// row never ends.
func TestLivenessNeedsTheOperator(t *testing.T) {
	saved := periods[fnOperator]
	periods[fnOperator] = 100 * time.Hour
	defer func() { periods[fnOperator] = saved }()
	for seed := uint64(1); seed <= 200; seed++ {
		r := RunSeed(seed, Config{ShrinkTime: time.Second})
		if r.Violation == nil {
			continue
		}
		if r.Violation.Invariant != invLiveness || !strings.Contains(r.Violation.Detail, "quarantined") {
			t.Fatalf("seed %d: %s: %s", seed, r.Violation.Invariant, r.Violation.Detail)
		}
		return
	}
	t.Fatal("no liveness violation in 200 seeds without an operator")
}
