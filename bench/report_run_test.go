package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
)

// reportCommand reproduces BENCHMARKS.md.
const reportCommand = "make bench\n# or, with an emulator on 127.0.0.1:4566 (localstack/ministack.sh start):\nBENCH_REPORT=1 go test ./bench -run '^TestReport$' -count=1 -v -timeout 30m"

// scale is how much work each measurement does.
type scale struct {
	writesPerMessage int // accepted messages on the happy path
	// sweepOpen open rows of each state per sweep, among sweepSmall and
	// then sweepLarge closed rows, sweepReps sweeps at each size.
	sweepOpen, sweepSmall, sweepLarge, sweepReps int
	// runSmall and runLarge open rows that are not due, around one
	// reconcile run.
	runSmall, runLarge int
	// throughputMsgs claims (a multiple of 10, in batches of 10) between
	// two rounds of rawPuts conditional PutItems.
	throughputMsgs, rawPuts int
	benchtime               string // of the in-process benchmarks; "" leaves go test's -benchtime (1s)
	coldStartRuns           int    // starts per function
	limitMessages           int    // messages of each kind the send limits' cost is measured over
	// digestQuiet and digestBusy accepted messages per interval, over
	// digestIntervals intervals, for the digest's cost.
	digestQuiet, digestBusy, digestIntervals int
	// shapeMessages accepted messages of each production shape, limits on
	// and off, each with its two provider events.
	shapeMessages int
}

var (
	// fullScale is make bench's: the figures in BENCHMARKS.md.
	fullScale = scale{writesPerMessage: 20, sweepOpen: 100, sweepSmall: 1000, sweepLarge: 50000, sweepReps: 5,
		runSmall: 100, runLarge: 10000, throughputMsgs: 500, rawPuts: 300, coldStartRuns: 7, limitMessages: 20,
		digestQuiet: 10, digestBusy: 5000, digestIntervals: 12, shapeMessages: 20}
	// quickScale is make bench-quick's (in make test): every measurement
	// runs, in seconds, so that a broken one fails CI. Its figures mean
	// nothing and are never checked against their targets.
	quickScale = scale{writesPerMessage: 2, sweepOpen: 3, sweepSmall: 10, sweepLarge: 30, sweepReps: 1,
		runSmall: 4, runLarge: 20, throughputMsgs: 20, rawPuts: 10, benchtime: "20x", coldStartRuns: 1, limitMessages: 2,
		digestQuiet: 2, digestBusy: 20, digestIntervals: 2, shapeMessages: 2}
)

// reportPart is one measurement of the report and how many figures it adds.
type reportPart struct {
	name    string
	run     func(*testing.T, *Report, scale)
	figures int
}

var reportParts = []reportPart{
	{"writes", writesReport, 5},
	{"sweeps", sweepReport, 2},
	{"reconcile-run", reconcileRunReport, 1},
	{"throughput", throughputReport, 1},
	{"scale", scaleReport, 3},
	{"inprocess", inProcessReport, 2},
	{"coldstart", coldStartReport, 2 * len(settings.Functions)}, // a size and a cold start per function
	{"limits", limitsReport, 1},
	{"digest", digestReport, 2},
	{"shapes", shapesReport, 2}, // the 8 KB HTML email and the SMS, limits on and off
}

// TestReport runs every measurement. With BENCH_REPORT=1 (make bench) it
// runs them at full size and writes BENCHMARKS.md (BENCH_OUT overrides the
// path); the measurements take minutes. With BENCH_QUICK=1 (make
// bench-quick, part of make test) it runs each at a tiny size in seconds
// and writes nothing. Either way it fails if a measurement did not run, or
// left a figure unmeasured, and never on a number: a figure that misses its
// target is reported as such. Parts can be chosen with BENCH_ONLY
// (comma-separated: writes, sweeps, reconcile-run, throughput, scale, inprocess, coldstart, limits, digest, shapes);
// BENCHMARKS.md is then not written unless BENCH_OUT names a file.
func TestReport(t *testing.T) {
	quick := os.Getenv("BENCH_QUICK") == "1"
	if os.Getenv("BENCH_REPORT") != "1" && !quick {
		t.Skip("set BENCH_REPORT=1 (make bench) to run the measurements and write BENCHMARKS.md, or BENCH_QUICK=1 (make bench-quick) to run each at a tiny size")
	}
	sc := fullScale
	if quick {
		sc = quickScale
	}
	// Without an emulator the emulator parts would skip and leave no
	// figures: fail instead.
	t.Setenv("LEDGER_REQUIRE_EMULATOR", "1")
	rep := &Report{Command: reportCommand, Environment: environment()}
	only := os.Getenv("BENCH_ONLY")
	for _, p := range reportParts {
		if only != "" && !strings.Contains(","+only+",", ","+p.name+",") {
			continue
		}
		start := time.Now()
		before := len(rep.Figures)
		t.Run(p.name, func(t *testing.T) { p.run(t, rep, sc) })
		if n := len(rep.Figures) - before; n != p.figures {
			t.Errorf("%s added %d figures, want %d", p.name, n, p.figures)
		}
		t.Logf("%s took %s", p.name, time.Since(start).Round(time.Millisecond))
	}
	for _, f := range rep.Unmeasured() {
		t.Errorf("not measured: %s: %s", f.Name, f.Note)
	}
	rep.Sections = append(rep.Sections, linkingSection)
	rep.Sections = append(rep.Sections, surgeSections(filepath.Join("..", ".run"))...)
	rep.Sections = append(rep.Sections, mutationSection(mutationFile)...)

	var text bytes.Buffer
	rep.WriteText(&text)
	fmt.Print("\n" + text.String())
	if t.Failed() {
		t.Fatal("a measurement failed; BENCHMARKS.md not written")
	}
	if quick {
		t.Logf("quick mode: %d figures, every measurement ran (at a size whose figures mean nothing); BENCHMARKS.md not written", len(rep.Figures))
		return
	}
	out := os.Getenv("BENCH_OUT")
	if out == "" && only != "" {
		t.Logf("BENCH_ONLY=%s: a partial report; BENCHMARKS.md not written (set BENCH_OUT to write it elsewhere)", only)
		return
	}
	if out == "" {
		out = "../BENCHMARKS.md"
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	if err := os.WriteFile(out, md.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

func environment() []string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if name, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(name), ":"))
				break
			}
		}
	}
	env := []string{
		fmt.Sprintf("%s, %s/%s, %d CPUs (%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu),
		"date: " + time.Now().UTC().Format("2006-01-02 15:04 MST"),
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			env = append(env, fmt.Sprintf("load average when the run started: %s, %s, %s (1, 5, 15 min; timings are of a machine that may be shared)", f[0], f[1], f[2]))
		}
	}
	if ep, ok := emulator.Endpoint(); ok {
		env = append(env, "emulator: "+ep+emulatorVersion(ep)+" (every emulator figure is a local measurement: requests and capacity units carry over to DynamoDB, latencies do not)")
	}
	return env
}

// emulatorVersion names a ministack endpoint's version, or "" for another
// emulator.
func emulatorVersion(ep string) string {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(strings.TrimRight(ep, "/") + "/_ministack/health")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var h struct {
		Version string `json:"version"`
	}
	if json.NewDecoder(resp.Body).Decode(&h) != nil || h.Version == "" {
		return ""
	}
	return " (ministack " + h.Version + ")"
}
