package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestSweepHeartbeatOnEveryRun: the heartbeat alarm reads SweepHeartbeat with
// missing data breaching, so a sweep must emit it whether it succeeds, fails
// as a whole or never returns (it is written before the sweep starts).
func TestSweepHeartbeatOnEveryRun(t *testing.T) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	for _, tc := range []struct {
		name       string
		run        func() (ledger.SweepReport, error)
		wantErr    bool
		wantErrors float64 // SweepErrors; -1: not emitted
	}{
		{"success", func() (ledger.SweepReport, error) { return ledger.SweepReport{Seen: 2}, nil }, false, 0},
		{"row failures", func() (ledger.SweepReport, error) {
			return ledger.SweepReport{Seen: 2, Errors: []error{errors.New("a"), errors.New("b")}}, nil
		}, false, 2},
		{"whole sweep failed", func() (ledger.SweepReport, error) {
			return ledger.SweepReport{}, errors.New("list: throttled")
		}, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			var heartbeatBeforeRun bool
			m := &metrics.Emitter{W: &buf}
			err := sweep(context.Background(), "expire", m, log, func() (ledger.SweepReport, error) {
				heartbeatBeforeRun = strings.Contains(buf.String(), metrics.SweepHeartbeat)
				return tc.run()
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("sweep error = %v, want error %v", err, tc.wantErr)
			}
			if !heartbeatBeforeRun {
				t.Errorf("no %s before the sweep ran: %q", metrics.SweepHeartbeat, buf.String())
			}
			got := map[string]float64{}
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not EMF: %q", line)
				}
				if rec["Sweep"] != "expire" {
					t.Errorf("record without Sweep=expire: %s", line)
				}
				for _, name := range []string{metrics.SweepHeartbeat, metrics.SweepErrors} {
					if v, ok := rec[name].(float64); ok {
						got[name] += v
					}
				}
			}
			if got[metrics.SweepHeartbeat] != 1 {
				t.Errorf("%s = %v, want 1", metrics.SweepHeartbeat, got[metrics.SweepHeartbeat])
			}
			if v, ok := got[metrics.SweepErrors]; tc.wantErrors < 0 && ok || tc.wantErrors >= 0 && v != tc.wantErrors {
				t.Errorf("%s = %v (emitted %v), want %v", metrics.SweepErrors, v, ok, tc.wantErrors)
			}
		})
	}
}
