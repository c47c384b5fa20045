// Command simulate runs the deterministic simulation of the ledger protocol
// (package sim): the protocol over a range of seeds, then each mutant until
// a seed catches it. It prints every violation with its seed, minimized
// schedule and row histories, the throughput, and ends with the line
//
//	simulate: seeds=S steps=N violations=V mutants_caught=C/M
//
// Usage:
//
//	simulate [-seeds N] [-first S] [-mutant-seeds N] [-shrink D] [-v]
//	simulate -seed S [-mutant NAME]    print one seed's whole run
//
// Defaults come from SIMULATE_SEEDS (20000), SIMULATE_FIRST_SEED (1),
// SIMULATE_MUTANT_SEEDS (300) and SIMULATE_SHRINK (30s). The exit code is
// 1 when the protocol violated an invariant or a mutant was not caught.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/resetledger/resetledger/sim"
)

func main() {
	// The property-testing library reads testing's flags.
	testing.Init()
	// Runs allocate many short-lived rows and histories: collect less often.
	debug.SetGCPercent(400)
	seeds := flag.Int("seeds", envInt("SIMULATE_SEEDS", 20000), "protocol runs")
	first := flag.Uint64("first", uint64(envInt("SIMULATE_FIRST_SEED", 1)), "first seed")
	mutantSeeds := flag.Int("mutant-seeds", envInt("SIMULATE_MUTANT_SEEDS", 300), "seeds each mutant may take to be caught (0: no mutants)")
	shrink := flag.Duration("shrink", envDuration("SIMULATE_SHRINK", 30*time.Second), "time to minimize each failing run")
	verbose := flag.Bool("v", false, "print the minimized run that caught each mutant")
	one := flag.Uint64("seed", 0, "print this seed's whole run and nothing else")
	mutant := flag.String("mutant", "", "with -seed: run this mutant instead of the protocol")
	flag.Parse()

	if *one != 0 {
		m := sim.Protocol
		if *mutant != "" {
			var err error
			if m, err = sim.ParseMutant(*mutant); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		r := sim.RunSeed(*one, sim.Config{Mutant: m, ShrinkTime: *shrink, Trace: true})
		fmt.Print(r.Trace)
		if r.Violation != nil {
			fmt.Printf("\nminimized:\n%s", r.Violation.Report)
			os.Exit(1)
		}
		return
	}
	sum := sim.Simulate(sim.Options{Seeds: *seeds, FirstSeed: *first, MutantSeeds: *mutantSeeds, ShrinkTime: *shrink,
		MaxReports: 5, Verbose: *verbose}, os.Stdout)
	if sum.Violations > 0 || sum.Caught() < len(sum.Mutants) {
		os.Exit(1)
	}
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
