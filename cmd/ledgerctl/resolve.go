package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/resetledger/resetledger/pkg/ledger"
)

var cmdResolve = &command{
	name:     "resolve",
	synopsis: "<dedupe-key> --decision accepted|rejected|abandoned --reason TEXT [--evidence ACK] [--operator NAME]",
	summary:  "record an operator decision on an unknown or quarantined row",
	help: `Records an operator's decision on a row whose outcome is unknown or that
reconcile quarantined, as a new history entry made by worker
"operator:<identity>".

  accepted   the transport did deliver it; --evidence (the provider's
             message or request id) is required and becomes the ack id
  rejected   the transport definitely refused it; --evidence required
  abandoned  close the row without evidence: it is recorded as
             "abandoned, outcome unknown" and never as accepted or rejected

The identity is the caller's ARN from STS GetCallerIdentity, or --operator
when given (needed for local runs). Prints the history entry it recorded.
Exits 3 if no row has the key, 1 if the row is in no state to be resolved.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		decision := fs.String("decision", "", "the `decision`: accepted, rejected or abandoned (required)")
		reason := fs.String("reason", "", "why, in the operator's words (`TEXT`); recorded in the history (required)")
		evidence := fs.String("evidence", "", "transport evidence `ACK`: the provider's message or request id (required for accepted and rejected)")
		operator := fs.String("operator", "", "operator `name` to record instead of the STS caller ARN")
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
		if strings.TrimSpace(*reason) == "" {
			return usagef(c, "--reason is required: it is recorded as the decision's reason")
		}
		svc, err := a.service(ctx)
		if err != nil {
			return err
		}
		who := strings.TrimSpace(*operator)
		if who == "" {
			if who, err = a.callerARN(ctx); err != nil {
				return fmt.Errorf("resolve: find the operator identity (pass --operator NAME to set it): %w", a.explainAWS(err))
			}
		}
		e, err := svc.Resolve(ctx, key, d, strings.TrimSpace(*reason), strings.TrimSpace(*evidence), ledger.Worker("operator:"+who))
		var te *ledger.TransitionError
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return notFound("no ledger row with dedupe key %s in table %s", key, a.table)
		case errors.As(err, &te):
			return fmt.Errorf("row %s is %s: only unknown or quarantined rows can be resolved", key, te.From)
		case errors.Is(err, ledger.ErrConflict):
			return fmt.Errorf("row %s changed while resolving it (a sweep may have acted on it); run 'ledgerctl explain' and try again", key)
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

// callerARN returns the caller's identity from STS.
func (a *app) callerARN(ctx context.Context) (string, error) {
	cfg, err := a.awsConfig(ctx)
	if err != nil {
		return "", err
	}
	out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		return "", err
	}
	arn := aws.ToString(out.Arn)
	if arn == "" {
		return "", errors.New("STS returned no caller ARN")
	}
	return arn, nil
}
