package handler

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ReconcileUseCase is the reconcile use case (*reconcile.Reconciler).
type ReconcileUseCase interface {
	Reconcile(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error)
	Redrive(ctx context.Context, limit int) (ledger.SweepReport, error)
	Stats(ctx context.Context) (map[ledger.State]ledger.StateStats, error)
}

// Reconcile runs one reconcile sweep per scheduled event and publishes the
// open claims by state and age.
type Reconcile struct {
	Deps
	UseCase ReconcileUseCase
	Limit   int
	// RedriveEvery, if set, repeats the re-drive pass within one invocation
	// every RedriveEvery while the invocation has time left: the schedule
	// fires once a minute, and a second pass halfway bounds how long a due
	// row waits past REDRIVE_AFTER to half the schedule period.
	RedriveEvery time.Duration
}

// redriveReserve is the time a repeated re-drive pass needs before the
// invocation's deadline.
const redriveReserve = 10 * time.Second

// Handle runs the sweep and the re-drive pass, then publishes the open
// claims. A failure to publish them is logged, not returned: the sweep
// itself succeeded, and a retry of the invocation would only sweep again.
func (h *Reconcile) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	start := time.Now()
	worker, log := invocation(ctx, settings.Reconcile, h.Log)
	err := sweep(ctx, settings.Reconcile, h.Metrics, log, func() (ledger.SweepReport, error) {
		return h.UseCase.Reconcile(ctx, worker, h.Limit)
	})
	if err != nil {
		return err
	}
	if err := h.redrive(ctx, log); err != nil {
		return err
	}
	if err := publishStats(ctx, h.UseCase, h.Metrics, log); err != nil {
		log.Error("open-claim figures not published", "error", err.Error())
	}
	for next := start.Add(h.RedriveEvery); h.RedriveEvery > 0; next = next.Add(h.RedriveEvery) {
		if dl, ok := ctx.Deadline(); !ok || dl.Sub(next) < redriveReserve {
			return nil
		}
		select {
		case <-time.After(time.Until(next)):
		case <-ctx.Done():
			return nil
		}
		if err := h.redrive(ctx, log); err != nil {
			return err
		}
	}
	return nil
}

// redrive hands due rows no dispatch picked up back to dispatch and counts
// them by state.
func (h *Reconcile) redrive(ctx context.Context, log *slog.Logger) error {
	rep, err := h.UseCase.Redrive(ctx, h.Limit)
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		log.Error("re-drive failed", "error", e.Error())
	}
	for action, n := range rep.Actions {
		if st, ok := strings.CutSuffix(action, "->redriven"); ok {
			_ = h.Metrics.Count(metrics.Redriven, map[string]string{metrics.DimState: st}, float64(n))
		}
	}
	handed := false
	for action := range rep.Actions {
		handed = handed || strings.HasSuffix(action, "->redriven")
	}
	switch {
	case handed || len(rep.Errors) > 0:
		log.Warn("re-drive: due rows handed back to dispatch", "seen", rep.Seen, "actions", rep.Actions)
	case len(rep.Actions) > 0:
		log.Info("re-drive: due rows left to the stream or the queue, which still owe them", "seen", rep.Seen, "actions", rep.Actions)
	}
	// A failed hand-back is a wake-up that did not happen: the row is
	// listed again on the next pass.
	_ = h.Metrics.Count(metrics.WakeFailures, nil, float64(len(rep.Errors)))
	return nil
}

// publishStats emits OpenClaims, OpenClaimOldestAgeSeconds and
// OpenClaimsByAge for every open state.
func publishStats(ctx context.Context, r ReconcileUseCase, m *metrics.Emitter, log *slog.Logger) error {
	stats, err := r.Stats(ctx)
	if err != nil {
		return err
	}
	for st, ss := range stats {
		dims := map[string]string{metrics.DimState: string(st)}
		_ = m.Count(metrics.OpenClaims, dims, float64(ss.Count))
		_ = m.Emit(dims, "Seconds", map[string]float64{metrics.OldestOpenAge: ss.Oldest.Seconds()})
		for bucket, n := range ss.ByAge {
			_ = m.Count(metrics.OpenClaimsByAge, map[string]string{metrics.DimState: string(st), metrics.DimAgeBucket: bucket}, float64(n))
		}
		log.Info("open claims", "state", string(st), "count", ss.Count, "oldest_seconds", int(ss.Oldest.Seconds()), "by_age", ss.ByAge)
	}
	return nil
}
