package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*LedgerStackProps)
		want   string
	}{
		{"missing bootstrap", func(p *LedgerStackProps) { os.Remove(filepath.Join(p.AssetDir, string(settings.Expire), "bootstrap")) }, "expire/bootstrap"},
		{"ses without from address", func(p *LedgerStackProps) { p.Functions.SESFrom = "" }, "SES_FROM_ADDRESS"},
		{"webhook without url", func(p *LedgerStackProps) { p.Functions.Transports[ledger.SMS] = settings.TransportWebhook }, "WEBHOOK_URL"},
		{"plain http webhook off loopback", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "http://gateway.internal/send"
		}, "WEBHOOK_URL"},
		{"zero sweep limit", func(p *LedgerStackProps) { p.Functions.SweepLimit = 0 }, "SWEEP_LIMIT"},
		{"unknown transport", func(p *LedgerStackProps) { p.Functions.Transports[ledger.Email] = "smtp" }, "EMAIL_TRANSPORT"},
		{"sub-minute rate", func(p *LedgerStackProps) { p.ReconcileRate = 30 * time.Second }, "ReconcileRate"},
		{"odd log retention", func(p *LedgerStackProps) { p.LogRetentionDays = 31 }, "LogRetentionDays"},
		{"zero lease", func(p *LedgerStackProps) { p.Functions.Policy.Lease = 0 }, "LEASE_DURATION"},
		{"webhook timeout too long", func(p *LedgerStackProps) { p.Functions.WebhookTimeout = time.Minute }, "WEBHOOK_TIMEOUT"},
		{"webhook timeout above the lease", func(p *LedgerStackProps) {
			p.Functions.Policy.Lease, p.Functions.WebhookTimeout = 20*time.Second, 30*time.Second
		}, "webhookTimeout (WEBHOOK_TIMEOUT): must be at most LEASE_DURATION"},
		{"no architecture", func(p *LedgerStackProps) { p.Architecture = nil }, "Architecture"},
		{"visibility below claim timeout", func(p *LedgerStackProps) { p.IntentVisibilityTimeout = 10 * time.Second }, "IntentVisibilityTimeout"},
		{"intent age alarm after retention", func(p *LedgerStackProps) {
			p.IntentVisibilityTimeout, p.IntentRetention = 20*time.Minute, 30*time.Minute
		}, "IntentVisibilityTimeout"},
		{"sweep timeout at the reconcile rate", func(p *LedgerStackProps) { p.SweepTimeout = time.Minute }, "SweepTimeout"},
		{"sweep timeout above the expire rate", func(p *LedgerStackProps) {
			p.ReconcileRate, p.SweepTimeout = 5*time.Minute, 90*time.Second
		}, "below ExpireRate"},
		{"tiny sweep timeout", func(p *LedgerStackProps) { p.SweepTimeout = time.Second }, "SweepTimeout"},
		{"claim concurrency 1", func(p *LedgerStackProps) { p.ClaimMaxConcurrency = 1 }, "ClaimMaxConcurrency"},
		{"claim concurrency 1001", func(p *LedgerStackProps) { p.ClaimMaxConcurrency = 1001 }, "ClaimMaxConcurrency"},
		{"no alarm topic", func(p *LedgerStackProps) { p.AlarmTopicArn = "" }, "AlarmTopicArn"},
		{"required alarms skipped", func(p *LedgerStackProps) { p.SkipObservability = true }, "SkipObservability"},
		{"topic is not an SNS ARN", func(p *LedgerStackProps) { p.AlarmTopicArn = "arn:aws:sqs:us-east-1:111122223333:q" }, "AlarmTopicArn"},
		{"no challenge lifetime", func(p *LedgerStackProps) { p.Functions.Policy.MaxChallengeLifetime = 0 }, "MaxChallengeLifetime"},
		{"lag limit past the record age", func(p *LedgerStackProps) { p.DispatchLagLimit = 2 * time.Hour }, "DispatchLagLimit"},
		{"negative email rate", func(p *LedgerStackProps) { p.Functions.SendRates[ledger.Email] = -1 }, "SEND_RATE_EMAIL"},
		{"infinite sms rate", func(p *LedgerStackProps) { p.Functions.SendRates[ledger.SMS] = math.Inf(1) }, "SEND_RATE_SMS"},
		{"zero budget wait", func(p *LedgerStackProps) { p.Functions.Policy.BudgetWait = 0 }, "BUDGET_MAX_WAIT"},
		{"budget wait near the dispatch timeout", func(p *LedgerStackProps) { p.Functions.Policy.BudgetWait = 45 * time.Second }, "BUDGET_MAX_WAIT"},
		{"zero backoff base", func(p *LedgerStackProps) { p.Functions.Policy.RetryBase = 0 }, "RETRY_BACKOFF_BASE"},
		{"backoff max below base", func(p *LedgerStackProps) {
			p.Functions.Policy.RetryBase, p.Functions.Policy.RetryMax = time.Minute, time.Second
		}, "RETRY_BACKOFF_MAX"},
		{"backoff past the SQS delay limit", func(p *LedgerStackProps) { p.Functions.Policy.RetryMax = 20 * time.Minute }, "RETRY_BACKOFF_MAX"},
		{"zero redrive", func(p *LedgerStackProps) { p.Functions.Policy.RedriveAfter = 0 }, "REDRIVE_AFTER"},
		{"dispatch queue concurrency 1", func(p *LedgerStackProps) { p.DispatchQueueMaxConcurrency = 1 }, "DispatchQueueMaxConcurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testProps(t)
			if err := p.Validate(); err != nil {
				t.Fatalf("valid props rejected: %v", err)
			}
			tc.mutate(p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
