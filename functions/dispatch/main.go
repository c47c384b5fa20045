// Command dispatch is the dispatch Lambda function of the reset-notification ledger.
// See internal/handler.Dispatch for what it does and docs/configuration.md for its settings.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/dispatchports"
)

func main() {
	fn := wire.Boot(settings.Dispatch, dispatchports.Ports, assemble.Dispatcher)
	h := handler.NewDispatch(handler.Deps{Log: fn.Log, Metrics: fn.Metrics}, fn.UseCase, dynamostore.Records{})
	lambda.Start(h.Invoke)
}
