package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What ministack 1.5.33 logged for a claim batch whose response was
// {"batchItemFailures":null}, between two ordinary lines.
const nullFailuresLog = `2026-12-01 04:37:37 INFO [lambda_runtime] Lambda provided-runtime environment spawned for resetledger-local-claim (cold start)
2026-12-01 04:37:37 ERROR [concurrency] background task ministack-esm failed
Traceback (most recent call last):
  File "/x/site-packages/ministack/core/concurrency.py", line 210, in _run
    ctx.run(lambda: fn(*args, **kwargs))
  File "/x/site-packages/ministack/core/concurrency.py", line 210, in <lambda>
    ctx.run(lambda: fn(*args, **kwargs))
                    ^^^^^^^^^^^^^^^^^^^
  File "/x/site-packages/ministack/services/lambda_svc.py", line 7439, in _task
    fn(*args)
  File "/x/site-packages/ministack/services/lambda_svc.py", line 7677, in _run_sqs_batch
    for failure in body.get("batchItemFailures", []):
TypeError: 'NoneType' object is not iterable
2026-12-01 04:37:37 INFO [lambda] ESM: Lambda resetledger-local-dispatch processed 1 DynamoDB stream records
`

const cleanLog = `2026-12-01 04:38:08 INFO [lambda] ESM: Lambda resetledger-local-claim processed 3 SQS messages
{"time":"2026-12-01T04:38:08.023701752Z","level":"INFO","msg":"intent handled","function":"claim"}
`

func TestEmulatorLogProblems(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ministack-4566.log")
	if err := os.WriteFile(path, []byte(nullFailuresLog), 0o600); err != nil {
		t.Fatal(err)
	}
	mark, err := MarkEmulatorLog(path)
	if err != nil {
		t.Fatal(err)
	}
	// What was there before the mark is not the run's.
	if got, err := mark.Problems(); err != nil || len(got) != 0 {
		t.Fatalf("before anything was appended: %q, %v", got, err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString(cleanLog + nullFailuresLog + cleanLog + "2026-12-01 04:39:00 WARNING [x] got NoneType for a field\n" + nullFailuresLog)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	got, err := mark.Problems()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d problems, want 3 (two tracebacks, one NoneType line): %q", len(got), got)
	}
	for _, i := range []int{0, 2} {
		lines := strings.Split(got[i], "\n")
		if len(lines) != 12 || !strings.Contains(lines[0], "background task ministack-esm failed") ||
			!strings.HasPrefix(lines[len(lines)-1], "TypeError: 'NoneType' object is not iterable") {
			t.Errorf("traceback block %d: %q", i, got[i])
		}
	}
	if !strings.Contains(got[1], "got NoneType for a field") || strings.Contains(got[1], "\n") {
		t.Errorf("NoneType line: %q", got[1])
	}

	if err := os.WriteFile(path, []byte(cleanLog), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mark.Problems(); err == nil {
		t.Error("a log that shrank (emulator restarted) reported no error")
	}
}

func TestEmulatorLogPath(t *testing.T) {
	got, err := EmulatorLogPath("/r", "http://127.0.0.1:4567")
	if err != nil || got != "/r/.run/ministack-4567.log" {
		t.Errorf("got %q, %v", got, err)
	}
	if _, err := EmulatorLogPath("/r", "http://localhost"); err == nil {
		t.Error("endpoint without a port: no error")
	}
}
