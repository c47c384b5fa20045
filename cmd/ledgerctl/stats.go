package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdStats = &command{
	name:     "stats",
	synopsis: "[--json]",
	summary:  "count due open claims by state and by how long past due",
	help: `Counts the open claims (held, claimed, deferred, dispatching, unknown,
quarantined) that are due: their sweep time passed (a claim's challenge
expiry, a lease's end, a deferred row's next attempt, an unknown row's next
check; a quarantined row is always due). By state and by how long past due,
with the most overdue. It reads the open-row index alone, for the due
entries only: its cost follows what is due, not what is open or the table.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		asJSON, st, err := a.readOnly(ctx, c, args)
		if err != nil {
			return err
		}
		stats, err := ledger.ReadStats(ctx, st, a.now())
		if err != nil {
			return err
		}
		buckets := bucketNames()
		type stateView struct {
			State         string         `json:"state"`
			Open          int            `json:"open"`
			Oldest        string         `json:"oldest,omitempty"`
			OldestSeconds float64        `json:"oldest_seconds"`
			ByAge         map[string]int `json:"by_age"`
		}
		var views []stateView
		for _, st := range ledger.States {
			s, ok := stats[st]
			if !ok {
				continue
			}
			v := stateView{State: st.String(), Open: s.Count, OldestSeconds: s.Oldest.Seconds(), ByAge: map[string]int{}}
			if s.Count > 0 {
				v.Oldest = age(s.Oldest)
			}
			for _, b := range buckets {
				v.ByAge[b] = s.ByAge[b]
			}
			views = append(views, v)
		}
		if asJSON {
			return writeJSON(a.stdout, struct {
				Table   string      `json:"table"`
				AsOf    string      `json:"as_of"`
				Buckets []string    `json:"age_buckets"`
				States  []stateView `json:"states"`
			}{a.table, jsonTime(a.now()), buckets, views})
		}
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "STATE\tOPEN\tOLDEST\t%s\n", strings.Join(buckets, "\t"))
		for _, v := range views {
			cells := []string{v.State, strconv.Itoa(v.Open), orDash(v.Oldest)}
			for _, b := range buckets {
				cells = append(cells, strconv.Itoa(v.ByAge[b]))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		return tw.Flush()
	},
}

// bucketNames lists ledger's age buckets in order.
func bucketNames() []string {
	var names []string
	for _, b := range ledger.AgeBuckets {
		names = append(names, ledger.BucketName(b-time.Nanosecond))
	}
	return append(names, ledger.BucketName(ledger.AgeBuckets[len(ledger.AgeBuckets)-1]))
}
