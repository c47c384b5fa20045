package sim

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"strings"
	"time"
)

// Options sets up Simulate.
type Options struct {
	// Seeds runs of the protocol, from seed FirstSeed (1 if zero).
	Seeds     int
	FirstSeed uint64
	// MutantSeeds is how many seeds each mutant may take to be caught;
	// zero skips the mutants.
	MutantSeeds int
	// Mutants to run; all of them if nil.
	Mutants []Mutant
	// ShrinkTime bounds the minimization of each failing run.
	ShrinkTime time.Duration
	// MaxReports bounds the violation reports printed in full.
	MaxReports int
	// Verbose prints the minimized run that caught each mutant.
	Verbose bool
	// MutantShrinkTime bounds the minimization of the run that caught each
	// mutant (ShrinkTime if zero).
	MutantShrinkTime time.Duration
	// MinCoverage is how often each of Paths must be reached; the summary
	// names the paths reached less often (Summary.Uncovered).
	MinCoverage int
}

// MutantResult is how a mutant was caught, or not.
type MutantResult struct {
	Mutant Mutant
	// Seed caught it (zero: not caught within the seeds allowed); Seeds
	// is how many seeds it took.
	Seed      uint64
	Seeds     int
	Violation *Violation
	Schedules int
}

// Summary is what Simulate did.
type Summary struct {
	Seeds, Steps, Violations int
	// Schedules counts the protocol runs made, minimizing reruns included.
	Schedules int
	Elapsed   time.Duration
	// Digest combines every seed's schedule digest: equal digests, equal runs.
	Digest  uint64
	Stats   Stats
	Mutants []MutantResult
	// Uncovered names the paths reached fewer than Options.MinCoverage times.
	Uncovered []string
}

// Caught counts the mutants caught.
func (s Summary) Caught() int {
	n := 0
	for _, m := range s.Mutants {
		if m.Violation != nil {
			n++
		}
	}
	return n
}

// FinalLine is the last line Simulate prints.
func (s Summary) FinalLine() string {
	return fmt.Sprintf("simulate: seeds=%d steps=%d violations=%d mutants_caught=%d/%d", s.Seeds, s.Steps, s.Violations, s.Caught(), len(s.Mutants))
}

// Simulate runs the protocol over opts.Seeds seeds and each mutant until it
// is caught, printing violations, throughput and figures to out, and ending
// with Summary.FinalLine.
func Simulate(opts Options, out io.Writer) Summary {
	if opts.FirstSeed == 0 {
		opts.FirstSeed = 1
	}
	if opts.Mutants == nil {
		opts.Mutants = Mutants
	}
	if opts.MutantSeeds == 0 {
		opts.Mutants = nil
	}
	cfg := Config{ShrinkTime: opts.ShrinkTime}
	var sum Summary
	dig := fnv.New64a()
	last := opts.FirstSeed + uint64(opts.Seeds) - 1
	fmt.Fprintf(out, "simulate: the protocol over seeds %d..%d\n", opts.FirstSeed, last)
	start := time.Now()
	for seed := opts.FirstSeed; seed <= last; seed++ {
		r := RunSeed(seed, cfg)
		sum.Seeds++
		sum.Steps += r.Steps
		sum.Schedules += r.Schedules
		sum.Stats.add(r.Stats)
		dig.Write(binary.LittleEndian.AppendUint64(nil, r.Digest))
		if r.Violation != nil {
			sum.Violations++
			if sum.Violations <= opts.MaxReports {
				fmt.Fprintf(out, "%s  (the seed's own run took %d steps; minimized to %d)\n", r.Violation.Report, r.Violation.FirstSteps, r.Violation.Steps)
			} else {
				fmt.Fprintf(out, "VIOLATION %s (seed %d): %s\n", r.Violation.Invariant, seed, r.Violation.Detail)
			}
		}
	}
	sum.Elapsed = time.Since(start)
	sum.Digest = dig.Sum64()
	secs := max(sum.Elapsed.Seconds(), 1e-9)
	st := sum.Stats
	fmt.Fprintf(out, "  %d steps in %s: %.0f steps/s; %d schedules explored (%.0f/s), minimizing reruns included\n",
		sum.Steps, sum.Elapsed.Round(time.Millisecond), float64(sum.Steps)/secs, sum.Schedules, float64(sum.Schedules)/secs)
	fmt.Fprintf(out, "  faults injected: %s\n", sortedStats(st.Faults))
	fmt.Fprintf(out, "  provider answers: %s\n", sortedStats(st.Answers))
	fmt.Fprintf(out, "  messages ended: %s\n", sortedStats(st.Final))
	fmt.Fprintf(out, "  sends %d, messages the providers took %d; sends that reached the provider at or after expires_at %d (latest %s after it); stream records given up %d, dispatch messages dead-lettered %d\n",
		st.Sends, st.Recorded, st.LateArrivals, st.MaxLateness, st.GivenUp, st.DeadLettered)
	fmt.Fprintf(out, "  coverage (each path at least %d times):\n", opts.MinCoverage)
	for _, p := range Paths {
		n := st.Paths[p]
		mark := ""
		if n < opts.MinCoverage {
			mark = "  BELOW"
			sum.Uncovered = append(sum.Uncovered, p)
		}
		fmt.Fprintf(out, "    %-36s %7d%s\n", p, n, mark)
	}
	fmt.Fprintf(out, "  schedule digest %016x\n", sum.Digest)

	if len(opts.Mutants) > 0 {
		fmt.Fprintf(out, "simulate: mutants, at most %d seeds each (rare faults more) from seed %d\n", opts.MutantSeeds, opts.FirstSeed)
	}
	mcfg := cfg
	if opts.MutantShrinkTime > 0 {
		mcfg.ShrinkTime = opts.MutantShrinkTime
	}
	mstart := time.Now()
	for _, m := range opts.Mutants {
		mr := HuntMutant(m, opts.FirstSeed, m.Budget(opts.MutantSeeds), mcfg)
		sum.Mutants = append(sum.Mutants, mr)
		if mr.Violation == nil {
			fmt.Fprintf(out, "  %-30s NOT CAUGHT in %d seeds\n", m, mr.Seeds)
			continue
		}
		v := mr.Violation
		also := ""
		if len(v.Also) > 0 {
			also = " (and " + strings.Join(v.Also, ", ") + ")"
		}
		fmt.Fprintf(out, "  %-30s caught at seed %d by %s%s; its run took %d steps, minimized to %d\n",
			m, mr.Seed, v.Invariant, also, v.FirstSteps, v.Steps)
		if opts.Verbose {
			fmt.Fprintf(out, "%s\n", indent(v.Report, "    "))
		}
	}
	if len(opts.Mutants) > 0 {
		fmt.Fprintf(out, "  mutants took %s\n", time.Since(mstart).Round(time.Millisecond))
	}
	fmt.Fprintf(out, "  coverage below %d: %d paths; total time %s\n", opts.MinCoverage, len(sum.Uncovered), time.Since(start).Round(time.Millisecond))
	fmt.Fprintln(out, sum.FinalLine())
	return sum
}

// HuntMutant runs seeds from first until one catches m, at most budget seeds.
func HuntMutant(m Mutant, first uint64, budget int, cfg Config) MutantResult {
	cfg.Mutant = m
	mr := MutantResult{Mutant: m}
	for seed := first; mr.Seeds < budget; seed++ {
		r := RunSeed(seed, cfg)
		mr.Seeds++
		mr.Schedules += r.Schedules
		if r.Violation != nil {
			mr.Seed, mr.Violation = seed, r.Violation
			break
		}
	}
	return mr
}

func indent(s, pre string) string {
	return pre + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+pre)
}
