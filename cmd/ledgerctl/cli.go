package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/resetledger/resetledger/internal/settings"
)

// command is one ledgerctl subcommand.
type command struct {
	name     string
	synopsis string // arguments after "ledgerctl <name>"
	summary  string // one line for the command list
	help     string // what it does, for --help
	run      func(a *app, ctx context.Context, c *command, args []string) error
}

func commands() []*command {
	return []*command{
		cmdExplain, cmdTimeline, cmdStuck, cmdResolve, cmdStats, cmdVerify, cmdExport, cmdSend,
	}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// globalFlagNames are the flags every command accepts.
var globalFlagNames = map[string]bool{"table": true, "content-table": true, "policy-version": true}

// addGlobalFlags declares the global flags on fs, bound to a's settings.
func (a *app) addGlobalFlags(fs *flag.FlagSet) {
	fs.StringVar(&a.table, "table", a.table, "ledger `table` name (env "+settings.LedgerTable.Env+")")
	fs.StringVar(&a.contentTable, "content-table", a.contentTable,
		"sealed-content `table` name (env "+settings.ContentTable.Env+"); ledgerctl no longer writes it: the operator function purges a resolved row's content")
	fs.StringVar(&a.policyVersion, "policy-version", a.policyVersion,
		"policy `version` of the figures ledgerctl computes (env "+settings.PolicyVersion.Env+
			", default "+settings.PolicyVersion.Default+"); resolve's entry records the operator function's")
}

func (a *app) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	a.addGlobalFlags(fs)
	return fs
}

// parse parses args for c, allowing flags before and after positional
// arguments ("--" ends flags), and checks the number of positionals.
func (a *app) parse(c *command, fs *flag.FlagSet, args []string, minPos, maxPos int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{cmd: c, fs: fs}
			}
			return nil, &usageError{cmd: c, err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	switch {
	case len(pos) < minPos:
		return nil, &usageError{cmd: c, err: fmt.Errorf("%s: missing argument", c.name)}
	case len(pos) > maxPos:
		return nil, &usageError{cmd: c, err: fmt.Errorf("%s: unexpected argument %q", c.name, pos[maxPos])}
	}
	return pos, nil
}

// usageError is bad command-line input: exit code 2.
type usageError struct {
	cmd *command // nil for errors before a command is known
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(c *command, format string, args ...any) error {
	return &usageError{cmd: c, err: fmt.Errorf(c.name+": "+format, args...)}
}

// helpRequest asks for the help of a command (cmd nil: the tool's help).
type helpRequest struct {
	cmd *command
	fs  *flag.FlagSet
}

func (h *helpRequest) Error() string { return "help requested" }

func (h *helpRequest) print(w io.Writer) {
	if h.cmd == nil {
		printToolHelp(w, h.fs)
		return
	}
	fmt.Fprintf(w, "Usage: ledgerctl %s %s\n\n%s\n", h.cmd.name, h.cmd.synopsis, strings.TrimSpace(h.cmd.help))
	var local, global []*flag.Flag
	h.fs.VisitAll(func(f *flag.Flag) {
		if globalFlagNames[f.Name] {
			global = append(global, f)
		} else {
			local = append(local, f)
		}
	})
	if len(local) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		printFlags(w, local)
	}
	fmt.Fprintln(w, "\nGlobal flags:")
	printFlags(w, global)
	fmt.Fprint(w, footer)
}

const footer = `
AWS region, credentials and endpoint come from the SDK environment
(AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL for a local emulator, ...).

Exit codes: 0 ok, 1 failure (including a broken hash chain), 2 usage, 3 not found.
`

func printToolHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: ledgerctl [global flags] <command> [arguments] [flags]

ledgerctl inspects the reset-notification delivery-claim ledger for
operators and compliance reviewers, and records operator decisions.

Commands:
`)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nGlobal flags (accepted before or after the command):")
	var global []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { global = append(global, f) })
	printFlags(w, global)
	fmt.Fprint(w, "\nRun 'ledgerctl <command> --help' for a command's arguments and flags.\n")
	fmt.Fprint(w, footer)
}

func printFlags(w io.Writer, flags []*flag.Flag) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range flags {
		placeholder, usage := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if placeholder != "" {
			name += " " + strings.ToUpper(placeholder)
		}
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool && f.DefValue != "" && !globalFlagNames[f.Name] {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", name, usage)
	}
	_ = tw.Flush()
}

// dispatch parses the global flags and runs the command.
func (a *app) dispatch(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ledgerctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	a.addGlobalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return &helpRequest{fs: fs}
		}
		return &usageError{err: err}
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return &usageError{err: errors.New("no command given")}
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		if len(rest) == 0 {
			return &helpRequest{fs: fs}
		}
		name, rest = rest[0], []string{"--help"}
	}
	c := lookup(name)
	if c == nil {
		return &usageError{err: fmt.Errorf("unknown command %q", name)}
	}
	return c.run(a, ctx, c, rest)
}
