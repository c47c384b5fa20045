package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Exit codes.
const (
	exitOK       = 0
	exitFailure  = 1
	exitUsage    = 2
	exitNotFound = 3
)

// app holds one invocation's dependencies and global settings. Tests build
// one with an emulator configuration and a fixed clock.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	loadConfig     func(context.Context) (aws.Config, error)
	// isTerminal reports whether w is an interactive terminal (for the
	// export progress line).
	isTerminal func(w io.Writer) bool
	// afterPage, if set, runs after each export page is written and
	// checkpointed; an error stops the export as an interruption would.
	afterPage func(page int) error

	// Global flags.
	table, contentTable, policyVersion string

	cfg    *aws.Config
	dynamo *dynamodb.Client
	// operatorURL is the operator function's URL (resolve posts to it);
	// httpClient, if set, makes that request.
	operatorURL string
	httpClient  *http.Client
}

func newApp(stdout, stderr io.Writer, getenv func(string) string) *app {
	return &app{
		stdout: stdout, stderr: stderr, getenv: getenv, now: time.Now,
		isTerminal: isTerminal,
		table:      strings.TrimSpace(getenv(settings.LedgerTable.Env)),
		// The content table is optional: resolve purges any sealed content
		// left for a row it closes when it is set.
		contentTable:  strings.TrimSpace(getenv(settings.ContentTable.Env)),
		policyVersion: strings.TrimSpace(getenv(settings.PolicyVersion.Env)),
		operatorURL:   strings.TrimSpace(getenv(operatorURLEnv)),
	}
}

// isTerminal reports whether w is a character device (a terminal), using
// only the standard library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// run executes args and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	err := a.dispatch(ctx, args)
	return a.report(err)
}

// report prints err (if any) and maps it to an exit code.
func (a *app) report(err error) int {
	var (
		help  *helpRequest
		usage *usageError
		exit  *exitError
	)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &help):
		help.print(a.stdout)
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(a.stderr, "ledgerctl: %v\n", usage.err)
		if usage.cmd != nil {
			fmt.Fprintf(a.stderr, "usage: ledgerctl %s %s\nRun 'ledgerctl %s --help' for details.\n", usage.cmd.name, usage.cmd.synopsis, usage.cmd.name)
		} else {
			fmt.Fprintln(a.stderr, "Run 'ledgerctl --help' for the list of commands.")
		}
		return exitUsage
	case errors.As(err, &exit):
		if exit.err != nil {
			fmt.Fprintf(a.stderr, "ledgerctl: %v\n", exit.err)
		}
		return exit.code
	}
	err = a.explainAWS(err)
	fmt.Fprintf(a.stderr, "ledgerctl: %v\n", err)
	if errors.Is(err, ledger.ErrNotFound) {
		return exitNotFound
	}
	return exitFailure
}

// exitError carries an exit code; err (optional) is printed on stderr.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func notFound(format string, args ...any) error {
	return &exitError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

// awsConfig loads the SDK configuration once.
func (a *app) awsConfig(ctx context.Context) (aws.Config, error) {
	if a.cfg != nil {
		return *a.cfg, nil
	}
	cfg, err := a.loadConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, &usageError{err: errors.New("no AWS region: set AWS_REGION (or a region in the AWS profile)")}
	}
	a.cfg = &cfg
	return cfg, nil
}

// db returns the DynamoDB client; it requires the ledger table to be set.
func (a *app) db(ctx context.Context) (*dynamodb.Client, error) {
	if a.table == "" {
		return nil, &usageError{err: errors.New("no ledger table: set --table or " + settings.LedgerTable.Env)}
	}
	if a.dynamo != nil {
		return a.dynamo, nil
	}
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return nil, err
	}
	a.dynamo = dynamodb.NewFromConfig(cfg)
	return a.dynamo, nil
}

func (a *app) store(ctx context.Context) (*dynamostore.Store, error) {
	db, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	s := settings.Defaults()
	if v := strings.TrimSpace(a.getenv(settings.OpenIndexShards.Env)); v != "" {
		if err := settings.OpenIndexShards.Set(&s, v); err != nil {
			return nil, &usageError{err: fmt.Errorf("%s: %w", settings.OpenIndexShards.Env, err)}
		}
	}
	return dynamostore.New(db, a.table, s.OpenIndexShards), nil
}

func (a *app) scanner(ctx context.Context) (*dynamostore.Scanner, error) {
	db, err := a.db(ctx)
	if err != nil {
		return nil, err
	}
	return dynamostore.NewScanner(db, a.table), nil
}

// readOnly parses a command that takes no argument and only --json, and
// opens the store it reads.
func (a *app) readOnly(ctx context.Context, c *command, args []string) (asJSON bool, st ledger.Store, err error) {
	fs := a.flagSet(c.name)
	j := fs.Bool("json", false, "print JSON instead of text")
	if _, err := a.parse(c, fs, args, 0, 0); err != nil {
		return false, nil, err
	}
	st, err = a.store(ctx)
	return *j, st, err
}

// challengeRows reads every row of challenge id, one per channel, skipping
// channels without a row. It fails with a not-found exit when there is none.
func (a *app) challengeRows(ctx context.Context, id string) ([]ledger.Entry, error) {
	if err := (ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: id, Channel: ledger.Email}).Validate(); err != nil {
		return nil, &usageError{err: fmt.Errorf("challenge id %q: %w", id, err)}
	}
	st, err := a.store(ctx)
	if err != nil {
		return nil, err
	}
	var rows []ledger.Entry
	for _, ch := range ledger.Channels {
		key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: id, Channel: ch}.Key()
		e, err := st.Get(ctx, key)
		if errors.Is(err, ledger.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, e)
	}
	if len(rows) == 0 {
		return nil, notFound("no ledger rows for challenge %s in table %s (looked for channels %s)", id, a.table, channelList())
	}
	return rows, nil
}

func channelList() string {
	names := make([]string, len(ledger.Channels))
	for i, c := range ledger.Channels {
		names[i] = string(c)
	}
	return strings.Join(names, ", ")
}
