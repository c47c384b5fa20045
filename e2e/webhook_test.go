package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/webhook"
)

// TestEndToEndWebhookSignatures: on the deployed local stage the senders are given the stack's
// signing secret, and the local provider refuses (401) a send that carries no signature and one
// whose signature is not under that secret, recording neither. The SMS sends of TestEndToEnd go
// through signed by the deployed dispatch function, which shows the other half.
func TestEndToEndWebhookSignatures(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, fn := range []string{e.out.DispatchFunction, e.out.ReconcileFunction} {
		vars, err := FunctionEnvironment(ctx, e.cfg, e.endpoint, fn)
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		if arn := vars[settings.WebhookSecretARN.Env]; !strings.HasPrefix(arn, "arn:aws:secretsmanager:") {
			t.Errorf("%s: %s = %q, want the stack's secret", fn, settings.WebhookSecretARN.Env, arn)
		}
	}
	before, err := ProviderMessages(ctx, e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(webhook.Payload{IdempotencyKey: "e2e-unsigned", ContentHash: "h", Channel: "sms", Attempt: 1, To: "+15555550100", Body: "forged"})
	for name, sig := range map[string]string{
		"unsigned":       "",
		"another secret": webhook.Sign([]byte("not-the-stack-secret-0123456789abcdef"), time.Now(), http.MethodPost, "/send", body),
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(e.provider, "/")+"/send", bytes.NewReader(body))
		req.Header.Set("Idempotency-Key", "e2e-unsigned")
		req.Header.Set("Content-Type", "application/json")
		if sig != "" {
			req.Header.Set(webhook.SignatureHeader, sig)
		}
		resp, err := e.web.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s send: HTTP %d, want 401", name, resp.StatusCode)
		}
	}
	after, err := ProviderMessages(ctx, e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range after[len(before):] {
		if m.IdempotencyKey == "e2e-unsigned" {
			t.Fatalf("the provider recorded a refused send: %+v", m.ID)
		}
	}
}
