package main

import (
	"context"
	"fmt"
)

var cmdExplain = &command{
	name:     "explain",
	synopsis: "<challenge-id> [--json]",
	summary:  "show every row of a challenge with its full history",
	help: `Shows every ledger row of a password-reset challenge (one per channel) with
its full, append-only history as a timeline: when each transition happened,
from which state to which, why, which worker made it, under which policy
version and attempt number, the transport's acknowledgement id, the content
hash, and the dedupe key (which is also the idempotency key every transport
attempt carried). It also says whether the row's hash chain verifies; use
'ledgerctl verify' to turn a broken chain into a failing exit code.

Exits 3 if the challenge has no row.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		asJSON := fs.Bool("json", false, "print JSON instead of text")
		pos, err := a.parse(c, fs, args, 1, 1)
		if err != nil {
			return err
		}
		rows, err := a.challengeRows(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			out := struct {
				ChallengeID string    `json:"challenge_id"`
				Table       string    `json:"table"`
				Rows        []rowView `json:"rows"`
			}{ChallengeID: pos[0], Table: a.table}
			for _, e := range rows {
				out.Rows = append(out.Rows, newRowView(e))
			}
			return writeJSON(a.stdout, out)
		}
		for i, e := range rows {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			printRow(a.stdout, e)
		}
		return nil
	},
}
