package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Expire runs one expire sweep per scheduled event.
type Expire struct {
	Svc     *ledger.Service
	Log     *slog.Logger
	Metrics *metrics.Emitter
	Limit   int
}

func (h *Expire) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	worker, log := invocation(ctx, "expire", h.Log)
	rep, err := h.Svc.ExpireSweep(ctx, worker, h.Limit)
	if err != nil {
		return err
	}
	for _, e := range rep.Errors {
		log.Error("expire row failed", "error", e.Error())
	}
	_ = h.Metrics.Count(metrics.Transitions, map[string]string{"State": string(ledger.Expired), "Channel": "any"}, float64(rep.Actions["claimed->expired"]))
	_ = h.Metrics.Count(metrics.SweepErrors, map[string]string{"Sweep": "expire"}, float64(len(rep.Errors)))
	log.Info("expire sweep", "seen", rep.Seen, "actions", rep.Actions)
	return nil
}
