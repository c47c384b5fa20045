// Package reconcileports builds the reconcile function's ports (see package
// wire): the dispatch queue (SQS) it hands due rows back through, the
// dispatch marks (the budget table, DynamoDB), the content key (KMS Decrypt)
// for a same-key retry when a channel goes through the webhook (the only
// transport reconcile sends through again: settings.OpensContent), and per
// channel what its reconcile policy needs of the transport: the webhook's
// with its signing secret (Secrets Manager GetSecretValue, package
// webhooksecret), since its retries and lookups are signed. Only
// functions/reconcile imports it.
//
// Reconcile sends again only through a transport that deduplicates by key
// (the webhook, with a key window); it never sends through SES or End User
// Messaging SMS, which do not, so it holds neither those transports nor
// their clients: for those channels it holds what their policy reads, their
// capabilities (see unsent). It signs no attempt: the webhook reports no
// provider events, so its sends carry no proof.
package reconcileports

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/dictionaries"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/handback"
	"github.com/resetledger/resetledger/internal/wire/webhooksecret"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Ports adds reconcile's ports to p.
func Ports(ctx context.Context, env wire.Env, p *assemble.Ports) error {
	s := env.Settings
	handback.Ports(env, p)
	if s.OpensContent(settings.Reconcile) {
		// Without a webhook reconcile never opens content: it holds no
		// opener, and its role no kms:Decrypt on the content key.
		dicts, err := dictionaries.Stack()
		if err != nil {
			return err
		}
		p.Opener = &envelope.Opener{KMS: kms.NewFromConfig(env.Config), KeyARN: s.ContentKeyARN, Dictionaries: dicts}
	}
	webhook := webhooksecret.Transports(ctx, env)
	var err error
	p.Transports, err = wire.Transports(s, func(kind string) (ledger.Transport, error) { return transport(s, webhook, kind) })
	return err
}

func transport(s settings.Settings, webhook func() (ledger.Transport, error), kind string) (ledger.Transport, error) {
	switch kind {
	case settings.TransportSES:
		return unsent{ledger.Capabilities{Events: s.SESConfigurationSet != ""}}, nil
	case settings.TransportSMS:
		return unsent{ledger.Capabilities{Events: s.SMSConfigurationSet != ""}}, nil
	case settings.TransportWebhook:
		return webhook()
	}
	return nil, fmt.Errorf("unknown transport %q", kind)
}

// unsent stands for a transport reconcile never sends through: SES or End
// User Messaging SMS, which have no idempotency window and no lookup. It
// reports the capabilities the real transport reports for the same settings
// (TestUnsentCapabilities holds the two together), and those are all the
// reconcile policy reads of it: wait for a provider event if the channel
// reports events, then quarantine. Send is never reached; if it were, it
// would refuse as not sent.
type unsent struct{ caps ledger.Capabilities }

func (u unsent) Capabilities() ledger.Capabilities { return u.caps }

func (unsent) Send(context.Context, ledger.Send) (ledger.Ack, error) {
	return ledger.Ack{}, &ledger.NotSent{Code: "reconcile-does-not-send-on-this-transport"}
}
