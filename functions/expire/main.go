// Command expire is the expire Lambda function of the reset-notification ledger.
// See internal/handler.Expire for what it does and docs/configuration.md for its settings.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
)

func main() {
	fn := wire.Boot(settings.Expire, nil, assemble.Expirer) // the ledger's tables only
	h := &handler.Expire{Deps: handler.Deps{Log: fn.Log, Metrics: fn.Metrics}, UseCase: fn.UseCase, Limit: fn.Settings.SweepLimit}
	lambda.Start(h.Handle)
}
