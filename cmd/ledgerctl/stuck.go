package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdStuck = &command{
	name:     "stuck",
	synopsis: "[--json]",
	summary:  "list rows that need attention: dispatching past lease, unknown, quarantined",
	help: `Lists the rows that need attention, oldest first: rows in dispatching past
their lease (the worker died or hung mid-send), rows whose outcome is
unknown, and quarantined rows that wait for an operator decision
('ledgerctl resolve'). AGE is how long the row has been in its state.

It reads the sparse open-row index, so its cost follows the open rows, not
the table.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		asJSON, st, err := a.readOnly(ctx, c, args)
		if err != nil {
			return err
		}
		now := a.now().UTC()
		var rows []ledger.Entry
		for _, q := range []struct {
			state ledger.State
			dueBy time.Time
		}{
			{ledger.Dispatching, now}, // OpenDue of a dispatching row is its lease end
			{ledger.Unknown, time.Time{}},
			{ledger.Quarantined, time.Time{}},
		} {
			got, err := st.ListOpen(ctx, q.state, q.dueBy, 0)
			if err != nil {
				return err
			}
			rows = append(rows, got...)
		}
		slices.SortStableFunc(rows, func(x, y ledger.Entry) int { return enteredState(x).Compare(enteredState(y)) })

		views := make([]stuckView, len(rows))
		for i, e := range rows {
			views[i] = newStuckView(e, now)
		}
		if asJSON {
			return writeJSON(a.stdout, struct {
				Table string      `json:"table"`
				AsOf  string      `json:"as_of"`
				Rows  []stuckView `json:"rows"`
			}{a.table, jsonTime(now), views})
		}
		if len(rows) == 0 {
			fmt.Fprintln(a.stdout, "no stuck rows: nothing dispatching past its lease, unknown or quarantined")
			return nil
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "AGE\tSTATE\tSINCE\tCHALLENGE\tCHANNEL\tATTEMPTS\tSTATUS\tDEDUPE KEY\tREASON")
		for _, v := range views {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n",
				v.Age, v.State, textTime(v.since), v.ChallengeID, v.Channel, v.Attempts, v.Status, v.DedupeKey, orDash(v.Reason))
		}
		return tw.Flush()
	},
}

// stuckView is one row of stuck.
type stuckView struct {
	DedupeKey   string  `json:"dedupe_key"`
	ChallengeID string  `json:"challenge_id"`
	Channel     string  `json:"channel"`
	State       string  `json:"state"`
	Since       string  `json:"since"`
	Age         string  `json:"age"`
	AgeSeconds  float64 `json:"age_seconds"`
	Attempts    int     `json:"attempts"`
	Status      string  `json:"status"`
	LeaseUntil  string  `json:"lease_until,omitempty"`
	NextCheckAt string  `json:"next_check_at,omitempty"`
	AckID       string  `json:"ack_id,omitempty"`
	Reason      string  `json:"reason,omitempty"`

	since time.Time
}

func newStuckView(e ledger.Entry, now time.Time) stuckView {
	since := enteredState(e)
	v := stuckView{
		DedupeKey: e.Key, ChallengeID: e.Identity.ChallengeID, Channel: string(e.Identity.Channel),
		State: e.State.String(), Since: jsonTime(since), Age: age(now.Sub(since)), AgeSeconds: now.Sub(since).Seconds(),
		Attempts: e.Attempts, LeaseUntil: jsonTime(e.LeaseUntil), NextCheckAt: jsonTime(e.NextCheckAt),
		AckID: e.AckID, Reason: e.Reason, since: since,
	}
	switch e.State {
	case ledger.Dispatching:
		v.Status = "lease expired " + age(now.Sub(e.LeaseUntil)) + " ago"
	case ledger.Unknown:
		if e.NextCheckAt.After(now) {
			v.Status = "reconcile in " + age(e.NextCheckAt.Sub(now))
		} else {
			v.Status = "reconcile due"
		}
	case ledger.Quarantined:
		v.Status = "needs an operator decision"
	}
	return v
}
