// Command operate is the operator function of the reset-notification ledger:
// reached through its function URL (AuthType AWS_IAM), it makes the writes
// an operator asks for (ledgerctl resolve) and records the caller AWS
// authenticated. See internal/handler.Operate and docs/operations.md.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
)

func main() {
	fn := wire.Boot(settings.Operate, nil, assemble.Resolver) // the ledger's tables only
	h := &handler.Operate{Deps: handler.Deps{Log: fn.Log, Metrics: fn.Metrics}, UseCase: fn.UseCase}
	lambda.Start(h.Handle)
}
