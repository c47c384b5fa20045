// Command claim is the claim Lambda function of the reset-notification ledger.
// See internal/handler.Claim for what it does and docs/configuration.md for its settings.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/wire"
)

func main() {
	fn := wire.Boot(settings.Claim, nil) // the ledger's tables only
	h := &handler.Claim{Deps: fn.Deps}
	lambda.Start(h.Handle)
}
