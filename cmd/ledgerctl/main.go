// Command ledgerctl is the operator and compliance-reviewer tool of the
// reset-notification delivery-claim ledger.
//
// It reads the ledger table to explain what happened to a challenge, lists
// rows that need attention, exports evidence as JSON Lines, verifies the
// hash-chained histories, and records operator decisions on rows whose
// outcome is unknown. It uses the AWS SDK's default configuration, so the
// same flags work against AWS and a local emulator (AWS_ENDPOINT_URL).
//
//	ledgerctl [global flags] <command> [arguments] [flags]
//
// Run `ledgerctl --help` or `ledgerctl <command> --help` for details.
//
// Exit codes: 0 ok, 1 failure (including a broken hash chain), 2 usage,
// 3 not found.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/resetledger/resetledger/internal/sdkhttp"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one ledgerctl invocation and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := newApp(stdout, stderr, os.Getenv)
	// Every request with a body of its own, as the functions send them (internal/sdkhttp).
	a.loadConfig = func(ctx context.Context) (aws.Config, error) { return sdkhttp.LoadDefaultConfig(ctx) }
	return a.run(ctx, args)
}
