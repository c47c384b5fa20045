// Command infra is the CDK v2 app for the reset-notification delivery-claim ledger.
//
// Stage parameters come from CDK context (cdk.json or -c key=value): the functions' settings as
// internal/settings declares them, and the stack's own parameters (stageParams, context.go).
// Every stack is checked with cdk-nag's AwsSolutions pack: an unsuppressed error fails synth.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	defer jsii.Close()

	app := awscdk.NewApp(nil)
	cfg, err := configFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err == nil {
		// The stack is environment-agnostic: account and region come from the deploying credentials.
		_, err = NewLedgerStack(app, cfg.Props.Prefix, cfg.Props)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		printContextKeys(os.Stderr)
		os.Exit(1) // the deferred jsii.Close is skipped; the jsii child process exits with us
	}
	if cfg.Nag {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	app.Synth(nil)
}
