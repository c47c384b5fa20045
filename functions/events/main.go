// Command events is the provider-events Lambda function of the
// reset-notification ledger: it records SES and End User Messaging SMS
// delivery events in the ledger's evidence trail. See
// internal/handler.Events for what it does and docs/configuration.md for its settings.
package main

import (
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/eventsports"
)

func main() {
	fn := wire.Boot(settings.Events, eventsports.Ports, assemble.EventRecorder)
	h := &handler.Events{Deps: handler.Deps{Log: fn.Log, Metrics: fn.Metrics}, UseCase: fn.UseCase}
	lambda.Start(h.Handle)
}
