package sim

import (
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// rapidChooser draws every choice from rapid, which records them, replays
// them, and shrinks them toward 0 to minimize a failing run.
type rapidChooser struct {
	t    *rapid.T
	ints map[int]*rapid.Generator[int]
}

var boolGen = rapid.Bool()

func (c *rapidChooser) pick(n int, label string) int {
	if n <= 1 {
		return 0
	}
	g := c.ints[n]
	if g == nil {
		g = rapid.IntRange(0, n-1)
		c.ints[n] = g
	}
	return g.Draw(c.t, label)
}

func (c *rapidChooser) coin(k int, label string) bool {
	for range k {
		if !boolGen.Draw(c.t, label) {
			return false
		}
	}
	return true
}

// Stats counts what runs did.
type Stats struct {
	Steps        int
	Faults       map[string]int // by kind, including dropped and duplicated triggers and clock jumps
	Answers      map[string]int // provider answers to sends
	Final        map[ledger.State]int
	Paths        map[string]int // how often each of Paths was reached
	Sends        int            // transport calls
	Recorded     int            // messages providers took
	LateArrivals int            // sends that reached the provider at or after expires_at (see RELIABILITY.md)
	// MaxLateness is how long after expires_at the latest of them arrived.
	MaxLateness  time.Duration
	GivenUp      int // stream records given up after their retries
	DeadLettered int // dispatch queue messages dead-lettered
}

func (st *Stats) add(o Stats) {
	st.Steps += o.Steps
	st.Sends += o.Sends
	st.Recorded += o.Recorded
	st.LateArrivals += o.LateArrivals
	st.MaxLateness = max(st.MaxLateness, o.MaxLateness)
	st.GivenUp += o.GivenUp
	st.DeadLettered += o.DeadLettered
	for _, m := range []struct{ dst, src *map[string]int }{{&st.Faults, &o.Faults}, {&st.Answers, &o.Answers}, {&st.Paths, &o.Paths}} {
		if *m.dst == nil {
			*m.dst = map[string]int{}
		}
		for k, v := range *m.src {
			(*m.dst)[k] += v
		}
	}
	if st.Final == nil {
		st.Final = map[ledger.State]int{}
	}
	for k, v := range o.Final {
		st.Final[k] += v
	}
}

func (s *sim) finalStats() {
	s.stats.Final = map[ledger.State]int{}
	for _, k := range s.w.keys {
		if e, ok := s.peek(k); ok {
			s.stats.Final[e.State]++
		}
	}
}

// Violation is a failed run, minimized.
type Violation struct {
	Invariant string
	// Also names the other invariants the failing step violated.
	Also   []string
	Detail string
	// Report is the seed, the minimized schedule and the histories of the
	// rows involved, ready to print.
	Report string
	// Steps is how many steps the minimized run took; FirstSteps how many
	// the seed's own run took.
	Steps, FirstSteps int
}

// Result is one seed's run.
type Result struct {
	Seed   uint64
	Mutant Mutant
	// Steps and Digest describe the seed's own run (not the minimizing
	// reruns); equal digests mean equal schedules.
	Steps  int
	Digest uint64
	Stats  Stats
	// Schedules counts the runs made: the seed's own, and those rapid made
	// to reproduce and minimize a failure.
	Schedules int
	Violation *Violation
	// Trace is the seed's own run in full (Config.Trace).
	Trace string
}

// Config sets up RunSeed.
type Config struct {
	Mutant Mutant
	// ShrinkTime bounds the minimization of a failing run (rapid's
	// -rapid.shrinktime); 0 means 30 s.
	ShrinkTime time.Duration
	// Trace keeps the seed's whole run in Result.Trace.
	Trace bool
	// Without names classes (Classes) to switch off: their worlds are not
	// drawn and their checks not made.
	Without []string
	// With names opt-in classes (OptIn) to switch on.
	With []string
}

// rapid's settings are process-wide flags: one run at a time.
var runMu sync.Mutex

// RunSeed runs the schedule drawn from seed and, if it violates an
// invariant, minimizes it. The same seed gives the same run.
func RunSeed(seed uint64, cfg Config) Result {
	runMu.Lock()
	defer runMu.Unlock()
	if cfg.ShrinkTime == 0 {
		cfg.ShrinkTime = 30 * time.Second
	}
	checks := "1"
	if testing.Short() {
		checks = "5" // rapid runs a fifth of its checks under -short
	}
	for name, v := range map[string]string{
		"rapid.seed": strconv.FormatUint(seed, 10), "rapid.checks": checks, "rapid.nofailfile": "true",
		"rapid.shrinktime": cfg.ShrinkTime.String(),
	} {
		if err := flag.Set(name, v); err != nil {
			panic("sim: " + err.Error())
		}
	}
	res := Result{Seed: seed, Mutant: cfg.Mutant}
	var last *Violation
	prop := func(t *rapid.T) {
		res.Schedules++
		s := newSim(&rapidChooser{t: t, ints: map[int]*rapid.Generator[int]{}}, cfg)
		v := s.run()
		if res.Schedules == 1 {
			res.Steps, res.Digest, res.Stats = s.step, s.digest(), s.stats
			if cfg.Trace {
				res.Trace = s.fullTrace(seed)
			}
		}
		if v == nil {
			return
		}
		last = &Violation{Invariant: v.name, Also: v.also, Detail: v.detail, Report: s.report(v, seed), Steps: s.step, FirstSteps: res.Steps}
		failOn(t, v)
	}
	tb := &quietTB{}
	rapid.Check(tb, prop)
	if res.Schedules == 0 {
		panic("sim: rapid ran no schedule for seed " + strconv.FormatUint(seed, 10))
	}
	if tb.failed {
		res.Violation = last
		if last == nil {
			res.Violation = &Violation{Invariant: "simulator", Detail: tb.msg, Report: tb.msg}
		}
	}
	return res
}

// failOn fails the rapid test case at a line of its own per invariant:
// rapid's minimization keeps only smaller runs that fail at the same place,
// so a run that violates one invariant never shrinks into another.
func failOn(t *rapid.T, v *violation) {
	switch v.name {
	case invDuplicateSend:
		t.Fatal(v.String())
	case invKeyWindow:
		t.Fatal(v.String())
	case invLateSend:
		t.Fatal(v.String())
	case invLateAttempt:
		t.Fatal(v.String())
	case invUnknownExit:
		t.Fatal(v.String())
	case invAcceptedNoAck:
		t.Fatal(v.String())
	case invFallback:
		t.Fatal(v.String())
	case invHashChain:
		t.Fatal(v.String())
	case invIllegalTransition:
		t.Fatal(v.String())
	case invSecret:
		t.Fatal(v.String())
	case invLiveness:
		t.Fatal(v.String())
	case invQuarantinedUnsent:
		t.Fatal(v.String())
	case invRejectedNoRefusal:
		t.Fatal(v.String())
	case invExpiredEarly:
		t.Fatal(v.String())
	case invAttemptBound:
		t.Fatal(v.String())
	case invRetryWindow:
		t.Fatal(v.String())
	case invLateCall:
		t.Fatal(v.String())
	case invForgedEvent:
		t.Fatal(v.String())
	case invForgedRecord:
		t.Fatal(v.String())
	case invEvidenceResent:
		t.Fatal(v.String())
	case invHandOver:
		t.Fatal(v.String())
	case invLateArrival:
		t.Fatal(v.String())
	case invCallOutlives:
		t.Fatal(v.String())
	case invLifetime:
		t.Fatal(v.String())
	case invCountGivenBack:
		t.Fatal(v.String())
	case invTamperNamed:
		t.Fatal(v.String())
	case invSealChecked:
		t.Fatal(v.String())
	case invPanic:
		t.Fatal(v.String())

	default:
		t.Fatal(v.String())
	}
}

// quietTB is the rapid.TB of a run: it keeps the failure, drops the logs.
type quietTB struct {
	failed bool
	msg    string
}

func (*quietTB) Helper()                     {}
func (*quietTB) Name() string                { return "simulate" }
func (*quietTB) Logf(string, ...any)         {}
func (*quietTB) Log(...any)                  {}
func (t *quietTB) Skipf(f string, a ...any)  { t.Errorf(f, a...) }
func (t *quietTB) Skip(a ...any)             { t.Error(a...) }
func (t *quietTB) SkipNow()                  { t.failed = true }
func (t *quietTB) Errorf(f string, a ...any) { t.failed, t.msg = true, fmt.Sprintf(f, a...) }
func (t *quietTB) Error(a ...any)            { t.failed, t.msg = true, fmt.Sprint(a...) }
func (t *quietTB) Fatalf(f string, a ...any) { t.Errorf(f, a...) }
func (t *quietTB) Fatal(a ...any)            { t.Error(a...) }
func (t *quietTB) FailNow()                  { t.failed = true }
func (t *quietTB) Fail()                     { t.failed = true }
func (t *quietTB) Failed() bool              { return t.failed }

// sortedStats renders a count map in a stable order.
func sortedStats[K ~string](m map[K]int) string {
	out := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if out != "" {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", k, m[k])
	}
	return out
}
