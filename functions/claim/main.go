// Command claim is the claim Lambda function of the reset-notification ledger.
// See internal/handler.Claim for what it does and docs/configuration.md for its settings.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/dictionaries"
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
)

func main() {
	fn := wire.Boot(settings.Claim, wire.ClaimPorts, assemble.Claimer)
	dicts, err := dictionaries.Stack()
	if err != nil {
		fn.Log.Error("wiring failed", "error", err.Error())
		os.Exit(2)
	}
	h := &handler.Claim{
		Deps:    handler.Deps{Log: fn.Log, Metrics: fn.Metrics},
		UseCase: fn.UseCase,
		// Verify only: the intent key's policy lets claim check a seal,
		// never make one.
		Seals:    &kmsseal.KMS{Client: kms.NewFromConfig(fn.Config), KeyARN: fn.Settings.IntentKeyARN},
		AcceptV1: fn.Settings.AcceptIntentV1,
		AcceptV2: fn.Settings.AcceptIntentV2,
		// Dispatch opens with the same set: claim dead-letters an
		// envelope naming a dictionary dispatch would not hold.
		Dictionaries: dicts,
	}
	lambda.Start(h.Handle)
}
