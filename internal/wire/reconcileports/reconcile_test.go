package reconcileports

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smstransport"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/webhooktransport"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestUnsentCapabilities: for SES and SMS, reconcile's stand-in reports
// what dispatch's real transport reports for the same settings, with and
// without a configuration set, so the reconcile policy decides as it did
// when reconcile built the real transports.
func TestUnsentCapabilities(t *testing.T) {
	for _, set := range []string{"", "resetledger-events"} {
		s := settings.Defaults()
		s.SESFrom, s.SESConfigurationSet, s.SMSConfigurationSet = "no-reply@mail.example.com", set, set
		ses, err := sestransport.New(sesv2.NewFromConfig(aws.Config{}), sestransport.Config{FromEmailAddress: s.SESFrom, ConfigurationSetName: s.SESConfigurationSet})
		if err != nil {
			t.Fatal(err)
		}
		sms, err := smstransport.New(pinpointsmsvoicev2.NewFromConfig(aws.Config{}), smstransport.Config{ConfigurationSetName: s.SMSConfigurationSet})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			kind string
			real ledger.Transport
		}{{settings.TransportSES, ses}, {settings.TransportSMS, sms}} {
			got, err := transport(s, nil, tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if got.Capabilities() != tc.real.Capabilities() {
				t.Errorf("%s, configuration set %q: reconcile holds %+v, the transport reports %+v", tc.kind, set, got.Capabilities(), tc.real.Capabilities())
			}
			if tc.real.Capabilities().IdempotencyWindow != 0 || tc.real.Capabilities().Lookup {
				t.Errorf("%s now deduplicates or looks up: reconcile would send through it, so it needs the real transport", tc.kind)
			}
			var ns *ledger.NotSent
			if _, err := got.Send(context.Background(), ledger.Send{}); !errors.As(err, &ns) {
				t.Errorf("%s stand-in Send = %v, want *ledger.NotSent", tc.kind, err)
			}
		}
	}
}

// TestPorts: reconcile gets the scheduler, the marks, the opener and a
// transport per channel (the webhook itself, with the signing secret it
// read from Secrets Manager on the emulator; SES's stand-in), and no
// budget and no proofs, which only dispatch and events use.
func TestPorts(t *testing.T) {
	cfg := emulator.Config(t)
	arn, _ := emulator.Secret(t, secretsmanager.NewFromConfig(cfg), "webhook-secret")
	s := settings.Defaults()
	s.SESFrom, s.WebhookURL, s.WebhookSecretARN = "no-reply@mail.example.com", "http://127.0.0.1:4599/send", arn
	s.Transports[ledger.SMS] = settings.TransportWebhook
	p := &assemble.Ports{}
	if err := Ports(context.Background(), wire.Env{Config: cfg, Settings: s}, p); err != nil {
		t.Fatal(err)
	}
	if p.Scheduler == nil || p.Progress == nil || p.Opener == nil {
		t.Errorf("scheduler %v, progress %v, opener %v: want all three", p.Scheduler, p.Progress, p.Opener)
	}
	if p.Budget != nil || p.Proofs != nil {
		t.Errorf("budget %v, proofs %v: reconcile books no send time and signs no attempt", p.Budget, p.Proofs)
	}
	if _, ok := p.Transports[ledger.SMS].(*webhooktransport.Transport); !ok {
		t.Errorf("sms through the webhook: reconcile holds %T, want the webhook transport", p.Transports[ledger.SMS])
	}
	if _, ok := p.Transports[ledger.Email].(unsent); !ok {
		t.Errorf("email through SES: reconcile holds %T, want the stand-in", p.Transports[ledger.Email])
	}
}

// TestNoOpenerWithoutWebhook: with SES and End User Messaging SMS, reconcile never sends again,
// so it holds no opener (and its role no kms:Decrypt on the content key).
func TestNoOpenerWithoutWebhook(t *testing.T) {
	s := settings.Defaults()
	s.SESFrom = "no-reply@mail.example.com"
	p := &assemble.Ports{}
	if err := Ports(context.Background(), wire.Env{Config: aws.Config{Region: "us-east-1"}, Settings: s}, p); err != nil {
		t.Fatal(err)
	}
	if p.Opener != nil {
		t.Errorf("reconcile with ses and sms holds an opener %T: it never opens content", p.Opener)
	}
}

// TestPortsRefuseAnUnreadableSecret: a webhook transport whose signing
// secret cannot be read is a configuration reconcile must not start with.
func TestPortsRefuseAnUnreadableSecret(t *testing.T) {
	cfg := emulator.Config(t)
	s := settings.Defaults()
	s.SESFrom, s.WebhookURL = "no-reply@mail.example.com", "http://127.0.0.1:4599/send"
	s.WebhookSecretARN = "arn:aws:secretsmanager:us-east-1:000000000000:secret:" + emulator.UniqueName(t, "missing")
	s.Transports[ledger.SMS] = settings.TransportWebhook
	if err := Ports(context.Background(), wire.Env{Config: cfg, Settings: s}, &assemble.Ports{}); err == nil {
		t.Fatal("Ports built a webhook transport without its signing secret")
	}
}
