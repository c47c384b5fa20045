package bench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/handler/handlertest"
)

var functions = []string{"claim", "dispatch", "reconcile", "expire"}

const (
	coldStartRuns = 7
	maxBootstrap  = 12 << 20
	nextPath      = "/2018-06-01/runtime/invocation/next"
)

// coldStartReport measures each function's stripped bootstrap and the time
// from process start to its first GET /next on a stand-in Lambda runtime
// API. It uses BENCH_DIST/<fn>/bootstrap (make bench passes dist after make
// build) or builds them with the Makefile's flags for the host architecture.
func coldStartReport(t *testing.T, rep *Report) {
	dist := os.Getenv("BENCH_DIST")
	if dist == "" {
		dist = t.TempDir()
		if err := buildFunctions(dist); err != nil {
			for _, fn := range functions {
				rep.Add(Figure{Name: "Bootstrap size: " + fn, Target: "≤ 12 MiB", Verdict: NotMeasured, Note: "build failed: " + err.Error()})
			}
			rep.Add(Figure{Name: "Cold start: process start → first /next", Target: "≤ 50 ms", Verdict: NotMeasured, Note: "build failed (see above)"})
			return
		}
	}
	for _, fn := range functions {
		fi, err := os.Stat(filepath.Join(dist, fn, "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		rep.Add(Figure{
			Name:     "Bootstrap size: " + fn,
			Measured: fmt.Sprintf("%.1f MiB", float64(fi.Size())/(1<<20)),
			Target:   "≤ 12 MiB",
			Verdict:  Check(fi.Size() <= maxBootstrap),
			Note:     fmt.Sprintf("%d bytes; GOOS=linux GOARCH=%s CGO_ENABLED=0 -tags lambda.norpc -trimpath -ldflags='-s -w'.", fi.Size(), archOf()),
		})
	}
	for _, fn := range functions {
		var ds []time.Duration
		for range coldStartRuns {
			d, err := timeToNext(filepath.Join(dist, fn, "bootstrap"), fn)
			if err != nil {
				t.Fatalf("%s: %v", fn, err)
			}
			ds = append(ds, d)
		}
		slices.Sort(ds)
		med := ds[len(ds)/2]
		rep.Add(Figure{
			Name:     "Cold start: " + fn + " process start → first /next",
			Measured: fmt.Sprintf("%s ms median (max %s ms)", ms(med), ms(ds[len(ds)-1])),
			Target:   "≤ 50 ms",
			Verdict:  Check(med <= 50*time.Millisecond),
			Note: fmt.Sprintf("%d runs on this machine: %s ms. From just before exec to the arrival of GET %s at a local stand-in runtime API; "+
				"includes settings, SDK config and client construction (no network call before /next). A real Lambda init adds the sandbox and code download.",
				coldStartRuns, joinMs(ds), nextPath),
		})
	}
}

func archOf() string {
	if a := os.Getenv("ARCH"); a != "" {
		return a
	}
	return runtime.GOARCH
}

// buildFunctions builds every function into dir/<fn>/bootstrap with the
// Makefile's flags.
func buildFunctions(dir string) error {
	for _, fn := range functions {
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w",
			"-o", filepath.Join(dir, fn, "bootstrap"), "./functions/"+fn)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+archOf())
		if out, err := cmd.CombinedOutput(); err != nil {
			first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			if l := strings.Split(strings.TrimSpace(string(out)), "\n"); len(l) > 1 {
				first = l[len(l)-1]
			}
			return fmt.Errorf("functions/%s: %s", fn, first)
		}
	}
	return nil
}

// timeToNext starts bootstrap against a local runtime API and returns the
// time until its first GET /next.
func timeToNext(bootstrap, fn string) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	arrived := make(chan time.Time, 1)
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == nextPath {
			select {
			case arrived <- time.Now():
			default:
			}
			select { // hold the long poll, as the runtime API does
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusGone)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	defer close(release)

	home, err := os.MkdirTemp("", "bench-home")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(home)
	cmd := exec.Command(bootstrap)
	cmd.Env = []string{
		"PATH=/usr/bin:/bin", "HOME=" + home, // no ~/.aws profiles
		"AWS_LAMBDA_RUNTIME_API=" + ln.Addr().String(),
		"AWS_LAMBDA_FUNCTION_NAME=" + fn, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + fn, "AWS_LAMBDA_LOG_STREAM_NAME=bench", "_HANDLER=bootstrap",
		"AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_SESSION_TOKEN=test",
		"LEDGER_TABLE=bench-ledger", "CONTENT_TABLE=bench-content",
		"CONTENT_KEY_ARN=" + handlertest.KeyARN, "SES_FROM_ADDRESS=no-reply@example.test",
	}
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	select {
	case at := <-arrived:
		return at.Sub(start), nil
	case err := <-exited:
		exited <- err
		return 0, fmt.Errorf("exited before /next: %v: %s", err, out.String())
	case <-time.After(10 * time.Second):
		return 0, fmt.Errorf("no /next within 10 s: %s", out.String())
	}
}

func ms(d time.Duration) string { return trimFloat(float64(d.Microseconds()) / 1000) }

func joinMs(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = ms(d)
	}
	return strings.Join(parts, ", ")
}
