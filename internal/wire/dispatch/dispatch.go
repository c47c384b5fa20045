// Package dispatch builds the dispatch function's ports (see package wire):
// the dispatch queue (SQS) it hands deferred rows back through, the content
// key (KMS Decrypt), the attempt-proof key and the fingerprint key (KMS
// GenerateMac), the
// send-rate budget and the dispatch marks (the budget table, DynamoDB), and
// the transports: SES v2, End User Messaging SMS (pinpoint-sms-voice-v2)
// and the webhook, with its signing secret (Secrets Manager GetSecretValue,
// package webhooksecret). Only functions/dispatch imports it.
package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/webhooksecret"
	"github.com/resetledger/resetledger/pkg/attemptproof"
	"github.com/resetledger/resetledger/pkg/dispatchqueue/sqsqueue"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/fingerprint"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/sestransport"
	"github.com/resetledger/resetledger/pkg/smstransport"
)

// Ports adds dispatch's ports to p. Dispatch signs every send's attempt
// (kms:GenerateMac) so that the events function can verify the provider
// events it causes.
func Ports(ctx context.Context, env wire.Env, p *ledger.Ports) error {
	s := env.Settings
	p.Progress = wire.Progress(env)
	// Delays are measured on the ports' clock (a test may set it later).
	p.Scheduler = sqsqueue.New(sqs.NewFromConfig(env.Config), s.DispatchQueueURL, func() time.Time { return p.Clock() })
	keys := kms.NewFromConfig(env.Config)
	p.Opener = &envelope.Opener{KMS: keys, KeyARN: s.ContentKeyARN}
	p.Proofs = &attemptproof.KMS{Client: keys, KeyARN: s.AttemptProofKeyARN}
	p.Timeline = ledger.NoTimeline
	if s.LimitsTable != "" {
		// The destination limit's key is a MAC under the fingerprint key
		// (pkg/fingerprint), which only dispatch may MAC with and nobody
		// may verify with: the limits table's keys answer no guess.
		p.Limiter = dynamostore.NewLimits(env.DynamoDB, s.LimitsTable)
		if s.Limits.Supersede {
			p.Challenges = wire.Challenges(env)
		}
		p.Fingerprints = &fingerprint.KMS{Client: keys, KeyARN: s.FingerprintKeyARN}
		p.Limits.SMSCountries = SMSCountries(s)
		p.Limits.SMSNumberKinds = SMSNumberKinds(s)
		p.NumberOf = NumberOf
		if s.Limits.Supersede && s.SubjectIndex {
			// A refused admission reads the subject's newest rows through the
			// subject index, to give back the counts of older challenges it
			// supersedes (ledger.Ports.Timeline).
			p.Timeline = dynamostore.New(env.DynamoDB, s.LedgerTable, s.OpenIndexShards)
		}
	}
	ses := sesv2.NewFromConfig(env.Config)
	p.Budget = newBudget(ctx, env, ses, p.Clock())
	p.Transports = map[ledger.Channel]ledger.Transport{}
	webhook := webhooksecret.Transports(ctx, env)
	for ch, kind := range s.Transports {
		tr, err := transport(env, ses, webhook, kind)
		if err != nil {
			return fmt.Errorf("%s transport %s: %w", ch, kind, err)
		}
		p.Transports[ch] = tr
	}
	return nil
}

// transport builds one channel's transport. The transports turn SDK retries
// off on every send, so every attempt is one the ledger records.
func transport(env wire.Env, ses *sesv2.Client, webhook func() (ledger.Transport, error), kind string) (ledger.Transport, error) {
	s := env.Settings
	switch kind {
	case settings.TransportSES:
		return sestransport.New(ses, sestransport.Config{FromEmailAddress: s.SESFrom, ConfigurationSetName: s.SESConfigurationSet})
	case settings.TransportSMS:
		return smstransport.New(pinpointsmsvoicev2.NewFromConfig(env.Config), smstransport.Config{
			OriginationIdentity: s.SMSOrigination, ConfigurationSetName: s.SMSConfigurationSet, MaxPrice: s.SMSMaxPrice,
			ProtectConfigurationID: s.SMSProtectConfigurationID,
		})
	case settings.TransportWebhook:
		return webhook()
	}
	return nil, fmt.Errorf("unknown transport %q", kind)
}
