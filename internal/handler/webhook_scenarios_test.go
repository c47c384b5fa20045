package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/producer"
	"github.com/resetledger/resetledger/pkg/webhook"
)

func (p *pipeline) reconcileNow() {
	p.t.Helper()
	if err := p.reconcile.Handle(p.ctx, events.CloudWatchEvent{}); err != nil {
		p.t.Fatal(err)
	}
}

func TestCrashAfterProviderAcceptedIsQuarantinedNeverResent(t *testing.T) {
	// The provider honors no idempotency key: a blind retry would be a
	// second message.
	p := newPipeline(t, map[string]string{"WEBHOOK_KEY_WINDOW": "0s", "WEBHOOK_TIMEOUT": "1s", "LEASE_DURATION": "1s", "RECHECK_AFTER": "1ms"})
	dropped := p.notification(1, ledger.SMS, 10*time.Minute)
	slow := p.notification(2, ledger.SMS, 10*time.Minute)
	// Accepted, then the connection dropped; accepted, then held past the
	// function's timeout (the runtime would end the process here).
	p.provider.Script(webhook.Step{Action: webhook.AcceptThenDrop}, webhook.Step{Action: webhook.Slow, Delay: 3 * time.Second})
	p.publish(dropped)
	p.pumpQueue()
	p.pumpStream()
	p.publish(slow)
	p.pumpQueue()
	p.pumpStream()
	for _, n := range []struct {
		name string
		row  ledger.Entry
	}{{"dropped", p.row(dropped)}, {"slow", p.row(slow)}} {
		if n.row.State != ledger.Unknown || !strings.HasPrefix(n.row.Reason, "no acknowledgement") {
			t.Fatalf("%s: %s %q", n.name, n.row.State, n.row.Reason)
		}
	}
	p.advance(1100 * time.Millisecond)
	p.reconcileNow()
	p.reconcileNow()
	for _, n := range []ledger.Entry{p.row(dropped), p.row(slow)} {
		if n.State != ledger.Quarantined || !strings.Contains(n.Reason, "outcome unknown") {
			t.Fatalf("%s: %s %q", n.Identity.ChallengeID, n.State, n.Reason)
		}
		if got := p.provider.Recorded(n.Key); got != 1 {
			t.Fatalf("%s: provider recorded %d messages, want exactly 1", n.Identity.ChallengeID, got)
		}
		if err := n.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(p.out.String(), `"OpenClaims":2`) || !strings.Contains(p.out.String(), `"State":"quarantined"`) {
		t.Fatal("reconcile did not publish the open quarantined claims")
	}
	p.assertNoSecrets()
}

func TestProviderHonoringKeysIsRetriedUnderTheSameKey(t *testing.T) {
	p := newPipeline(t, map[string]string{"WEBHOOK_KEY_WINDOW": "1h", "RECHECK_AFTER": "1ms"}, webhook.ProviderConfig{HonorKeys: true})
	n := p.notification(1, ledger.SMS, 10*time.Minute)
	p.provider.Script(webhook.Step{Action: webhook.AcceptThenDrop})
	p.publish(n)
	p.pumpQueue()
	p.pumpStream()
	if st := p.row(n).State; st != ledger.Unknown {
		t.Fatalf("after the dropped answer: %s", st)
	}
	p.advance(5 * time.Millisecond)
	p.reconcileNow()
	row := p.row(n)
	if row.State != ledger.Accepted || row.Attempts != 2 || row.AckID == "" {
		t.Fatalf("after reconcile: %s attempts %d ack %q", row.State, row.Attempts, row.AckID)
	}
	if rec, got := p.provider.Recorded(row.Key), p.provider.Received(row.Key); rec != 1 || got != 2 {
		t.Fatalf("provider recorded %d and received %d, want 1 and 2", rec, got)
	}
	p.assertNoSecrets()
}

func TestFallbackRaceSendsOneMessage(t *testing.T) {
	p := newPipeline(t, nil)
	email := p.notification(1, ledger.Email, 10*time.Minute)
	fallback := ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	email.Workflow = fallback
	sms := p.notification(1, ledger.SMS, 10*time.Minute)
	sms.Workflow = fallback
	// Both intents race: the SMS one arrives first and twice.
	p.publish(sms)
	p.publish(email)
	p.publish(sms)
	if failed := p.pumpQueueOnce(); failed != 2 {
		t.Fatalf("%d records failed, want the 2 SMS intents held back", failed)
	}
	p.pumpStream()
	p.pumpQueue()
	if got := p.sesMessages(email.Message.To); got != 1 {
		t.Fatalf("emails: %d", got)
	}
	if got := len(p.provider.Messages()); got != 0 {
		t.Fatalf("SMS sent %d times although email was accepted", got)
	}
	if st := p.row(sms).State; st != ledger.Suppressed {
		t.Fatalf("sms row: %s", st)
	}
}

// TestCanaryNeverLeavesTheEnvelope runs claim, dispatch, reconcile and
// expire over accepted, unknown, expired, mismatched and poison intents that
// all carry the canary token, then sweeps every place the system writes.
func TestCanaryNeverLeavesTheEnvelope(t *testing.T) {
	p := newPipeline(t, map[string]string{"EXPIRY_MARGIN": "1s", "RECHECK_AFTER": "1ms"})
	email := p.notification(1, ledger.Email, 10*time.Minute)
	sms := p.notification(2, ledger.SMS, 10*time.Minute)
	expiring := p.notification(3, ledger.SMS, 20*time.Second)
	p.provider.Script(webhook.Step{Action: webhook.AcceptThenDrop})
	for _, n := range []producer.Notification{sms, email, expiring} {
		p.publish(n)
	}
	changed := email
	changed.Message.Body += " v2"
	p.publish(changed)
	p.publishRaw(`{"schema_version":1,"challenge_id":"` + ledgertest.Canary + `"}`)
	p.pumpQueue()
	p.advance(20 * time.Second)
	p.pumpStream()
	p.reconcileNow()
	if err := p.expire.Handle(p.ctx, events.CloudWatchEvent{}); err != nil {
		t.Fatal(err)
	}
	states := map[ledger.State]int{}
	for _, n := range []producer.Notification{email, sms, expiring} {
		states[p.row(n).State]++
	}
	if states[ledger.Accepted] != 1 || states[ledger.Quarantined] != 1 || states[ledger.Expired] != 1 {
		t.Fatalf("states %v", states)
	}
	p.assertNoSecrets()
	for _, item := range p.scanTable(p.contentTable) {
		if strings.Contains(item, ledgertest.Canary) || strings.Contains(item, "example.test") {
			t.Fatalf("plaintext in the content table: %.200s", item)
		}
	}
}
