// Package localstack holds the scripts that run the local stack and this
// check that a run of them left nothing running: make test's last step.
package localstack

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startedEnv names the record of a finished run (with-emulator.sh --record
// FILE) for TestNothingLeftRunning; make test sets it after its suite.
const startedEnv = "LEDGER_STARTED_CHECK"

// started is one line of a record: a process a script started in the
// background (lib.sh: record_started), the program it ran and the port it
// served on 127.0.0.1.
type started struct {
	pid  int
	name string
	port string
}

// readStarted parses a record: "PID NAME PORT" per line.
func readStarted(path string) ([]started, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var procs []started
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s:%d: %q: want PID NAME PORT", path, n, sc.Text())
		}
		pid, err := strconv.Atoi(fields[0])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: pid %q: %w", path, n, fields[0], err)
		}
		procs = append(procs, started{pid: pid, name: fields[1], port: fields[2]})
	}
	return procs, sc.Err()
}

// running reports whether pid is alive and still runs name: an exited process
// not yet reaped (a zombie) is not running, nor is another program given the
// pid since. Without /proc only whether the pid is alive is known.
func running(pid int, name string) bool {
	p, err := os.FindProcess(pid)
	if err != nil || p.Signal(syscall.Signal(0)) != nil {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid)
	if stat, err := os.ReadFile(dir + "/stat"); err == nil {
		// pid (comm) S ...: the state follows the last ')'.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && strings.HasPrefix(string(stat[i+1:]), " Z") {
			return false
		}
	}
	if cmdline, err := os.ReadFile(dir + "/cmdline"); err == nil {
		return strings.Contains(string(cmdline), name)
	}
	return true
}

// listening reports whether something accepts TCP connections on 127.0.0.1:port.
func listening(port string) bool {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), 500*time.Millisecond)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// leftovers describes each recorded process still running and each recorded
// port still served.
func leftovers(procs []started) []string {
	var left []string
	for _, p := range procs {
		if running(p.pid, p.name) {
			left = append(left, fmt.Sprintf("%s (pid %d) is still running", p.name, p.pid))
		}
		if listening(p.port) {
			left = append(left, fmt.Sprintf("something still listens on 127.0.0.1:%s, where the run started %s (pid %d)", p.port, p.name, p.pid))
		}
	}
	return left
}

// TestNothingLeftRunning fails if a process the finished run recorded (the
// emulator, the webhook provider) is still running or its port still served:
// with-emulator.sh must stop what the run started, whatever its outcome.
func TestNothingLeftRunning(t *testing.T) {
	path := os.Getenv(startedEnv)
	if path == "" {
		t.Skipf("set %s to the record of a finished run (make test does)", startedEnv)
	}
	procs, err := readStarted(path)
	if err != nil {
		t.Fatalf("the run's record of what it started: %v", err)
	}
	for _, l := range leftovers(procs) {
		t.Errorf("%s; stop it by its pid (%s)", l, path)
	}
	t.Logf("the run started %d background processes; checked %v", len(procs), procs)
}

// TestLeftovers runs the check on this test's own process, on one that has
// exited and on a port this test serves, so a check that sees nothing cannot pass.
func TestLeftovers(t *testing.T) {
	exited := exec.Command(os.Args[0], "-test.run=^$")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, served, _ := net.SplitHostPort(ln.Addr().String())
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, free, _ := net.SplitHostPort(closed.Addr().String())
	closed.Close()

	self := filepath.Base(os.Args[0])
	tests := []struct {
		name      string
		proc      started
		wantLeft  int
		needsProc bool
	}{
		{"running", started{os.Getpid(), self, free}, 1, false},
		{"pid now runs another program", started{os.Getpid(), "webhook-provider", free}, 0, true},
		{"exited", started{exited.Process.Pid, self, free}, 0, false},
		{"exited, its port still served", started{exited.Process.Pid, self, served}, 1, false},
		{"running, its port still served", started{os.Getpid(), self, served}, 2, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := os.Stat("/proc/self/cmdline"); tt.needsProc && err != nil {
				t.Skip("no /proc: a pid's program cannot be read")
			}
			if got := leftovers([]started{tt.proc}); len(got) != tt.wantLeft {
				t.Errorf("leftovers(%v) = %q, want %d", tt.proc, got, tt.wantLeft)
			}
		})
	}
}

func TestReadStarted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "started")
	if err := os.WriteFile(path, []byte("41 ministack 4567\n42 webhook-provider 4600\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readStarted(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []started{{41, "ministack", "4567"}, {42, "webhook-provider", "4600"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("readStarted = %v, want %v", got, want)
	}
	if err := os.WriteFile(path, []byte("41 ministack\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readStarted(path); err == nil {
		t.Error("readStarted accepted a line without a port")
	}
}
