// Command reconcile is the reconcile Lambda function of the reset-notification ledger.
// See internal/handler.Reconcile for what it does and docs/configuration.md for its settings.
package main

import (
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/reconcileports"
)

func main() {
	fn := wire.Boot(settings.Reconcile, reconcileports.Ports, assemble.Reconciler)
	h := &handler.Reconcile{Deps: handler.Deps{Log: fn.Log, Metrics: fn.Metrics}, UseCase: fn.UseCase, Limit: fn.Settings.SweepLimit, RedriveEvery: 30 * time.Second}
	lambda.Start(h.Handle)
}
