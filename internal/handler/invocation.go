package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// invocation returns the worker identity recorded in the ledger for this
// invocation ("<function>/<request id>") and a logger carrying the request id.
func invocation(ctx context.Context, function settings.Role, log *slog.Logger) (ledger.Worker, *slog.Logger) {
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || lc.AwsRequestID == "" {
		return ledger.Worker(function), log
	}
	return ledger.Worker(string(function) + "/" + lc.AwsRequestID), log.With("request_id", lc.AwsRequestID)
}
