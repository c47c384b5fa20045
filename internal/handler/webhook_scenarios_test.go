package handler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

func TestCrashAfterProviderAcceptedIsQuarantinedNeverResent(t *testing.T) {
	// The provider honors no idempotency key: a blind retry would be a
	// second message.
	p := pipelinetest.New(t, map[string]string{"WEBHOOK_KEY_WINDOW": "0s", "WEBHOOK_TIMEOUT": "1s", "LEASE_DURATION": "1s", "RECHECK_AFTER": "1ms"})
	dropped := p.Notification(1, ledger.SMS, 10*time.Minute)
	slow := p.Notification(2, ledger.SMS, 10*time.Minute)
	// Accepted, then the connection dropped; accepted, then held past the
	// function's timeout (the runtime would end the process here).
	p.Provider.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop}, webhooktest.Step{Action: webhooktest.Slow, Delay: 3 * time.Second})
	p.Publish(dropped)
	p.PumpQueue()
	p.PumpStream()
	p.Publish(slow)
	p.PumpQueue()
	p.PumpStream()
	for _, n := range []struct {
		name string
		row  ledger.Entry
	}{{"dropped", p.Row(dropped)}, {"slow", p.Row(slow)}} {
		if n.row.State != ledger.Unknown || !strings.HasPrefix(n.row.Reason, "no acknowledgement") {
			t.Fatalf("%s: %s %q", n.name, n.row.State, n.row.Reason)
		}
	}
	p.Advance(1100 * time.Millisecond)
	p.ReconcileNow()
	p.ReconcileNow()
	for _, n := range []ledger.Entry{p.Row(dropped), p.Row(slow)} {
		if n.State != ledger.Quarantined || !strings.Contains(n.Reason, "outcome unknown") {
			t.Fatalf("%s: %s %q", n.Identity.ChallengeID, n.State, n.Reason)
		}
		if got := p.Provider.Recorded(n.Key); got != 1 {
			t.Fatalf("%s: provider recorded %d messages, want exactly 1", n.Identity.ChallengeID, got)
		}
		if err := n.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	// Transitions are counted wherever they are made, reconcile included.
	for _, st := range []string{"claimed", "dispatching", "unknown", "quarantined"} {
		if c := strings.Count(p.Out.String(), `"Channel":"sms","State":"`+st+`","Transitions":1`); c != 2 {
			t.Fatalf("Transitions to %s counted %d times, want 2", st, c)
		}
	}
	if !strings.Contains(p.Out.String(), `"OpenClaims":2`) || !strings.Contains(p.Out.String(), `"State":"quarantined"`) {
		t.Fatal("reconcile did not publish the open quarantined claims")
	}
	p.AssertNoSecrets()
}

func TestProviderHonoringKeysIsRetriedUnderTheSameKey(t *testing.T) {
	p := pipelinetest.New(t, map[string]string{"WEBHOOK_KEY_WINDOW": "1h", "RECHECK_AFTER": "1ms"}, webhooktest.ProviderConfig{HonorKeys: true})
	n := p.Notification(1, ledger.SMS, 10*time.Minute)
	p.Provider.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop})
	p.Publish(n)
	p.PumpQueue()
	p.PumpStream()
	if st := p.Row(n).State; st != ledger.Unknown {
		t.Fatalf("after the dropped answer: %s", st)
	}
	p.Advance(5 * time.Millisecond)
	p.ReconcileNow()
	row := p.Row(n)
	if row.State != ledger.Accepted || row.Attempts != 2 || row.AckID == "" {
		t.Fatalf("after reconcile: %s attempts %d ack %q", row.State, row.Attempts, row.AckID)
	}
	if rec, got := p.Provider.Recorded(row.Key), p.Provider.Received(row.Key); rec != 1 || got != 2 {
		t.Fatalf("provider recorded %d and received %d, want 1 and 2", rec, got)
	}
	p.AssertNoSecrets()
}

func TestFallbackRaceSendsOneMessage(t *testing.T) {
	p := pipelinetest.New(t, nil)
	email := p.Notification(1, ledger.Email, 10*time.Minute)
	fallback := ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	email.Workflow = fallback
	sms := p.Notification(1, ledger.SMS, 10*time.Minute)
	sms.Workflow = fallback
	// Both intents race: the SMS one arrives first and twice.
	p.Publish(sms)
	p.Publish(email)
	p.Publish(sms)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d records failed; a waiting fallback is recorded held, not retried", failed)
	}
	if st := p.Row(sms).State; st != ledger.Held {
		t.Fatalf("sms row before the email ended: %s", st)
	}
	p.PumpStream()
	p.PumpStream()
	if got := p.SESMessages(email.Message.To); got != 1 {
		t.Fatalf("emails: %d", got)
	}
	if got := len(p.Provider.Messages()); got != 0 {
		t.Fatalf("SMS sent %d times although email was accepted", got)
	}
	if st := p.Row(sms).State; st != ledger.Suppressed {
		t.Fatalf("sms row: %s", st)
	}
}

// TestFallbackFollowsARejectionThroughTheStream: the email is refused, the
// held SMS row becomes claimed in the same outcome write's aftermath, and
// that MODIFY record reaches dispatch through the stream filter.
func TestFallbackFollowsARejectionThroughTheStream(t *testing.T) {
	p := pipelinetest.New(t, map[string]string{"EMAIL_TRANSPORT": "webhook"})
	p.Provider.Script(webhooktest.Step{Action: webhooktest.Reject}) // the email
	email := p.Notification(2, ledger.Email, 10*time.Minute)
	sms := p.Notification(2, ledger.SMS, 10*time.Minute)
	email.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	sms.Workflow = email.Workflow
	p.Publish(sms)
	p.Publish(email)
	p.PumpQueue()
	if n := p.PumpStream(); n != 1 {
		t.Fatalf("first stream read: %d claimed records, want the email only", n)
	}
	if st := p.Row(email).State; st != ledger.Rejected {
		t.Fatalf("email: %s", st)
	}
	if n := p.PumpStream(); n != 1 {
		t.Fatalf("second stream read: %d claimed records, want the sms that left held", n)
	}
	row := p.Row(sms)
	if row.State != ledger.Accepted || p.Provider.Recorded(row.Key) != 1 {
		t.Fatalf("sms %s, provider recorded %d", row.State, p.Provider.Recorded(row.Key))
	}
	if row.History[1].From != ledger.Held || row.History[1].To != ledger.Claimed {
		t.Fatalf("sms history: %+v", row.History[1])
	}
	p.AssertNoSecrets()
}

// TestCanaryNeverLeavesTheEnvelope runs claim, dispatch, reconcile and
// expire over accepted, unknown, expired, mismatched and poison intents that
// all carry the canary token, then sweeps every place the system writes.
func TestCanaryNeverLeavesTheEnvelope(t *testing.T) {
	p := pipelinetest.New(t, map[string]string{"EXPIRY_MARGIN": "1s", "SEND_GUARD": "500ms", "RECHECK_AFTER": "1ms"})
	email := p.Notification(1, ledger.Email, 10*time.Minute)
	sms := p.Notification(2, ledger.SMS, 10*time.Minute)
	expiring := p.Notification(3, ledger.SMS, 20*time.Second)
	p.Provider.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop})
	for _, n := range []producer.Notification{sms, email, expiring} {
		p.Publish(n)
	}
	changed := email
	changed.Message.Body += " v2"
	p.Publish(changed)
	p.PublishRaw(`{"schema_version":1,"challenge_id":"` + ledgertest.Canary + `"}`)
	p.PumpQueue()
	p.Advance(20 * time.Second)
	p.PumpStream()
	p.ReconcileNow()
	p.ExpireNow()
	states := map[ledger.State]int{}
	for _, n := range []producer.Notification{email, sms, expiring} {
		states[p.Row(n).State]++
	}
	if states[ledger.Accepted] != 1 || states[ledger.Quarantined] != 1 || states[ledger.Expired] != 1 {
		t.Fatalf("states %v", states)
	}
	p.AssertNoSecrets()
	for _, item := range p.ScanTable(p.ContentTable) {
		if strings.Contains(item, ledgertest.Canary) || strings.Contains(item, "example.test") {
			t.Fatalf("plaintext in the content table: %.200s", item)
		}
	}
}

// TestWebhookRedirectIsNotFollowed: a webhook that answers a send with a
// redirect to another host never gets the reset message sent there (the
// other host sees no request at all, neither the POST nor a GET), and the
// row ends as the transport's table says: a 307 or 308 (send it there
// instead) and a 301 are rejections, since the endpoint did not take the
// message at WEBHOOK_URL; a 302 or 303 may answer a POST that was processed,
// so it is unknown. Reconcile's lookups (WEBHOOK_LOOKUP) use the same client
// and do not follow the redirect either.
func TestWebhookRedirectIsNotFollowed(t *testing.T) {
	for _, tc := range []struct {
		status int
		state  ledger.State
		reason string
	}{
		{http.StatusTemporaryRedirect, ledger.Rejected, "HTTP 307: redirect not followed"},
		{http.StatusPermanentRedirect, ledger.Rejected, "HTTP 308: redirect not followed"},
		{http.StatusMovedPermanently, ledger.Rejected, "HTTP 301: redirect not followed"},
		{http.StatusFound, ledger.Unknown, "no acknowledgement"},
		{http.StatusSeeOther, ledger.Unknown, "no acknowledgement"},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			var elsewhere atomic.Int32
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				elsewhere.Add(1)
				_, _ = io.WriteString(w, `{"id":"stolen"}`)
			}))
			t.Cleanup(other.Close)
			p := pipelinetest.NewWithOptions(t, pipelinetest.Options{
				Env: map[string]string{"WEBHOOK_LOOKUP": "true", "WEBHOOK_TIMEOUT": "1s", "LEASE_DURATION": "1s", "RECHECK_AFTER": "1ms"},
				WrapProvider: func(h http.Handler) http.Handler {
					return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						http.Redirect(w, r, other.URL+"/collect", tc.status)
					})
				},
			})
			n := p.Notification(1, ledger.SMS, 10*time.Minute)
			p.Publish(n)
			p.PumpQueue()
			p.PumpStream()
			row := p.Row(n)
			if row.State != tc.state || !strings.Contains(row.Reason, tc.reason) {
				t.Fatalf("row %s %q, want %s with %q", row.State, row.Reason, tc.state, tc.reason)
			}
			if tc.state == ledger.Unknown {
				p.Advance(1100 * time.Millisecond)
				p.ReconcileNow() // looks the key up: the lookup is redirected too
			}
			if got := elsewhere.Load(); got != 0 {
				t.Fatalf("the host the redirect named got %d requests, want none", got)
			}
			if got := p.Provider.Received(row.Key); got != 0 {
				t.Fatalf("the provider behind the redirecting endpoint got %d sends", got)
			}
			p.AssertNoSecrets()
		})
	}
}
