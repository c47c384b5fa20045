package main

import (
	"context"
	"fmt"

	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdVerify = &command{
	name:     "verify",
	synopsis: "<challenge-id> | --all",
	summary:  "check the hash chain of a challenge's rows, or of every row",
	help: `Checks the hash-chained history of ledger rows: every entry's hash, every
link to its predecessor, the binding to the row's key, and that the history
ends in the row's state. An edited, reordered or removed entry breaks it.

With a challenge id it checks that challenge's rows; with --all it scans the
whole table (cost follows the table). Prints each broken row with the first
failing entry and exits 1 if any chain is broken; exits 3 if the challenge
has no row.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		all := fs.Bool("all", false, "verify every row of the table")
		pos, err := a.parse(c, fs, args, 0, 1)
		if err != nil {
			return err
		}
		if *all == (len(pos) == 1) {
			return usagef(c, "give either a challenge id or --all")
		}
		var rows, entries, broken int
		check := func(e ledger.Entry) error {
			rows++
			entries += len(e.History)
			cv := verifyChain(e)
			if cv.Verified {
				return nil
			}
			broken++
			fmt.Fprintf(a.stdout, "BROKEN  %s / %s  %s  [%s]\n  %s\n", e.Identity.ChallengeID, e.Identity.Channel, e.Key, e.State, cv.Error)
			switch i := cv.brokenAt(); {
			case i >= 0 && i < len(e.History):
				printEvent(a.stdout, "  ", i, e.History[i], "  <-- first failing entry")
			case i >= len(e.History):
				fmt.Fprintf(a.stdout, "  the history has %d entries (row version %d) and ends in %s; entries are missing after [%d]\n", len(e.History), e.Version, e.Last().To, len(e.History)-1)
			}
			return nil
		}
		if *all {
			sc, err := a.scanner(ctx)
			if err != nil {
				return err
			}
			if err := sc.All(ctx, dynamostore.ScanFilter{}, check); err != nil {
				return err
			}
		} else {
			got, err := a.challengeRows(ctx, pos[0])
			if err != nil {
				return err
			}
			for _, e := range got {
				_ = check(e)
			}
		}
		if broken > 0 {
			return &exitError{code: exitFailure, err: fmt.Errorf("verification failed: %d of %d rows have a broken hash chain", broken, rows)}
		}
		fmt.Fprintf(a.stdout, "ok: %d rows, %d history entries, every hash chain verifies\n", rows, entries)
		return nil
	},
}
