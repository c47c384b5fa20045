package main

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// defaultTimelineLimit is how many rows timeline lists unless --limit says.
const defaultTimelineLimit = 100

var cmdTimeline = &command{
	name:     "timeline",
	synopsis: "(--subject REF | --destination-ref REF) [--since TIME] [--limit N] [--json]",
	summary:  "list what one account or one destination was sent, newest first",
	help: `Lists the ledger rows of one subject (the account: the intents' subject_ref)
or of one destination (the intents' destination_ref), newest first: when each
challenge's row was created, the challenge and channel, its state now, the
reason it is in that state (a row stopped by a send limit or superseded by a
newer challenge names the rule here), the transport attempts made and the
challenge's expiry. One row is one logical message: a repeated delivery of
the same intent is not a new row (it is deduplicated), so every row is a
reset that was asked for. 'ledgerctl explain <challenge-id>' shows a row's
whole history.

Give the opaque reference the producer published, never an address: a
value outside the intent's alphabet (1 to 256 of A-Za-z0-9._:-) is refused.
Rows whose intent carried no subject_ref are on no subject's timeline; find
them by --destination-ref.

It queries an index of the ledger table kept for it (KEYS_ONLY, by
reference and creation time) and reads the listed rows; it never scans the
table. The index is eventually consistent: a row claimed a moment ago may
not be listed yet.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		subject := fs.String("subject", "", "list the rows of the subject (account) `REF` (an intent's subject_ref)")
		destination := fs.String("destination-ref", "", "list the rows of the destination `REF` (an intent's destination_ref)")
		since := fs.String("since", "", "only rows created at or after `TIME` (RFC 3339 or a date)")
		limit := fs.Int("limit", defaultTimelineLimit, "list at most `N` rows, the newest (0: all)")
		asJSON := fs.Bool("json", false, "print JSON instead of text")
		if _, err := a.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		var kind ledger.RefKind
		var ref, flagName string
		switch {
		case (*subject == "") == (*destination == ""):
			return usagef(c, "give exactly one of --subject and --destination-ref")
		case *subject != "":
			kind, ref, flagName = ledger.BySubject, *subject, "--subject"
		default:
			kind, ref, flagName = ledger.ByDestination, *destination, "--destination-ref"
		}
		if err := kind.Check(ref); err != nil {
			// The message names the rule, never the value: it may be an
			// address given by mistake.
			var fe *ledger.FieldError
			if errors.As(err, &fe) {
				return usagef(c, "%s: %s (give the opaque reference, never an address)", flagName, fe.Reason)
			}
			return usagef(c, "%s: %v", flagName, err)
		}
		var from time.Time
		if *since != "" {
			t, err := parseTime(*since)
			if err != nil {
				return usagef(c, "--since: %v", err)
			}
			from = t
		}
		if *limit < 0 {
			return usagef(c, "--limit must be 0 (all) or more")
		}
		st, err := a.store(ctx)
		if err != nil {
			return err
		}
		rows, err := st.ListByRef(ctx, kind, ref, from, *limit)
		if err != nil {
			return err
		}
		views := make([]timelineView, len(rows))
		for i, e := range rows {
			views[i] = newTimelineView(e)
		}
		more := *limit > 0 && len(rows) == *limit
		if *asJSON {
			return writeJSON(a.stdout, struct {
				Table string `json:"table"`
				By    string `json:"by"`
				Ref   string `json:"ref"`
				Since string `json:"since,omitempty"`
				Limit int    `json:"limit"`
				// LimitReached says older rows may exist past the limit.
				LimitReached bool           `json:"limit_reached"`
				Rows         []timelineView `json:"rows"`
			}{a.table, string(kind), ref, jsonTime(from), *limit, more, views})
		}
		what := "subject " + ref
		if kind == ledger.ByDestination {
			what = "destination " + ref
		}
		if len(rows) == 0 {
			fmt.Fprintf(a.stdout, "no rows for %s\n", what)
			return nil
		}
		fmt.Fprintf(a.stdout, "%s: %d rows, newest first\n", what, len(rows))
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		other := "DESTINATION"
		if kind == ledger.ByDestination {
			other = "SUBJECT"
		}
		fmt.Fprintf(tw, "CREATED\tCHALLENGE\tCHANNEL\tSTATE\tATTEMPTS\tEXPIRES\t%s\tDEDUPE KEY\tREASON\n", other)
		for _, v := range views {
			ref := v.DestinationRef
			if kind == ledger.ByDestination {
				ref = v.SubjectRef
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", textTimeOf(v.CreatedAt), v.ChallengeID, v.Channel, v.State,
				v.Attempts, textTimeOf(v.ExpiresAt), orDash(ref), v.DedupeKey, orDash(v.Reason))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if more {
			fmt.Fprintf(a.stdout, "(the newest %d; older rows may exist: raise --limit or set --since)\n", *limit)
		}
		return nil
	},
}

// timelineView is one row of timeline.
type timelineView struct {
	CreatedAt      string `json:"created_at"`
	ChallengeID    string `json:"challenge_id"`
	Channel        string `json:"channel"`
	Workflow       string `json:"workflow"`
	State          string `json:"state"`
	Reason         string `json:"reason,omitempty"`
	Attempts       int    `json:"attempts"`
	ExpiresAt      string `json:"expires_at"`
	UpdatedAt      string `json:"updated_at"`
	AckID          string `json:"ack_id,omitempty"`
	Mismatches     int    `json:"content_mismatches"`
	DedupeKey      string `json:"dedupe_key"`
	SubjectRef     string `json:"subject_ref,omitempty"`
	DestinationRef string `json:"destination_ref"`
}

func newTimelineView(e ledger.Entry) timelineView {
	return timelineView{
		CreatedAt: jsonTime(e.CreatedAt), ChallengeID: e.Identity.ChallengeID, Channel: string(e.Identity.Channel),
		Workflow: string(e.Workflow.Kind), State: e.State.String(), Reason: e.Reason, Attempts: e.Attempts,
		ExpiresAt: jsonTime(e.ExpiresAt), UpdatedAt: jsonTime(e.UpdatedAt), AckID: e.AckID, Mismatches: e.Mismatches,
		DedupeKey: e.Key, SubjectRef: e.SubjectRef, DestinationRef: e.DestinationRef,
	}
}
