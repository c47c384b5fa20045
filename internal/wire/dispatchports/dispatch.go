// Package dispatchports builds the dispatch function's ports (see package wire):
// the dispatch queue (SQS) it hands deferred rows back through, the content
// key (KMS Decrypt), the attempt-proof key and the fingerprint key (KMS
// GenerateMac), the
// send-rate budget and the dispatch marks (the budget table, DynamoDB), and
// the transports: SES v2, End User Messaging SMS (pinpoint-sms-voice-v2)
// and the webhook, with its signing secret (Secrets Manager GetSecretValue,
// package webhooksecret). Only functions/dispatch imports it.
package dispatchports

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/dictionaries"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smstransport"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/handback"
	"github.com/resetledger/resetledger/internal/wire/webhooksecret"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Ports adds dispatch's ports to p. Dispatch signs every send's attempt
// (kms:GenerateMac) so that the events function can verify the provider
// events it causes.
func Ports(ctx context.Context, env wire.Env, p *assemble.Ports) error {
	s := env.Settings
	handback.Ports(env, p)
	keys := kms.NewFromConfig(env.Config)
	dicts, err := dictionaries.Stack()
	if err != nil {
		return err
	}
	p.Opener = &envelope.Opener{KMS: keys, KeyARN: s.ContentKeyARN, Dictionaries: dicts}
	p.Proofs = &attemptproof.KMS{Client: keys, KeyARN: s.AttemptProofKeyARN}
	p.Timeline = ledger.NoTimeline
	if s.LimitsTable != "" {
		// The destination limit's key is a MAC under the fingerprint key
		// (internal/fingerprint), which only dispatch may MAC with and nobody
		// may verify with: the limits table's keys answer no guess.
		// The SMS country caps of an allow-list of a few regions share the
		// global SMS cap's item (dynamostore.Limits.ShareSMSCaps).
		p.Limiter = dynamostore.NewLimits(env.DynamoDB, s.LimitsTable).ShareSMSCaps(s.SMSAllowedCountries.Regions())
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
			// supersedes (assemble.Ports.Timeline).
			p.Timeline = dynamostore.New(env.DynamoDB, s.LedgerTable, s.OpenIndexShards)
		}
	}
	// A stream record's row, newest challenge and content: one BatchGetItem
	// (ledger.FirstReads).
	limits := ""
	if s.LimitsTable != "" && s.Limits.Supersede {
		limits = s.LimitsTable
	}
	p.FirstReads = dynamostore.NewFirstReads(env.DynamoDB, s.LedgerTable, limits, s.ContentTable)
	ses := sesv2.NewFromConfig(env.Config)
	p.Budget = newBudget(ctx, env, ses, p.Clock())
	webhook := webhooksecret.Transports(ctx, env)
	p.Transports, err = wire.Transports(s, func(kind string) (ledger.Transport, error) { return transport(env, ses, webhook, kind) })
	return err
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
