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
	// MutantFirstSeed is the seed each mutant's hunt starts at (FirstSeed
	// if zero): the same for every part of a run split among processes.
	MutantFirstSeed uint64
	// MinCoverage is how often each of Paths must be reached; the summary
	// names the paths reached less often (Summary.Uncovered).
	MinCoverage int
	// Without names classes to switch off (Config.Without).
	Without []string
	// With names opt-in classes to switch on (Config.With).
	With []string
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
	// Uncovered names the paths reached fewer than Options.MinCoverage
	// times (set by Print).
	Uncovered []string
	// FirstSeed is the run's first seed; Reports the violations found, as
	// printed; ProtocolTime and MutantTime how long each half took.
	FirstSeed    uint64
	Reports      []string
	ProtocolTime time.Duration
	MutantTime   time.Duration
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
// is caught, printing violations, throughput, figures and coverage to out,
// and ending with Summary.FinalLine.
func Simulate(opts Options, out io.Writer) Summary {
	start := time.Now()
	sum := Run(opts)
	sum.Elapsed = time.Since(start)
	Print(out, opts, &sum)
	return sum
}

func (opts *Options) defaults() {
	if opts.FirstSeed == 0 {
		opts.FirstSeed = 1
	}
	if opts.Mutants == nil {
		opts.Mutants = Mutants
	}
	if opts.MutantSeeds == 0 {
		opts.Mutants = nil
	}
}

// Run is Simulate without the printing: the protocol over the seeds, then
// the mutants. Its summary is what Print prints; Merge combines the
// summaries of runs over consecutive seed ranges and parts of the mutants
// (cmd/simulate runs them in parallel processes).
func Run(opts Options) Summary {
	opts.defaults()
	cfg := Config{ShrinkTime: opts.ShrinkTime, Without: opts.Without, With: opts.With}
	sum := Summary{FirstSeed: opts.FirstSeed}
	dig := fnv.New64a()
	last := opts.FirstSeed + uint64(opts.Seeds) - 1
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
				sum.Reports = append(sum.Reports, fmt.Sprintf("%s  (the seed's own run took %d steps; minimized to %d)", r.Violation.Report, r.Violation.FirstSteps, r.Violation.Steps))
			} else {
				sum.Reports = append(sum.Reports, fmt.Sprintf("VIOLATION %s (seed %d): %s", r.Violation.Invariant, seed, r.Violation.Detail))
			}
		}
	}
	sum.ProtocolTime = time.Since(start)
	sum.Digest = dig.Sum64()
	mcfg := cfg
	if opts.MutantShrinkTime > 0 {
		mcfg.ShrinkTime = opts.MutantShrinkTime
	}
	mstart := time.Now()
	mfirst := opts.MutantFirstSeed
	if mfirst == 0 {
		mfirst = opts.FirstSeed
	}
	for _, m := range opts.Mutants {
		sum.Mutants = append(sum.Mutants, HuntMutant(m, mfirst, m.Budget(opts.MutantSeeds), mcfg))
	}
	sum.MutantTime = time.Since(mstart)
	return sum
}

// Merge combines the summaries of runs over consecutive seed ranges, in
// order, and over parts of the mutants: one summary as if one run had made
// them all. One summary is returned as it is.
func Merge(parts []Summary, mutants []Mutant) Summary {
	if len(parts) == 1 {
		return parts[0]
	}
	var sum Summary
	dig := fnv.New64a()
	found := map[Mutant]MutantResult{}
	for i, p := range parts {
		if i == 0 {
			sum.FirstSeed = p.FirstSeed
		}
		sum.Seeds += p.Seeds
		sum.Steps += p.Steps
		sum.Violations += p.Violations
		sum.Schedules += p.Schedules
		sum.Stats.add(p.Stats)
		sum.Reports = append(sum.Reports, p.Reports...)
		sum.ProtocolTime = max(sum.ProtocolTime, p.ProtocolTime)
		sum.MutantTime = max(sum.MutantTime, p.MutantTime)
		dig.Write(binary.LittleEndian.AppendUint64(nil, p.Digest))
		for _, m := range p.Mutants {
			found[m.Mutant] = m
		}
	}
	sum.Digest = dig.Sum64()
	for _, m := range mutants {
		if r, ok := found[m]; ok {
			sum.Mutants = append(sum.Mutants, r)
		}
	}
	return sum
}

// Print writes what Simulate prints for sum, a run (or merged runs) with
// opts, and fills sum.Uncovered.
func Print(out io.Writer, opts Options, sum *Summary) {
	opts.defaults()
	last := sum.FirstSeed + uint64(sum.Seeds) - 1
	without := ""
	if len(opts.Without) > 0 {
		without = " without " + strings.Join(opts.Without, ", ")
	}
	if len(opts.With) > 0 {
		without += " with " + strings.Join(opts.With, ", ")
	}
	fmt.Fprintf(out, "simulate: the protocol over seeds %d..%d%s\n", sum.FirstSeed, last, without)
	for _, r := range sum.Reports {
		fmt.Fprintln(out, r)
	}
	secs := max(sum.ProtocolTime.Seconds(), 1e-9)
	st := sum.Stats
	fmt.Fprintf(out, "  %d steps in %s: %.0f steps/s; %d schedules explored (%.0f/s), minimizing reruns included\n",
		sum.Steps, sum.ProtocolTime.Round(time.Millisecond), float64(sum.Steps)/secs, sum.Schedules, float64(sum.Schedules)/secs)
	fmt.Fprintf(out, "  faults injected: %s\n", sortedStats(st.Faults))
	fmt.Fprintf(out, "  provider answers: %s\n", sortedStats(st.Answers))
	fmt.Fprintf(out, "  messages ended: %s\n", sortedStats(st.Final))
	fmt.Fprintf(out, "  sends %d, messages the providers took %d; sends that reached the provider at or after expires_at %d (latest %s after it); stream records given up %d, dispatch messages dead-lettered %d\n",
		st.Sends, st.Recorded, st.LateArrivals, st.MaxLateness, st.GivenUp, st.DeadLettered)
	fmt.Fprintf(out, "  coverage (each path at least %d times):\n", opts.MinCoverage)
	sum.Uncovered = nil
	for _, p := range Paths {
		n := st.Paths[p]
		mark := ""
		if n < opts.MinCoverage {
			mark = "  BELOW"
			sum.Uncovered = append(sum.Uncovered, p)
		}
		fmt.Fprintf(out, "    %-46s %7d%s\n", p, n, mark)
	}
	fmt.Fprintf(out, "  schedule digest %016x\n", sum.Digest)

	if len(sum.Mutants) > 0 {
		fmt.Fprintf(out, "simulate: mutants, at most %d seeds each (rare faults more) from seed %d\n", opts.MutantSeeds, sum.FirstSeed)
	}
	for _, mr := range sum.Mutants {
		m := mr.Mutant
		if mr.Violation == nil {
			fmt.Fprintf(out, "  %-36s NOT CAUGHT in %d seeds\n", m, mr.Seeds)
			continue
		}
		v := mr.Violation
		also := ""
		if len(v.Also) > 0 {
			also = " (and " + strings.Join(v.Also, ", ") + ")"
		}
		fmt.Fprintf(out, "  %-36s caught at seed %d by %s%s; its run took %d steps, minimized to %d\n",
			m, mr.Seed, v.Invariant, also, v.FirstSteps, v.Steps)
		if opts.Verbose {
			fmt.Fprintf(out, "%s\n", indent(v.Report, "    "))
		}
	}
	if len(sum.Mutants) > 0 {
		fmt.Fprintf(out, "  mutants took %s\n", sum.MutantTime.Round(time.Millisecond))
	}
	fmt.Fprintf(out, "  paths below %d: %d; elapsed %s\n", opts.MinCoverage, len(sum.Uncovered), sum.Elapsed.Round(time.Millisecond))
	fmt.Fprintln(out, sum.FinalLine())
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
