package handler

import (
	"context"
	"log/slog"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// sweep runs one scheduled sweep and reports it: every per-row failure
// logged, their count as SweepErrors, and a summary line. Transitions are
// counted by the service itself.
func sweep(ctx context.Context, name string, m *metrics.Emitter, log *slog.Logger, run func() (ledger.SweepReport, error)) error {
	rep, err := run()
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		log.Error(name+" row failed", "error", e.Error())
	}
	_ = m.Count(metrics.SweepErrors, map[string]string{"Sweep": name}, float64(len(rep.Errors)))
	log.Info(name+" sweep", "seen", rep.Seen, "actions", rep.Actions)
	return nil
}
