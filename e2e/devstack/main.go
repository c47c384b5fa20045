// Command devstack does the few emulator chores localstack/deploy-local.sh and
// localstack/run-local.sh need and no other tool covers, with the AWS SDK's
// default configuration (AWS_ENDPOINT_URL points it at the emulator):
//
//	devstack ses-identity IDENTITY...        create (verify) SES identities: addresses or domains
//	devstack outputs-env [--outputs F]       print the stack outputs as the shell exports ledgerctl
//	                                         reads (LEDGER_TABLE, CONTENT_TABLE, INTENT_QUEUE_URL, ...)
//	devstack wait-row [--outputs F] [--timeout 60s] CHALLENGE CHANNEL
//	                                         wait until the challenge's row on CHANNEL is terminal;
//	                                         print its state (exit 1 on timeout)
//	devstack emails [--endpoint URL] --to ADDRESS
//	                                         print the messages the emulator's SES captured for ADDRESS
//	devstack webhook-secret [--outputs F] --out FILE
//	                                         write the value of the stack's webhook signing secret
//	                                         (WebhookSecretArn) to FILE, mode 0600, for the local
//	                                         webhook provider (--secret-file); never print it
//	devstack digest-lock [--outputs F] --template T
//	                                         give the digest bucket the Object Lock configuration
//	                                         template T declares if it has none (the emulator's
//	                                         CloudFormation creates the bucket without it)
//
// It is a development tool for the local stack, not part of the ledger.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/resetledger/resetledger/e2e"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/sdkhttp"
	"github.com/resetledger/resetledger/internal/wire/webhooksecret"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const usage = `usage: devstack ses-identity IDENTITY...
       devstack outputs-env [--outputs FILE]
       devstack wait-row [--outputs FILE] [--timeout 60s] CHALLENGE CHANNEL
       devstack emails [--endpoint URL] --to ADDRESS
       devstack webhook-secret [--outputs FILE] --out FILE
       devstack digest-lock [--outputs FILE] --template FILE`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "ses-identity":
		err = sesIdentity(ctx, rest, stdout)
	case "outputs-env":
		err = outputsEnv(rest, stdout)
	case "wait-row":
		err = waitRow(ctx, rest, stdout)
	case "emails":
		err = emails(ctx, rest, stdout)
	case "webhook-secret":
		err = webhookSecret(ctx, rest, stdout)
	case "digest-lock":
		err = digestLock(ctx, rest, stdout)
	default:
		err = errUsage
	}
	var exit exitCode
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, usage)
		return 2
	case errors.As(err, &exit):
		return int(exit)
	}
	fmt.Fprintln(stderr, "devstack:", err)
	return 1
}

var errUsage = errors.New("usage")

// exitCode ends the command with that code and no message.
type exitCode int

func (c exitCode) Error() string { return fmt.Sprintf("exit %d", int(c)) }

func awsConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := sdkhttp.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("no AWS region: set AWS_REGION (eval \"$(localstack/ministack.sh env)\")")
	}
	return cfg, nil
}

func sesIdentity(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return err
	}
	client := sesv2.NewFromConfig(cfg)
	for _, id := range args {
		_, err := client.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(id)})
		var exists *sestypes.AlreadyExistsException
		switch {
		case errors.As(err, &exists):
			fmt.Fprintf(stdout, "SES identity %s already exists\n", id)
		case err != nil:
			return fmt.Errorf("create SES identity %s: %w", id, err)
		default:
			fmt.Fprintf(stdout, "SES identity %s created\n", id)
		}
	}
	return nil
}

func outputsEnv(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("outputs-env", flag.ContinueOnError)
	outputsFile := fs.String("outputs", filepath.Join(".run", "outputs.json"), "stack outputs `file`")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return errUsage
	}
	out, err := e2e.ReadOutputs(*outputsFile)
	if err != nil {
		return err
	}
	export := func(name, v string) {
		fmt.Fprintf(stdout, "export %s='%s'\n", name, strings.ReplaceAll(v, "'", `'\''`))
	}
	export("LEDGER_STACK", out.Stack)
	for _, o := range outputs.All() {
		if o.Env != "" {
			export(o.Env, localURL(o, out.All[o.Name]))
		}
	}
	return nil
}

// webhookSecret writes the stack's webhook signing secret to a file only its owner can read: the
// local webhook provider checks every request's signature with it. The value is never printed.
func webhookSecret(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("webhook-secret", flag.ContinueOnError)
	outputsFile := fs.String("outputs", filepath.Join(".run", "outputs.json"), "stack outputs `file`")
	dest := fs.String("out", "", "`file` to write the secret to (mode 0600)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *dest == "" {
		return errUsage
	}
	out, err := e2e.ReadOutputs(*outputsFile)
	if err != nil {
		return err
	}
	arn := out.All[outputs.WebhookSecretARN.Name]
	if arn == "" {
		return fmt.Errorf("%s has no %s output: the stage has no webhook transport", *outputsFile, outputs.WebhookSecretARN.Name)
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return err
	}
	secret, err := webhooksecret.Load(ctx, secretsmanager.NewFromConfig(cfg), arn)
	if err != nil {
		return err
	}
	tmp := *dest + ".tmp"
	_ = os.Remove(tmp) // WriteFile keeps the mode of a file that exists
	if err := os.WriteFile(tmp, secret, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, *dest); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "webhook signing secret of %s written to %s\n", arn, *dest)
	return nil
}

func waitRow(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("wait-row", flag.ContinueOnError)
	outputsFile := fs.String("outputs", filepath.Join(".run", "outputs.json"), "stack outputs `file`")
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait")
	if err := fs.Parse(args); err != nil || fs.NArg() != 2 {
		return errUsage
	}
	challenge, channel := fs.Arg(0), ledger.Channel(fs.Arg(1))
	out, err := e2e.ReadOutputs(*outputsFile)
	if err != nil {
		return err
	}
	cfg, err := awsConfig(ctx)
	if err != nil {
		return err
	}
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), out.LedgerTable, dynamostore.DefaultShards)
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: challenge, Channel: channel}.Key()
	row, err := e2e.WaitTerminal(ctx, store, key, *timeout, 250*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s/%s: %s", challenge, channel, row.State)
	if row.AckID != "" {
		fmt.Fprintf(stdout, " (ack %s)", row.AckID)
	}
	if row.Reason != "" {
		fmt.Fprintf(stdout, ": %s", row.Reason)
	}
	fmt.Fprintln(stdout)
	return nil
}

func emails(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("emails", flag.ContinueOnError)
	endpoint := fs.String("endpoint", os.Getenv("AWS_ENDPOINT_URL"), "emulator `url` (env AWS_ENDPOINT_URL)")
	to := fs.String("to", "", "recipient `address`")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *to == "" || *endpoint == "" {
		return errUsage
	}
	all, err := e2e.CapturedEmails(ctx, &http.Client{Timeout: 10 * time.Second}, *endpoint)
	if err != nil {
		return err
	}
	msgs := e2e.EmailsTo(all, *to)
	if len(msgs) == 0 {
		fmt.Fprintf(stdout, "no captured email to %s\n", *to)
		return exitCode(1)
	}
	for i, m := range msgs {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "Message-Id: %s\nDate:       %s\nFrom:       %s\nTo:         %s\nSubject:    %s\n\n%s\n",
			m.MessageID, m.Sent().Format(time.RFC3339), m.Source, strings.Join(m.To, ", "), m.Subject, m.BodyText)
	}
	return nil
}

// localURL is the address a function URL output answers at on the emulator: its path-based
// form under AWS_ENDPOINT_URL (ministack serves <endpoint>/_aws/lambda-url/<url id>/), so that
// ledgerctl reaches it. Other outputs, and any output without an emulator, are unchanged.
func localURL(o outputs.Output, v string) string {
	endpoint := strings.TrimRight(os.Getenv("AWS_ENDPOINT_URL"), "/")
	if o != outputs.OperatorFunctionURL || endpoint == "" {
		return v
	}
	u, err := url.Parse(v)
	if err != nil || !strings.Contains(u.Host, ".lambda-url.") {
		return v
	}
	id, _, _ := strings.Cut(u.Host, ".")
	return endpoint + "/_aws/lambda-url/" + id + "/"
}
