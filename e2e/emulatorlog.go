package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// EmulatorLogPath is where localstack/ministack.sh writes the log of the
// ministack it started for endpoint: <root>/.run/ministack-<port>.log.
func EmulatorLogPath(root, endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("emulator endpoint %q: %w", endpoint, err)
	}
	port := u.Port()
	if port == "" {
		return "", fmt.Errorf("emulator endpoint %q names no port", endpoint)
	}
	return filepath.Join(root, ".run", "ministack-"+port+".log"), nil
}

// EmulatorLog is the part of an emulator's log written after Mark.
type EmulatorLog struct {
	Path   string
	Offset int64
}

// MarkEmulatorLog records the log's current size: Problems reads only what
// is appended after it.
func MarkEmulatorLog(path string) (EmulatorLog, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return EmulatorLog{}, err
	}
	return EmulatorLog{Path: path, Offset: fi.Size()}, nil
}

// emulatorFaults are the markers of the emulator failing inside itself: a
// Python traceback, or the error ministack 1.5.33 raised on a null
// batchItemFailures (its traceback ends in it).
var emulatorFaults = []string{"Traceback (most recent call last)", "NoneType"}

// allowedFaults are the emulator faults a run may produce that are neither
// ours nor avoidable, each a substring of the traceback block it excuses.
// Keep every entry narrow and say why it is there.
var allowedFaults []string

// Problems returns every traceback or NoneType error the emulator logged
// after the mark, minus the allowed ones: a traceback as one block of at
// most 16 lines (the line before it, its frames and its exception), any
// other NoneType line alone. A log that shrank was replaced (the emulator
// restarted): that is an error, since the run's lines are gone.
func (l EmulatorLog) Problems() ([]string, error) {
	f, err := os.Open(l.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < l.Offset {
		return nil, fmt.Errorf("emulator log %s shrank from %d to %d bytes during the run: restarted?", l.Path, l.Offset, fi.Size())
	}
	if _, err := f.Seek(l.Offset, io.SeekStart); err != nil {
		return nil, err
	}
	return faults(f)
}

func faults(r io.Reader) ([]string, error) {
	const blockLines = 16
	traceback := emulatorFaults[0]
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var (
		out        []string
		block      []string
		prev, line string
	)
	flush := func() {
		if len(block) == 0 {
			return
		}
		text := strings.Join(block, "\n")
		block = nil
		for _, a := range allowedFaults {
			if strings.Contains(text, a) {
				return
			}
		}
		out = append(out, text)
	}
	for sc.Scan() {
		prev, line = line, sc.Text()
		if len(line) > 300 {
			line = line[:300] + "…"
		}
		switch {
		case strings.Contains(line, traceback):
			flush()
			// The line before names what failed (ministack: "ERROR
			// [concurrency] background task ministack-esm failed").
			block = []string{prev, line}
		case len(block) > 0:
			// Frames are indented; the first line that is not ends the
			// traceback (the exception, e.g. TypeError: 'NoneType' ...).
			block = append(block, line)
			if len(block) >= blockLines || !strings.HasPrefix(line, " ") {
				flush()
			}
		case hasFault(sc.Bytes()):
			block = []string{line}
			flush()
		}
	}
	flush()
	return out, sc.Err()
}

func hasFault(line []byte) bool {
	for _, m := range emulatorFaults {
		if bytes.Contains(line, []byte(m)) {
			return true
		}
	}
	return false
}
