package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/emulator"
)

// reportCommand reproduces BENCHMARKS.md.
const reportCommand = "make bench\n# or, with an emulator on 127.0.0.1:4566 (localstack/ministack.sh start):\nBENCH_REPORT=1 go test ./bench -run '^TestReport$' -count=1 -v -timeout 30m"

// TestReport runs every measurement and writes BENCHMARKS.md (BENCH_OUT
// overrides the path). It runs only with BENCH_REPORT=1: the measurements
// take minutes and report numbers; they never fail on a number. Parts can be
// chosen with BENCH_ONLY (comma-separated: writes, sweeps, throughput,
// inprocess, coldstart).
func TestReport(t *testing.T) {
	if os.Getenv("BENCH_REPORT") != "1" {
		t.Skip("set BENCH_REPORT=1 (make bench) to run the measurements and write BENCHMARKS.md")
	}
	// Without an emulator the emulator parts would skip and a partial
	// table would overwrite BENCHMARKS.md: fail instead.
	t.Setenv("LEDGER_REQUIRE_EMULATOR", "1")
	rep := &Report{Command: reportCommand, Environment: environment()}
	parts := []struct {
		name string
		run  func(*testing.T, *Report)
	}{
		{"writes", writesReport},
		{"sweeps", sweepReport},
		{"throughput", throughputReport},
		{"inprocess", inProcessReport},
		{"coldstart", coldStartReport},
	}
	only := os.Getenv("BENCH_ONLY")
	for _, p := range parts {
		if only != "" && !strings.Contains(","+only+",", ","+p.name+",") {
			continue
		}
		start := time.Now()
		t.Run(p.name, func(t *testing.T) { p.run(t, rep) })
		t.Logf("%s took %s", p.name, time.Since(start).Round(time.Millisecond))
	}

	var text bytes.Buffer
	rep.WriteText(&text)
	fmt.Print("\n" + text.String())
	if t.Failed() {
		t.Fatal("a measurement failed; BENCHMARKS.md not written")
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	out := os.Getenv("BENCH_OUT")
	if out == "" {
		out = "../BENCHMARKS.md"
	}
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
