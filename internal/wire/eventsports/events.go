// Package eventsports builds the events function's ports (see package wire):
// the attempt-proof key (KMS VerifyMac), with which it checks that a
// provider event comes from a send dispatch made. Only functions/events
// imports it.
package eventsports

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
)

// Ports adds the events function's ports to p.
func Ports(_ context.Context, env wire.Env, p *assemble.Ports) error {
	p.Proofs = &attemptproof.KMS{Client: kms.NewFromConfig(env.Config), KeyARN: env.Settings.AttemptProofKeyARN}
	return nil
}
