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
	if raceEnabled {
		return 60 // the race detector makes a run about ten times slower
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

// caughtBy names, per mutant, the invariants that may catch it: those that
// name what it broke.
var caughtBy = map[sim.Mutant][]string{
	// A write without its condition lands on a row another worker moved
	// on: its history entry links to a stale one, a terminal row moves
	// back, or the message is sent twice.
	sim.DispatchNoStateCondition:        {"hash-chain", "illegal-transition", "duplicate-send", "send-outside-key-window"},
	sim.DispatchNoExpiryCondition:       {"late-attempt", "late-send"},
	sim.ClaimIgnoresExistingRow:         {"hash-chain", "illegal-transition", "duplicate-send", "send-outside-key-window"},
	sim.ReconcileUnknownToClaimed:       {"unknown-exit", "illegal-transition", "duplicate-send"},
	sim.FallbackNoWait:                  {"fallback-two-channels"},
	sim.SendNoDeadline:                  {"late-arrival"},
	sim.ResetAsRejection:                {"rejected-without-refusal", "fallback-two-channels"},
	sim.ExpireMarginMinutes:             {"expired-early"},
	sim.RetryBudgetOffByOne:             {"attempt-bound"},
	sim.WindowFromLastAttempt:           {"retry-outside-key-window", "send-outside-key-window"},
	sim.BeginStaleClock:                 {"late-call"},
	sim.LookupByChallenge:               {"accepted-without-ack", "unknown-exit"},
	sim.ProofShapeOnly:                  {"forged-event-recorded", "accepted-without-ack"},
	sim.ReconcileWithoutEvents:          {"evidence-sent-again"},
	sim.BounceLosesPermanent:            {"hard-bounce-hand-over"},
	sim.FallbackWaitZero:                {"hard-bounce-hand-over"},
	sim.RefusalQuotesRecipient:          {"secret-leak"},
	sim.ReconcileSweepsDispatchingTwice: {"liveness"},
	sim.LimitCapOffByOne:                {"cap-exceeded"},
	sim.LimitCountsAgain:                {"counted-twice", "counts-conserved"},
	sim.LimitFullAsRepeat:               {"limited-sent", "cap-exceeded"},
	sim.RegionDefaultUS:                 {"refused-region-sent"},
	sim.KindAsMobile:                    {"refused-kind-sent"},
	sim.FixedWindowCounters:             {"cap-exceeded"},
	sim.SupersedeLastNoted:              {"superseded-sent"},
	sim.DecryptFailureAsUnavailable:     {"quarantined-unsent"},
	sim.LimitIndexByItem:                {"panic"},
	sim.TimelineWrongIndex:              {"superseded-starve-newest"},
	sim.ReleaseInReleaseWindows:         {"counts-conserved"},
	sim.DeferralDropsSubject:            {"superseded-sent"},
	sim.QueueMarkAtTTL:                  {"liveness-sent"},
	sim.CounterWithoutKey:               {"sent-uncounted"},
	sim.SendGuardMillis:                 {"late-arrival", "call-outlives-deadline"},
	sim.EntryCodeFromRow:                {"hash-chain"},
	sim.ImageAsRow:                      {"forged-record-decided", "expired-early"},
	sim.DeadlineBeforeWrite:             {"call-outlives-deadline", "late-arrival"},
	sim.LifetimeLessMargin:              {"lifetime-bound"},
	sim.IssuedAtDropped:                 {"lifetime-bound", "superseded-sent"},
	sim.RetryLeaseBeforeWrite:           {"call-outlives-deadline", "retry-outside-key-window", "send-outside-key-window"},
	sim.ReleaseNoOp:                     {"unsent-count-given-back"},
	sim.VerifyHashesOnly:                {"tamper-named"},
	sim.KMSErrorAsValid:                 {"kms-error-not-verified"},
	sim.MarginEqualsGuard:               {"late-attempt"},
	sim.VerifyCountsOnly:                {"tamper-named"},
	sim.VerifyNoHoles:                   {"tamper-named"},
	sim.VerifySkipsSignature:            {"tamper-named"},
	// A challenge claimed during the slot wait, after the first reads,
	// does not supersede: the older one is sent.
	sim.FirstReadsReused: {"superseded-sent"},
}

// Each mutant is caught at the first seed that catches it (testdata/seeds.txt;
// `make simulate` hunts every mutant from seed 1 and fails if one survives),
// by an invariant that names what it broke, with a report that names the
// seed and the rows.
func TestMutantsAreCaught(t *testing.T) {
	seeds := storedSeeds(t)
	for _, m := range sim.Mutants {
		t.Run(string(m), func(t *testing.T) {
			cfg := sim.Config{Mutant: m, ShrinkTime: 100 * time.Millisecond}
			var seed uint64
			var v *sim.Violation
			for _, s := range seeds {
				if s.mutant == m && v == nil {
					seed = s.seed
					v = sim.RunSeed(seed, cfg).Violation
				}
			}
			if seed == 0 {
				t.Fatal("no seed in testdata/seeds.txt catches it")
			}
			if v == nil {
				// A change to the protocol's port calls or to the world
				// draws other runs from the same seeds: hunt as make
				// simulate does, and say which seed to store.
				mr := sim.HuntMutant(m, 1, m.Budget(300), cfg)
				if mr.Violation == nil {
					t.Fatalf("not caught: not at its stored seed %d, nor in %d seeds from seed 1", seed, mr.Seeds)
				}
				t.Logf("stored seed %d no longer catches it; seed %d does (update testdata/seeds.txt)", seed, mr.Seed)
				seed, v = mr.Seed, mr.Violation
			}
			t.Logf("caught at seed %d by %s %v (%d steps, minimized to %d)", seed, v.Invariant, v.Also, v.FirstSteps, v.Steps)
			if !slices.Contains(caughtBy[m], v.Invariant) {
				t.Fatalf("caught by %s, want one of %v:\n%s", v.Invariant, caughtBy[m], v.Report)
			}
			if m == sim.ReconcileUnknownToClaimed && slices.Contains(append(v.Also, v.Invariant), "hash-chain") {
				t.Fatalf("the mutant writes a broken history entry, so it is caught for the wrong reason:\n%s", v.Report)
			}
			if !strings.Contains(v.Report, "seed "+strconv.FormatUint(seed, 10)) || !strings.Contains(v.Report, "rows involved:") {
				t.Fatalf("the report does not name the seed and the rows:\n%s", v.Report)
			}
		})
	}
}

// Every invariant has a mutant that a stored seed shows it catching.
func TestEveryInvariantHasAMutant(t *testing.T) {
	caught := map[string]bool{}
	for _, s := range storedSeeds(t) {
		if s.mutant != sim.Protocol {
			caught[s.invariant] = true
		}
	}
	for _, inv := range sim.Invariants {
		switch inv {
		case "duplicate-send", "send-outside-key-window", "late-send", "unknown-exit", "illegal-transition":
			// The first mutants' findings beside their first violation
			// (caughtBy): the same step violates them too.
			continue
		}
		if !caught[inv] {
			t.Errorf("no stored mutant seed is caught by %s", inv)
		}
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
	// A short run, so that minimizing it ends by itself well within the
	// time allowed (a minimization cut short by time need not repeat): the
	// stored seed of a mutant whose runs are short.
	cfg := sim.Config{Mutant: sim.RefusalQuotesRecipient, ShrinkTime: time.Minute}
	if raceEnabled {
		// Minimizing to the end takes minutes under the race detector: the
		// seed's own failing run is compared, not its minimization.
		cfg.ShrinkTime = time.Millisecond
	}
	var seed uint64
	for _, s := range storedSeeds(t) {
		if s.mutant == cfg.Mutant && seed == 0 {
			seed = s.seed
		}
	}
	a, b := sim.RunSeed(seed, cfg), sim.RunSeed(seed, cfg)
	if a.Violation == nil || b.Violation == nil {
		t.Fatalf("seed %d no longer catches %s; store the seed that does (testdata/seeds.txt)", seed, cfg.Mutant)
	}
	if a.Digest != b.Digest || a.Violation.Invariant != b.Violation.Invariant || a.Violation.FirstSteps != b.Violation.FirstSteps {
		t.Fatalf("the failing runs differ: %s after %d steps, %s after %d", a.Violation.Invariant, a.Violation.FirstSteps, b.Violation.Invariant, b.Violation.FirstSteps)
	}
	if raceEnabled {
		return
	}
	if a.Violation.Report != b.Violation.Report || a.Schedules != b.Schedules {
		t.Fatalf("the minimized failures differ:\n%s\n---\n%s", a.Violation.Report, b.Violation.Report)
	}
}

// storedSeed is one line of testdata/seeds.txt.
type storedSeed struct {
	seed      uint64
	mutant    sim.Mutant
	invariant string
}

func storedSeeds(t *testing.T) []storedSeed {
	t.Helper()
	f, err := os.Open("testdata/seeds.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []storedSeed
	sc := bufio.NewScanner(f)
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
		out = append(out, storedSeed{seed: seed, mutant: m, invariant: fields[2]})
	}
	if err := sc.Err(); err != nil || len(out) == 0 {
		t.Fatalf("testdata/seeds.txt: %d seeds, %v", len(out), err)
	}
	return out
}

// Stored seeds of the protocol replay without a violation: the runs that
// found real violations (now fixed). The mutants' lines are replayed by
// TestMutantsAreCaught. testdata/seeds.txt says why each is there.
func TestStoredSeeds(t *testing.T) {
	for _, s := range storedSeeds(t) {
		if s.mutant != sim.Protocol {
			continue
		}
		t.Run(strconv.FormatUint(s.seed, 10), func(t *testing.T) {
			r := sim.RunSeed(s.seed, sim.Config{ShrinkTime: 500 * time.Millisecond})
			got := "none"
			if r.Violation != nil {
				got = r.Violation.Invariant
			}
			if got != s.invariant {
				report := ""
				if r.Violation != nil {
					report = r.Violation.Report
				}
				t.Fatalf("violation %s, want %s\n%s", got, s.invariant, report)
			}
		})
	}
}
