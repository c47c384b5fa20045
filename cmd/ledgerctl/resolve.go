package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// maxNoteLen is the longest --note, in bytes. The ledger refuses a reason
// (the operator's reason and the note together) longer than 500 bytes.
const maxNoteLen = 200

// operatorPrefix starts the worker of every entry ledgerctl resolve
// records; the caller's STS ARN follows it.
const operatorPrefix = "operator:"

var cmdResolve = &command{
	name:     "resolve",
	synopsis: "<dedupe-key> --decision accepted|rejected|abandoned --reason TEXT [--evidence ACK] [--note TEXT]",
	summary:  "record an operator decision on an unknown or quarantined row",
	help: `Records an operator's decision on a row whose outcome is unknown or that
reconcile quarantined, as a new history entry made by worker
"operator:<caller ARN>".

  accepted   the transport did deliver it; --evidence (the provider's
             message or request id) is required and becomes the ack id
  rejected   the transport definitely refused it; --evidence required
  abandoned  close the row without evidence: it is recorded as
             "abandoned, outcome unknown" and never as accepted or rejected

The operator is always the caller's ARN from STS GetCallerIdentity; run as
the stack's operator role (output LedgerOperatorRoleArn), it reads
arn:aws:sts::<account>:assumed-role/<role name>/<session name>. No flag
replaces it. GetCallerIdentity needs no IAM permission. If it fails, nothing
is recorded. --note adds free text (a ticket, who asked) to the
recorded reason, after the reason: "<reason>; note: <note>". --operator is a
deprecated alias of --note.

Prints the history entry it recorded. Exits 3 if no row has the key, 1 if
the row is in no state to be resolved or the caller's identity cannot be read.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		decision := fs.String("decision", "", "the `decision`: accepted, rejected or abandoned (required)")
		reason := fs.String("reason", "", "why, in the operator's words (`TEXT`); recorded in the history (required)")
		evidence := fs.String("evidence", "", "transport evidence `ACK`: the provider's message or request id (required for accepted and rejected)")
		note := fs.String("note", "", "free `TEXT` appended to the recorded reason (a ticket, who asked); never the operator's identity")
		operator := fs.String("operator", "", "deprecated alias of --note (`TEXT`): recorded in the reason, not as the operator")
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
			why += "; note: " + text
		}
		svc, err := a.service(ctx)
		if err != nil {
			return err
		}
		// Who is asking comes first: without it, nothing is written.
		who, err := a.callerARN(ctx)
		if err != nil {
			return fmt.Errorf("resolve: nothing recorded: the operator's identity (sts:GetCallerIdentity) could not be read: %w", a.explainAWS(err))
		}
		e, err := svc.Resolve(ctx, key, d, why, strings.TrimSpace(*evidence), ledger.Worker(operatorPrefix+who))
		var (
			te *ledger.TransitionError
			fe *ledger.FieldError
		)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return notFound("no ledger row with dedupe key %s in table %s", key, a.table)
		case errors.As(err, &te):
			return fmt.Errorf("row %s is %s: only unknown or quarantined rows can be resolved", key, te.From)
		case errors.Is(err, ledger.ErrConflict):
			return fmt.Errorf("row %s changed while resolving it (a sweep may have acted on it); run 'ledgerctl explain' and try again", key)
		case errors.As(err, &fe):
			// The ledger's own free-text check: an address, a phone
			// number, a reason too long with its note.
			what := "--" + fe.Field
			if fe.Field == "reason" && text != "" {
				what = "--reason with the note appended"
			}
			return usagef(c, "%s: %s; nothing recorded", what, fe.Reason)
		case err != nil:
			return err
		}
		last := e.Last()
		if *asJSON {
			return writeJSON(a.stdout, struct {
				DedupeKey   string    `json:"dedupe_key"`
				ChallengeID string    `json:"challenge_id"`
				Channel     string    `json:"channel"`
				State       string    `json:"state"`
				Entry       eventView `json:"entry"`
			}{e.Key, e.Identity.ChallengeID, string(e.Identity.Channel), e.State.String(), newEventView(len(e.History)-1, last)})
		}
		fmt.Fprintf(a.stdout, "%s / %s  %s  resolved: %s\n", e.Identity.ChallengeID, e.Identity.Channel, e.Key, e.State)
		printEvent(a.stdout, "  ", len(e.History)-1, last, "")
		return nil
	},
}

// checkText refuses operator free text that is not valid UTF-8, holds a
// control or format character (line breaks, escapes, bidirectional
// overrides: anything that could forge or hide text in a log line or a
// terminal), or is longer than max bytes (0: no limit here). The ledger
// checks the recorded reason again (addresses, phone numbers, 500 bytes).
func checkText(s string, max int) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	if max > 0 && len(s) > max {
		return fmt.Errorf("too long (%d bytes at most)", max)
	}
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return fmt.Errorf("contains a control character (%U)", r)
		}
	}
	return nil
}

// callerIdentity is the one STS call ledgerctl makes: who the caller is.
// AWS answers it for any valid credentials and needs no IAM permission,
// even under an explicit Deny.
type callerIdentity interface {
	GetCallerIdentity(ctx context.Context, in *sts.GetCallerIdentityInput, optFns ...func(*sts.Options)) (*sts.GetCallerIdentityOutput, error)
}

// callerARN returns the caller's ARN from STS, the operator's identity in
// the evidence.
func (a *app) callerARN(ctx context.Context) (string, error) {
	if a.identity == nil {
		cfg, err := a.awsConfig(ctx)
		if err != nil {
			return "", err
		}
		a.identity = sts.NewFromConfig(cfg)
	}
	out, err := a.identity.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", err
	}
	who := aws.ToString(out.Arn)
	if !arn.IsARN(who) || checkText(who, 2048) != nil {
		return "", fmt.Errorf("STS returned no usable caller ARN (%q)", who)
	}
	return who, nil
}
