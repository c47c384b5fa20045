package handler

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Deps is what every handler works with besides its use case: the
// function's logger and its metrics emitter.
type Deps struct {
	Log     *slog.Logger
	Metrics *metrics.Emitter
}

// invocation returns the worker identity recorded in the ledger for this
// invocation ("<function>/<request id>") and a logger carrying the request id.
//
// aws-lambda-go's lambdacontext.NewLogHandler (v1.55) also adds the request
// id, but it is not a drop-in replacement: it adds it only to records logged
// with a context (InfoContext, not Info), names it "requestId" and renames
// "msg" and "time" (which the end-to-end test, the gate and the handler
// tests read), writes only to stdout and chooses JSON and the level from
// AWS_LAMBDA_LOG_FORMAT and AWS_LAMBDA_LOG_LEVEL instead of the function's
// settings. The worker identity is needed here anyway.
func invocation(ctx context.Context, function settings.Role, log *slog.Logger) (ledger.Worker, *slog.Logger) {
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || lc.AwsRequestID == "" {
		return ledger.Worker(function), log
	}
	return ledger.Worker(string(function) + "/" + lc.AwsRequestID), log.With("request_id", lc.AwsRequestID)
}
