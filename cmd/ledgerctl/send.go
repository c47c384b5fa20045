package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

var cmdSend = &command{
	name:     "send",
	synopsis: "--challenge ID --channel email|sms --to ADDRESS [--expires-in 10m] [--workflow single|dual|fallback]",
	summary:  "publish a sample intent to the intents queue, sealed as the producer does",
	help: `Publishes a sample password-reset notification intent to the intents queue,
sealed with KMS exactly as the account service's producer (pkg/producer)
does, to exercise a deployed or local stack end to end. The message carries
a random sample reset link; the address and the link travel only inside the
sealed envelope and are never printed.

Needs the queue (--queue-url or INTENT_QUEUE_URL), the KMS key that seals
the content (--key-arn or CONTENT_KEY_ARN) and the one that seals the
intent's fields (--intent-key-arn or INTENT_KEY_ARN): the caller must be
allowed kms:GenerateDataKey on the first and kms:GenerateMac on the second,
as a producer is. A fallback workflow tries email, then sms.
With --dictionary FILE the content is sealed against that preset
dictionary (envelope version 3): a way to check that a stage holds a
dictionary before any producer uses it (a stage that does not dead-letters
the intent with reason sealed_content.dict).
Prints the SQS message id and the dedupe key; follow the row with
'ledgerctl explain <challenge-id>'.`,
	run: func(a *app, ctx context.Context, c *command, args []string) error {
		fs := a.flagSet(c.name)
		challenge := fs.String("challenge", "", "opaque challenge `id` (required)")
		channel := fs.String("channel", "", "`channel`: email or sms (required)")
		to := fs.String("to", "", "destination `address` (email address or E.164 phone number; sealed, never printed) (required)")
		expiresIn := fs.Duration("expires-in", 10*time.Minute, "challenge lifetime from now")
		workflow := fs.String("workflow", "single", "`workflow`: single, dual or fallback (email then sms)")
		destRef := fs.String("destination-ref", "", "opaque destination `reference` recorded in the ledger (default ledgerctl-sample:<channel>)")
		templateID := fs.String("template-id", "", "template `id` (default reset-<channel>)")
		templateVersion := fs.String("template-version", "1", "template `version`")
		queueURL := fs.String("queue-url", strings.TrimSpace(a.getenv(outputs.IntentQueueURL.Env)), "intents queue `url` (env "+outputs.IntentQueueURL.Env+")")
		keyARN := fs.String("key-arn", strings.TrimSpace(a.getenv(settings.ContentKeyARN.Env)),
			"KMS key `arn` that seals content (env "+settings.ContentKeyARN.Env+")")
		intentKeyARN := fs.String("intent-key-arn", strings.TrimSpace(a.getenv(settings.IntentKeyARN.Env)),
			"KMS HMAC key `arn` that seals the intent's fields (env "+settings.IntentKeyARN.Env+")")
		dictFile := fs.String("dictionary", "", "preset compression dictionary `file`: seal envelope version 3 against it (the stage must hold the same file)")
		if _, err := a.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		var dict []byte
		if *dictFile != "" {
			var err error
			if dict, err = os.ReadFile(*dictFile); err != nil {
				return usagef(c, "--dictionary: %v", err)
			}
		}
		ch := ledger.Channel(*channel)
		switch {
		case *challenge == "":
			return usagef(c, "--challenge is required")
		case !slices.Contains(ledger.Channels, ch):
			return usagef(c, "--channel must be %s", channelNames())
		case strings.TrimSpace(*to) == "":
			return usagef(c, "--to is required")
		case *expiresIn <= 0:
			return usagef(c, "--expires-in must be positive")
		case *queueURL == "":
			return usagef(c, "no queue: set --queue-url or %s", outputs.IntentQueueURL.Env)
		case *keyARN == "":
			return usagef(c, "no KMS key: set --key-arn or CONTENT_KEY_ARN")
		case *intentKeyARN == "":
			return usagef(c, "no intent key: set --intent-key-arn or %s", settings.IntentKeyARN.Env)
		}
		wf := ledger.Workflow{Kind: ledger.WorkflowKind(*workflow)}
		switch wf.Kind {
		case ledger.Single, ledger.Dual:
		case ledger.Fallback:
			wf.Order = slices.Clone(ledger.Channels)
		default:
			return usagef(c, "--workflow must be single, dual or fallback")
		}
		if *destRef == "" {
			*destRef = "ledgerctl-sample:" + string(ch)
		}
		if *templateID == "" {
			*templateID = "reset-" + string(ch)
		}
		policy := a.policyVersion
		if policy == "" {
			policy = ledger.DefaultPolicy().Version
		}
		cfg, err := a.awsConfig(ctx)
		if err != nil {
			return err
		}
		var tok [16]byte
		_, _ = rand.Read(tok[:])
		n := producer.Notification{
			ChallengeID: *challenge, Channel: ch, Workflow: wf, DestinationRef: *destRef,
			ExpiresAt:  a.now().Add(*expiresIn).UTC().Truncate(time.Millisecond),
			TemplateID: *templateID, TemplateVersion: *templateVersion, PolicyVersion: policy,
			Message: ledger.Message{
				To:      strings.TrimSpace(*to),
				Subject: "Reset your password (ledgerctl sample)",
				Body: "This is a sample password-reset notification sent with ledgerctl. " +
					"Reset your password within " + expiresIn.String() + ": https://reset.invalid/r?token=" + hex.EncodeToString(tok[:]),
			},
		}
		if ch == ledger.SMS {
			n.Message.Subject = ""
		}
		p := &producer.Producer{
			Queue: sqs.NewFromConfig(cfg), QueueURL: *queueURL,
			Sealer: &envelope.Sealer{KMS: kms.NewFromConfig(cfg), KeyID: *keyARN, Dictionary: dict},
			Seals:  &kmsseal.KMS{Client: kms.NewFromConfig(cfg), KeyARN: *intentKeyARN},
			Clock:  a.now,
		}
		id, err := p.Publish(ctx, n)
		var fe *ledger.FieldError
		if errors.As(err, &fe) {
			return usagef(c, "%v", fe)
		}
		if err != nil {
			return err
		}
		key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: *challenge, Channel: ch}.Key()
		fmt.Fprintf(a.stdout, "published sample intent %s / %s (workflow %s)\n", *challenge, ch, wf.Kind)
		fmt.Fprintf(a.stdout, "  sqs message id: %s\n  dedupe key:     %s\n  expires:        %s\n  content:        sealed with %s\n",
			id, key, textTime(n.ExpiresAt), *keyARN)
		return nil
	},
}

// channelNames is "email or sms": the channels a sample may use.
func channelNames() string {
	names := make([]string, len(ledger.Channels))
	for i, ch := range ledger.Channels {
		names[i] = string(ch)
	}
	return strings.Join(names, " or ")
}
