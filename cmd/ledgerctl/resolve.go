package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/resetledger/resetledger/internal/operatorapi"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// maxNoteLen is the longest --note, in bytes. The ledger refuses a reason
// (the operator's reason and the note together) longer than 500 bytes.
const maxNoteLen = operatorapi.MaxNote

var cmdResolve = &command{
	name:     "resolve",
	synopsis: "<dedupe-key> --decision accepted|rejected|abandoned --reason TEXT [--evidence ACK] [--note TEXT] [--operator-url URL]",
	summary:  "record an operator decision on an unknown or quarantined row",
	help: `Records an operator's decision on a row whose outcome is unknown or that
reconcile quarantined, as a new history entry made by worker
"operator:<caller ARN>".

  accepted   the transport did deliver it; --evidence (the provider's
             message or request id) is required and becomes the ack id
  rejected   the transport definitely refused it; --evidence required
  abandoned  close the row without evidence: it is recorded as
             "abandoned, outcome unknown" and never as accepted or rejected

ledgerctl does not write the table: it posts the decision to the stack's
operator function (--operator-url, or OPERATOR_URL: the stack's output
OperatorFunctionUrl), signed with SigV4 with the caller's AWS credentials.
The function URL's AWS_IAM auth checks the signature, and the function
records the principal AWS authenticated: run as the stack's operator role
(output LedgerOperatorRoleArn), it is
arn:aws:sts::<account>:assumed-role/<role name>/<session name>. Nothing
ledgerctl sends names the operator, and no flag replaces it. If AWS does not
authenticate the request, nothing is recorded. --note adds free text (a
ticket, who asked) to the recorded reason, after the reason:
"<reason>; note: <note>". --operator is a deprecated alias of --note.

Prints the history entry it recorded. Exits 3 if no row has the key, 1 if
the row is in no state to be resolved or AWS refused the credentials.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		decision := fs.String("decision", "", "the `decision`: accepted, rejected or abandoned (required)")
		reason := fs.String("reason", "", "why, in the operator's words (`TEXT`); recorded in the history (required)")
		evidence := fs.String("evidence", "", "transport evidence `ACK`: the provider's message or request id (required for accepted and rejected)")
		note := fs.String("note", "", "free `TEXT` appended to the recorded reason (a ticket, who asked); never the operator's identity")
		operator := fs.String("operator", "", "deprecated alias of --note (`TEXT`): recorded in the reason, not as the operator")
		fs.StringVar(&a.operatorURL, "operator-url", a.operatorURL, "the operator function's `URL` (env "+operatorURLEnv+"; the stack's output OperatorFunctionUrl)")
		asJSON := fs.Bool("json", false, "print JSON instead of text")
		pos, err := a.parse(c, fs, args, 1, 1)
		if err != nil {
			return err
		}
		key := strings.TrimSpace(pos[0])
		if !ledger.IsDedupeKey(key) {
			return usagef(c, "%q is not a dedupe key (64 lowercase hex characters; 'ledgerctl explain <challenge-id>' shows it)", key)
		}
		d := ledger.Decision(*decision)
		switch d {
		case ledger.DecideAccepted, ledger.DecideRejected:
			if strings.TrimSpace(*evidence) == "" {
				return usagef(c, "--decision %s needs --evidence: the transport's acknowledgement or reference (without evidence, use --decision abandoned)", d)
			}
		case ledger.DecideAbandoned:
			if *evidence != "" {
				return usagef(c, "--decision abandoned takes no --evidence: with transport evidence, decide accepted or rejected")
			}
		case "":
			return usagef(c, "--decision is required (accepted, rejected or abandoned)")
		default:
			return usagef(c, "--decision %q: want accepted, rejected or abandoned", *decision)
		}
		why := strings.TrimSpace(*reason)
		if why == "" {
			return usagef(c, "--reason is required: it is recorded as the decision's reason")
		}
		if err := checkText(why, 0); err != nil {
			return usagef(c, "--reason: %v", err)
		}
		text, flagName := strings.TrimSpace(*note), "--note"
		if *operator != "" {
			if *note != "" {
				return usagef(c, "--operator is a deprecated alias of --note: give one of them")
			}
			text, flagName = strings.TrimSpace(*operator), "--operator"
			fmt.Fprintln(a.stderr, "ledgerctl: resolve: --operator is deprecated and no longer names the operator: "+
				"the entry records the caller's STS ARN, and this text goes into the reason as a note (use --note)")
		}
		if text != "" {
			if err := checkText(text, maxNoteLen); err != nil {
				return usagef(c, "%s: %v", flagName, err)
			}
		}
		req := operatorapi.Request{Action: operatorapi.ActionResolve, DedupeKey: key, Decision: string(d), Reason: why,
			Evidence: strings.TrimSpace(*evidence), Note: text}
		if err := req.Validate(); err != nil {
			return usagef(c, "%v", strings.TrimPrefix(err.Error(), operatorapi.ErrRequest.Error()+": "))
		}
		answer, err := a.operate(ctx, req)
		var oe *operateError
		if errors.As(err, &oe) {
			switch oe.answer.Code {
			case operatorapi.CodeNotFound:
				return notFound("no ledger row with dedupe key %s (operator function)", key)
			case operatorapi.CodeNotResolvable:
				return fmt.Errorf("row %s is %s: only unknown or quarantined rows can be resolved", key, oe.answer.State)
			case operatorapi.CodeConflict:
				return fmt.Errorf("row %s changed while resolving it (a sweep may have acted on it); run 'ledgerctl explain' and try again", key)
			case operatorapi.CodeInvalidField:
				// The ledger's own free-text check: an address, a phone
				// number, a reason too long with its note.
				what := "--" + oe.answer.Field
				if oe.answer.Field == "reason" && text != "" {
					what = "--reason with the note appended"
				}
				return usagef(c, "%s: %s; nothing recorded", what, oe.answer.Error)
			case operatorapi.CodeUnauthenticated:
				return fmt.Errorf("resolve: nothing recorded: %w", err)
			}
		}
		if err != nil {
			return fmt.Errorf("resolve: nothing recorded: %w", err)
		}
		last := eventOf(answer.Entry)
		state, _ := ledger.ParseState(answer.State)
		if *asJSON {
			return writeJSON(a.stdout, struct {
				DedupeKey   string    `json:"dedupe_key"`
				ChallengeID string    `json:"challenge_id"`
				Channel     string    `json:"channel"`
				State       string    `json:"state"`
				Entry       eventView `json:"entry"`
			}{answer.DedupeKey, answer.ChallengeID, answer.Channel, answer.State, newEventView(answer.Entry.Index, last)})
		}
		fmt.Fprintf(a.stdout, "%s / %s  %s  resolved: %s\n", answer.ChallengeID, answer.Channel, answer.DedupeKey, state)
		printEvent(a.stdout, "  ", answer.Entry.Index, last, "")
		return nil
	},
}

// eventOf is the ledger event the operator function's answer describes.
func eventOf(e *operatorapi.Entry) ledger.Event {
	from, _ := ledger.ParseState(e.From)
	to, _ := ledger.ParseState(e.To)
	return ledger.Event{
		ID: e.ID, Kind: ledger.EventKind(e.Kind), From: from, To: to, At: e.At, Worker: e.Worker, Reason: e.Reason,
		PolicyVersion: e.PolicyVersion, Attempt: e.Attempt, AckID: e.AckID,
	}
}

// checkText is operatorapi.CheckText: the operator function applies the
// same rule.
func checkText(s string, max int) error { return operatorapi.CheckText(s, max) }
