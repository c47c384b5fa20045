package sim_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/sim"
)

// TestFindMutantSeeds writes, for each mutant, the first seed whose run is
// caught by an invariant caughtBy accepts, in the layout of
// testdata/seeds.txt, to the file SIMULATE_FIND_SEEDS names (skipped
// without it): the lines to store after a change that draws other runs.
//
//	SIMULATE_FIND_SEEDS=/tmp/seeds go test -run TestFindMutantSeeds -timeout 30m ./sim
func TestFindMutantSeeds(t *testing.T) {
	path := os.Getenv("SIMULATE_FIND_SEEDS")
	if path == "" {
		t.Skip("SIMULATE_FIND_SEEDS names the file to write")
	}
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	for _, m := range sim.Mutants {
		cfg := sim.Config{Mutant: m, ShrinkTime: time.Millisecond}
		found := false
		for seed := uint64(1); seed <= uint64(m.Budget(300)); seed++ {
			v := sim.RunSeed(seed, cfg).Violation
			if v != nil && slices.Contains(caughtBy[m], v.Invariant) {
				also := ""
				if len(v.Also) > 0 {
					also = fmt.Sprintf("  # and %v in the same step", v.Also)
				}
				fmt.Fprintf(out, "%-7d %-35s %s%s\n", seed, m, v.Invariant, also)
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s: no seed in %d is caught by one of %v", m, m.Budget(300), caughtBy[m])
		}
	}
}
