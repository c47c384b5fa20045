package handler

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ExpireUseCase is the expire use case (*expire.Expirer).
type ExpireUseCase interface {
	ExpireSweep(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error)
}

// Expire runs one expire sweep per scheduled event.
type Expire struct {
	Deps
	UseCase ExpireUseCase
	Limit   int
}

// Handle runs the sweep.
func (h *Expire) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	worker, log := invocation(ctx, settings.Expire, h.Log)
	return sweep(ctx, settings.Expire, h.Metrics, log, func() (ledger.SweepReport, error) {
		return h.UseCase.ExpireSweep(ctx, worker, h.Limit)
	})
}
