package sim_test

import (
	"bufio"
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/sim"
)

// testSeeds is the bounded run of `go test`; SIMULATE_TEST_SEEDS changes
// it (`make simulate` is the full-size run).
func testSeeds(t *testing.T) int {
	if v := os.Getenv("SIMULATE_TEST_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SIMULATE_TEST_SEEDS=%q: want a positive number", v)
		}
		return n
	}
	return 300
}

// The protocol holds every invariant over the bounded run.
func TestSimulate(t *testing.T) {
	var out bytes.Buffer
	sum := sim.Simulate(sim.Options{Seeds: testSeeds(t), ShrinkTime: 10 * time.Second, MaxReports: 3}, &out)
	t.Log("\n" + out.String())
	if sum.Violations != 0 {
		t.Fatalf("%d seeds violated an invariant (reports above)", sum.Violations)
	}
	if sum.Steps < 20*sum.Seeds {
		t.Fatalf("%d steps over %d seeds: the runs are not exercising the protocol", sum.Steps, sum.Seeds)
	}
	want := "simulate: seeds=" + strconv.Itoa(sum.Seeds) + " steps=" + strconv.Itoa(sum.Steps) + " violations=0 mutants_caught=0/0"
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); lines[len(lines)-1] != want {
		t.Fatalf("last line %q, want %q", lines[len(lines)-1], want)
	}
}

// mutantBudget is how many seeds each mutant may take to be caught in CI;
// mutantBudgets raises it for a mutant whose fault needs a rarer schedule
// (a send stalled past its row's expiry: seed 170 of the first 2,000).
const mutantBudget = 100

var mutantBudgets = map[sim.Mutant]int{sim.SendNoDeadline: 400}

// Each mutant is caught within the budget, by an invariant that names what
// it broke.
func TestMutantsAreCaught(t *testing.T) {
	caughtBy := map[sim.Mutant][]string{
		// A write without its condition lands on a row another worker moved
		// on: its history entry links to a stale one, a terminal row moves
		// back, or the message is sent twice.
		sim.DispatchNoStateCondition:  {"hash-chain", "illegal-transition", "duplicate-send", "send-outside-key-window"},
		sim.DispatchNoExpiryCondition: {"late-attempt", "late-send"},
		sim.ClaimIgnoresExistingRow:   {"hash-chain", "illegal-transition", "duplicate-send", "send-outside-key-window"},
		sim.ReconcileUnknownToClaimed: {"unknown-exit", "illegal-transition", "duplicate-send"},
		sim.FallbackNoWait:            {"fallback-two-channels"},
		sim.SendNoDeadline:            {"late-arrival"},
	}
	for _, m := range sim.Mutants {
		t.Run(string(m), func(t *testing.T) {
			budget := mutantBudget
			if b, ok := mutantBudgets[m]; ok {
				budget = b
			}
			mr := sim.HuntMutant(m, 1, budget, sim.Config{ShrinkTime: time.Second})
			if mr.Violation == nil {
				t.Fatalf("not caught in %d seeds", mr.Seeds)
			}
			v := mr.Violation
			t.Logf("caught at seed %d by %s %v (%d steps, minimized to %d)", mr.Seed, v.Invariant, v.Also, v.FirstSteps, v.Steps)
			if !slices.Contains(caughtBy[m], v.Invariant) {
				t.Fatalf("caught by %s, want one of %v:\n%s", v.Invariant, caughtBy[m], v.Report)
			}
			if m == sim.ReconcileUnknownToClaimed && slices.Contains(append(v.Also, v.Invariant), "hash-chain") {
				t.Fatalf("the mutant writes a broken history entry, so it is caught for the wrong reason:\n%s", v.Report)
			}
			if !strings.Contains(v.Report, "seed "+strconv.FormatUint(mr.Seed, 10)) || !strings.Contains(v.Report, "rows involved:") {
				t.Fatalf("the report does not name the seed and the rows:\n%s", v.Report)
			}
		})
	}
}

// The same seed gives the same run, byte for byte, and the same minimized
// failure.
func TestSameSeedSameRun(t *testing.T) {
	for _, seed := range []uint64{3, 17} {
		a := sim.RunSeed(seed, sim.Config{Trace: true})
		b := sim.RunSeed(seed, sim.Config{Trace: true})
		if a.Trace != b.Trace || a.Digest != b.Digest || a.Steps != b.Steps {
			t.Fatalf("seed %d: two runs differ (%d and %d steps, digests %x and %x)", seed, a.Steps, b.Steps, a.Digest, b.Digest)
		}
		if !strings.Contains(a.Trace, "schedule:") || a.Steps == 0 {
			t.Fatalf("seed %d: empty trace:\n%s", seed, a.Trace)
		}
	}
	cfg := sim.Config{Mutant: sim.ClaimIgnoresExistingRow, ShrinkTime: time.Minute}
	a, b := sim.RunSeed(1, cfg), sim.RunSeed(1, cfg)
	if a.Violation == nil || b.Violation == nil {
		t.Fatal("seed 1 no longer catches the mutant; pick another")
	}
	if a.Violation.Report != b.Violation.Report || a.Schedules != b.Schedules {
		t.Fatalf("the minimized failures differ:\n%s\n---\n%s", a.Violation.Report, b.Violation.Report)
	}
}

// Stored seeds replay: the runs that found real violations (now fixed) and
// one run per mutant. testdata/seeds.txt says why each is there.
func TestStoredSeeds(t *testing.T) {
	f, err := os.Open("testdata/seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 3 {
			t.Fatalf("testdata/seeds.txt: %q: want <seed> <protocol|mutant> <invariant|none>", sc.Text())
		}
		seed, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		m := sim.Protocol
		if fields[1] != "protocol" {
			if m, err = sim.ParseMutant(fields[1]); err != nil {
				t.Fatal(err)
			}
		}
		n++
		t.Run(fields[0]+"/"+fields[1], func(t *testing.T) {
			r := sim.RunSeed(seed, sim.Config{Mutant: m, ShrinkTime: 500 * time.Millisecond})
			got := "none"
			if r.Violation != nil {
				got = r.Violation.Invariant
			}
			if got != fields[2] {
				report := ""
				if r.Violation != nil {
					report = r.Violation.Report
				}
				t.Fatalf("violation %s, want %s\n%s", got, fields[2], report)
			}
		})
	}
	if err := sc.Err(); err != nil || n == 0 {
		t.Fatalf("testdata/seeds.txt: %d seeds, %v", n, err)
	}
}
