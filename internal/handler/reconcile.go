package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Reconcile runs one reconcile sweep per scheduled event and publishes the
// open claims by state and age.
type Reconcile struct {
	Svc     *ledger.Service
	Log     *slog.Logger
	Metrics *metrics.Emitter
	Limit   int
}

// Handle runs the sweep, then publishes the open claims. A failure to
// publish them is logged, not returned: the sweep itself succeeded, and a
// retry of the invocation would only sweep again.
func (h *Reconcile) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	worker, log := invocation(ctx, "reconcile", h.Log)
	err := sweep(ctx, "reconcile", h.Metrics, log, func() (ledger.SweepReport, error) {
		return h.Svc.Reconcile(ctx, worker, h.Limit)
	})
	if err != nil {
		return err
	}
	if err := publishStats(ctx, h.Svc, h.Metrics, log); err != nil {
		log.Error("open-claim figures not published", "error", err.Error())
	}
	return nil
}

// publishStats emits OpenClaims, OpenClaimOldestAgeSeconds and
// OpenClaimsByAge for every open state.
func publishStats(ctx context.Context, svc *ledger.Service, m *metrics.Emitter, log *slog.Logger) error {
	stats, err := svc.Stats(ctx)
	if err != nil {
		return err
	}
	for st, ss := range stats {
		dims := map[string]string{"State": string(st)}
		_ = m.Count(metrics.OpenClaims, dims, float64(ss.Count))
		_ = m.Emit(dims, "Seconds", map[string]float64{metrics.OldestOpenAge: ss.Oldest.Seconds()})
		for bucket, n := range ss.ByAge {
			_ = m.Count(metrics.OpenClaimsByAge, map[string]string{"State": string(st), "AgeBucket": bucket}, float64(n))
		}
		log.Info("open claims", "state", string(st), "count", ss.Count, "oldest_seconds", int(ss.Oldest.Seconds()), "by_age", ss.ByAge)
	}
	return nil
}
