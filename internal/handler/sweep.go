package handler

import (
	"context"
	"log/slog"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// sweep runs one scheduled sweep and reports it: a SweepHeartbeat before
// anything else (so a run that fails or times out still proves the schedule
// fires), every per-row failure logged, their count as SweepErrors, and a
// summary line. Transitions are counted by the use case itself (assemble.Ports.OnTransition).
func sweep(ctx context.Context, name settings.Role, m *metrics.Emitter, log *slog.Logger, run func() (ledger.SweepReport, error)) error {
	dims := map[string]string{metrics.DimSweep: string(name)}
	_ = m.Count(metrics.SweepHeartbeat, dims, 1)
	rep, err := run()
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		log.Error(string(name)+" row failed", "error", e.Error())
	}
	_ = m.Count(metrics.SweepErrors, dims, float64(len(rep.Errors)))
	log.Info(string(name)+" sweep", "seen", rep.Seen, "actions", rep.Actions)
	return nil
}
