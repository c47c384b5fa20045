package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestWebhookSecret: with a webhook transport the stack creates the signing secret, gives its
// ARN to the senders (WEBHOOK_SECRET_ARN) and lets them, and only them, call
// secretsmanager:GetSecretValue on it, nothing more; without one there is no secret and no grant.
func TestWebhookSecret(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mutate  func(*LedgerStackProps)
		webhook bool
	}{
		{"ses and sms", nil, false},
		{"sms through the webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.com/send"
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			secrets := s.resources("AWS::SecretsManager::Secret")
			if got := len(secrets); got != map[bool]int{false: 0, true: 1}[tc.webhook] {
				t.Fatalf("%d secrets, want one only with a webhook transport", got)
			}
			grants := s.grants(t)
			for role, g := range grants {
				var got []string
				for _, grant := range g {
					if strings.HasPrefix(grant, "secretsmanager:") {
						got = append(got, grant)
					}
				}
				var want []string
				if tc.webhook && (role == "Dispatch" || role == "Reconcile") {
					want = []string{"secretsmanager:GetSecretValue on WebhookSecret.Id"}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: secretsmanager grants %q, want %q", role, got, want)
				}
			}
			for _, role := range settings.Functions {
				vars := s.function(t, role)["Environment"].(map[string]any)["Variables"].(map[string]any)
				v, ok := vars[settings.WebhookSecretARN.Env]
				if want := tc.webhook && slices.Contains(settings.Senders, role); ok != want {
					t.Errorf("%s: %s set %v, want %v", role, settings.WebhookSecretARN.Env, ok, want)
				} else if ok && label(v) != "WebhookSecret.Id" {
					t.Errorf("%s: %s = %s, want the stack's secret", role, settings.WebhookSecretARN.Env, mustJSON(v))
				}
			}
			for _, r := range secrets {
				gen, _ := props(r)["GenerateSecretString"].(map[string]any)
				if gen["PasswordLength"] != float64(webhookSecretLength) || gen["ExcludePunctuation"] != true {
					t.Errorf("secret generation %s, want %d letters and digits", mustJSON(gen), webhookSecretLength)
				}
				if _, ok := props(r)["SecretString"]; ok {
					t.Error("the template carries the secret's value")
				}
			}
			outs, _ := s.json["Outputs"].(map[string]any)
			if _, ok := outs["WebhookSecretArn"]; ok != tc.webhook {
				t.Errorf("WebhookSecretArn output %v, want %v", ok, tc.webhook)
			}
			noNagErrors(t, s)
		})
	}
}

// TestPlainHTTPWebhookRefusedAtSynth: props validation refuses a webhook URL that is plain http
// to a host that is not loopback, and accepts one to any loopback address.
func TestPlainHTTPWebhookRefusedAtSynth(t *testing.T) {
	for url, ok := range map[string]bool{
		"https://gw.example.com/send":   true,
		"http://127.0.0.1:4599/send":    true,
		"http://127.0.0.9:4599/send":    true,
		"http://[::1]:4599/send":        true,
		"http://gw.example.com/send":    false,
		"http://169.254.169.254/latest": false,
	} {
		p := testProps(t)
		p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, url
		err := p.Validate()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "WEBHOOK_URL")) {
			t.Errorf("webhookUrl %s: %v, want ok=%v", url, err, ok)
		}
	}
}
