// Command simulate runs the deterministic simulation of the ledger protocol
// (package sim): the protocol over a range of seeds, then each mutant until
// a seed catches it. It prints every violation with its seed, minimized
// schedule and row histories, the throughput, how often each path was
// reached, and ends with the line
//
//	simulate: seeds=S steps=N violations=V mutants_caught=C/M
//
// Usage:
//
//	simulate [-seeds N] [-first S] [-mutant-seeds N] [-mutants M,...] [-without C,...] [-with C,...] [-shrink D] [-mutant-shrink D] [-jobs J] [-min-coverage N] [-v]
//	simulate -seed S [-mutant NAME] [-without C,...]    print one seed's whole run
//
// -mutants hunts only the named mutants. -without switches off classes of
// worlds and checks (sim.Classes): `-seeds 0 -mutants M -without C` shows
// whether mutant M is caught without class C. -with switches on an opt-in
// class (sim.OptIn: a class whose check fails on the protocol today), and
// -mutants may then name its mutants (sim.OptInMutants). There is none at
// present (tamper-in-steps, the last, is on by default since its check
// passes): -with accepts no name until the next such class.
//
// Defaults come from SIMULATE_SEEDS (20000), SIMULATE_FIRST_SEED (1),
// SIMULATE_MUTANT_SEEDS (300), SIMULATE_SHRINK (30s),
// SIMULATE_MUTANT_SHRINK (300ms), SIMULATE_JOBS (the number of CPUs, at
// most 4) and SIMULATE_MIN_COVERAGE (100 at 20,000 seeds or more, else 0).
// With more than one job the seeds are split into consecutive ranges and
// the mutants among that many child processes of this binary (a run's
// schedules do not depend on it; the combined digest does). The exit code
// is 1 when the protocol violated an invariant, a mutant was not caught, or
// a path was reached fewer than the minimum times.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/sim"
)

// main is long because it declares every flag beside its environment default,
// in the order of the usage line, and then picks the one run they ask for.
func main() {
	// The property-testing library reads testing's flags.
	testing.Init()
	// Runs allocate many short-lived rows and histories: collect less often.
	debug.SetGCPercent(400)
	seeds := flag.Int("seeds", envInt("SIMULATE_SEEDS", 20000), "protocol runs")
	first := flag.Uint64("first", uint64(envInt("SIMULATE_FIRST_SEED", 1)), "first seed")
	mutantSeeds := flag.Int("mutant-seeds", envInt("SIMULATE_MUTANT_SEEDS", 300), "seeds each mutant may take to be caught (0: no mutants; rare ones get a multiple)")
	shrink := flag.Duration("shrink", envDuration("SIMULATE_SHRINK", 30*time.Second), "time to minimize each failing run of the protocol")
	mutantShrink := flag.Duration("mutant-shrink", envDuration("SIMULATE_MUTANT_SHRINK", 300*time.Millisecond), "time to minimize the run that caught each mutant")
	jobs := flag.Int("jobs", envInt("SIMULATE_JOBS", min(runtime.NumCPU(), 4)), "processes to split the seeds and mutants among")
	minCov := flag.Int("min-coverage", -1, "times each path must be reached (default: SIMULATE_MIN_COVERAGE, or 100 at 20,000 seeds or more)")
	verbose := flag.Bool("v", false, "print the minimized run that caught each mutant")
	only := flag.String("mutants", "", "hunt only these mutants (comma-separated; default all)")
	without := flag.String("without", "", "switch off these classes of worlds and checks (comma-separated: "+strings.Join(sim.Classes, ", ")+")")
	with := flag.String("with", "", "switch on these opt-in classes (comma-separated: "+strings.Join(sim.OptIn, ", ")+")")
	one := flag.Uint64("seed", 0, "print this seed's whole run and nothing else")
	mutant := flag.String("mutant", "", "with -seed: run this mutant instead of the protocol")
	mutantFirst := flag.Uint64("mutant-first", 0, "internal: the seed the mutants' hunts start at (-first if 0)")
	part := flag.String("part", "", "internal: run these mutants (comma-separated, or -) over -first/-seeds and write the summary as JSON")
	flag.Parse()
	var off []string
	if *without != "" {
		var err error
		if off, err = sim.ParseClasses(strings.Split(*without, ",")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}

	var on []string
	if *with != "" {
		var err error
		if on, err = sim.ParseOptIn(strings.Split(*with, ",")); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}

	if *one != 0 {
		m := sim.Protocol
		if *mutant != "" {
			var err error
			if m, err = sim.ParseMutant(*mutant); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		r := sim.RunSeed(*one, sim.Config{Mutant: m, ShrinkTime: *shrink, Trace: true, Without: off, With: on})
		fmt.Print(r.Trace)
		if r.Violation != nil {
			fmt.Printf("\nminimized:\n%s", r.Violation.Report)
			os.Exit(1)
		}
		return
	}
	if *minCov < 0 {
		def := 0
		if *seeds >= 20000 {
			def = 100
		}
		*minCov = envInt("SIMULATE_MIN_COVERAGE", def)
	}
	opts := sim.Options{Seeds: *seeds, FirstSeed: *first, MutantSeeds: *mutantSeeds, ShrinkTime: *shrink,
		MutantShrinkTime: *mutantShrink, MaxReports: 5, Verbose: *verbose, MinCoverage: *minCov, MutantFirstSeed: *mutantFirst, Without: off, With: on}
	if *only != "" && *part == "" {
		opts.Mutants = []sim.Mutant{}
		for _, name := range strings.Split(*only, ",") {
			m, err := sim.ParseMutant(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			opts.Mutants = append(opts.Mutants, m)
		}
	}
	if *part != "" {
		opts.Mutants = []sim.Mutant{}
		for _, name := range strings.Split(*part, ",") {
			if name == "-" {
				continue
			}
			m, err := sim.ParseMutant(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			opts.Mutants = append(opts.Mutants, m)
		}
		if err := json.NewEncoder(os.Stdout).Encode(sim.Run(opts)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		return
	}
	start := time.Now()
	var sum sim.Summary
	if *jobs <= 1 {
		sum = sim.Run(opts)
	} else {
		var err error
		if sum, err = parallel(opts, *jobs); err != nil {
			fmt.Fprintln(os.Stderr, "simulate:", err)
			os.Exit(2)
		}
	}
	sum.Elapsed = time.Since(start)
	sim.Print(os.Stdout, opts, &sum)
	if sum.Violations > 0 || sum.Caught() < len(sum.Mutants) || len(sum.Uncovered) > 0 {
		os.Exit(1)
	}
}

// parallel runs opts in jobs child processes: consecutive seed ranges, and
// the mutants dealt out in turn, and merges their summaries in order.
func parallel(opts sim.Options, jobs int) (sim.Summary, error) {
	if opts.FirstSeed == 0 {
		opts.FirstSeed = 1
	}
	mutants := opts.Mutants
	if mutants == nil {
		mutants = sim.Mutants
	}
	if opts.MutantSeeds == 0 {
		mutants = nil
	}
	parts := make([]sim.Summary, jobs)
	errs := make([]error, jobs)
	var wg sync.WaitGroup
	next := opts.FirstSeed
	for i := range jobs {
		n := opts.Seeds / jobs
		if i < opts.Seeds%jobs {
			n++
		}
		var names []string
		for k := i; k < len(mutants); k += jobs {
			names = append(names, string(mutants[k]))
		}
		if len(names) == 0 {
			names = []string{"-"}
		}
		args := []string{"-part", strings.Join(names, ","), "-first", strconv.FormatUint(next, 10), "-seeds", strconv.Itoa(n),
			"-mutant-seeds", strconv.Itoa(opts.MutantSeeds), "-mutant-first", strconv.FormatUint(opts.FirstSeed, 10), "-shrink", opts.ShrinkTime.String(), "-mutant-shrink", opts.MutantShrinkTime.String()}
		if len(opts.Without) > 0 {
			args = append(args, "-without", strings.Join(opts.Without, ","))
		}
		if len(opts.With) > 0 {
			args = append(args, "-with", strings.Join(opts.With, ","))
		}
		next += uint64(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], args...)
			var stdout bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
			cmd.Env = append(os.Environ(), "SIMULATE_JOBS=1")
			if errs[i] = cmd.Run(); errs[i] == nil {
				errs[i] = json.Unmarshal(stdout.Bytes(), &parts[i])
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return sim.Summary{}, fmt.Errorf("job %d: %w", i+1, err)
		}
	}
	return sim.Merge(parts, mutants), nil
}

// envInt returns the whole number in the environment variable name, or def
// if it is unset.
func envInt(name string, def int) int {
	return fromEnv(name, def, "a whole number", func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err == nil && n < 0 {
			err = strconv.ErrRange
		}
		return n, err
	})
}

// envDuration returns the duration in the environment variable name, or def
// if it is unset.
func envDuration(name string, def time.Duration) time.Duration {
	return fromEnv(name, def, "a duration such as 30s", func(v string) (time.Duration, error) {
		d, err := time.ParseDuration(v)
		if err == nil && d < 0 {
			err = strconv.ErrRange
		}
		return d, err
	})
}

// fromEnv returns the environment variable name read with parse, or def if
// it is unset. A value parse refuses ends the program with exit code 2 and
// a message that it wants want.
func fromEnv[T any](name string, def T, want string, parse func(string) (T, error)) T {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "simulate: %s=%q: want %s\n", name, v, want)
		os.Exit(2)
	}
	return x
}
