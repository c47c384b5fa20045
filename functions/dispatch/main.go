// Command dispatch is the dispatch Lambda function of the reset-notification ledger.
// See internal/handler.Dispatch for what it does and docs/configuration.md for its settings.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/dispatch"
)

func main() {
	fn := wire.Boot(settings.Dispatch, dispatch.Ports)
	h := &handler.Dispatch{Deps: fn.Deps}
	lambda.Start(h.Invoke)
}
