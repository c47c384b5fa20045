package handler_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// key returns the dedupe key of a notification.
func key(n producer.Notification) string {
	return ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: n.Channel}.Key()
}

// drain hands the dispatch queue to dispatch until every row of ns has
// left claimed and deferred, or the deadline passes. Wake-ups are SQS
// messages with real delays, so it waits in real time.
func drain(t *testing.T, p *pipelinetest.Pipeline, within time.Duration, ns ...producer.Notification) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p.PumpDispatchQueue()
		open := 0
		for _, n := range ns {
			if st := p.Row(n).State; st == ledger.Claimed || st == ledger.Deferred {
				open++
			}
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rows still waiting after %s", open, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestLostStreamRecordsAreRedrivenAndSentBeforeExpiry loses every
// dispatch-bound stream record, as a given-up or lost trigger would:
// reconcile's re-drive must still get every message sent, once, before its
// challenge expires.
func TestLostStreamRecordsAreRedrivenAndSentBeforeExpiry(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{DropStream: func(events.DynamoDBEventRecord) bool { return true }})
	var ns []producer.Notification
	for i := range 4 {
		ch := ledger.Email
		if i%2 == 1 {
			ch = ledger.SMS
		}
		n := p.Notification(i, ch, 5*time.Minute)
		ns = append(ns, n)
		p.Publish(n)
	}
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d intents failed", failed)
	}
	if got := p.PumpStream(); got != 0 || p.Dropped != 4 {
		t.Fatalf("delivered %d stream records, dropped %d; want all 4 lost", got, p.Dropped)
	}
	// Not yet late: reconcile leaves rows whose stream record may be on its way.
	p.ReconcileNow()
	if got := p.PumpDispatchQueue(); got != 0 {
		t.Fatalf("re-drove %d rows claimed a moment ago", got)
	}
	p.Advance(ledger.DefaultPolicy().RedriveAfter + time.Second)
	p.ReconcileNow()
	drain(t, p, 10*time.Second, ns...)
	for _, n := range ns {
		row := p.Row(n)
		if row.State != ledger.Accepted || row.Attempts != 1 {
			t.Fatalf("%s: %s after %d attempts; want accepted once", n.Channel, row.State, row.Attempts)
		}
		if !row.History[len(row.History)-1].At.Before(row.ExpiresAt) {
			t.Fatalf("%s accepted after expiry", n.Channel)
		}
	}
	for _, n := range ns {
		if n.Channel == ledger.Email {
			if got := p.SESMessages(n.Message.To); got != 1 {
				t.Fatalf("captured %d emails, want 1", got)
			}
		} else if got := p.Provider.Recorded(key(n)); got != 1 {
			t.Fatalf("provider recorded %d SMS, want 1", got)
		}
	}
	if d := p.DLQDepth(); d != 0 {
		t.Fatalf("%d intents dead-lettered", d)
	}
	p.AssertNoSecrets()
}

// TestThrottledProvidersEndInASendNotInQuarantine: SES answers
// TooManyRequestsException (injected in the SDK, as SES does above the
// sending rate) and the webhook provider 429 with Retry-After, each for the
// first attempts. Both messages are deferred with the code, retried under
// the same key, and accepted once; nothing is unknown or quarantined.
func TestThrottledProvidersEndInASendNotInQuarantine(t *testing.T) {
	var sesCalls atomic.Int64
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{
		Env: map[string]string{"RETRY_BACKOFF_BASE": "1s", "RETRY_BACKOFF_MAX": "2s", "BUDGET_MAX_WAIT": "1s"},
		FunctionAPIOptions: []func(*middleware.Stack) error{
			pipelinetest.SESThrottle(func() bool { return sesCalls.Add(1) > 2 }),
		},
		WrapProvider: func(h http.Handler) http.Handler {
			var calls atomic.Int64
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && calls.Add(1) == 1 {
					w.Header().Set("Retry-After", "2")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"error":"slow down"}`))
					return
				}
				h.ServeHTTP(w, r)
			})
		},
	})
	email := p.Notification(1, ledger.Email, 5*time.Minute)
	sms := p.Notification(2, ledger.SMS, 5*time.Minute)
	p.Publish(email)
	p.Publish(sms)
	p.PumpQueue()
	start := time.Now()
	p.PumpStream()
	for _, n := range []producer.Notification{email, sms} {
		if row := p.Row(n); row.State != ledger.Deferred {
			t.Fatalf("%s after a throttled attempt: %s (%q); want deferred", n.Channel, row.State, row.Reason)
		}
	}
	drain(t, p, 20*time.Second, email, sms)
	wantCodes := map[ledger.Channel]string{ledger.Email: "TooManyRequestsException", ledger.SMS: "HTTP 429"}
	for _, n := range []producer.Notification{email, sms} {
		row := p.Row(n)
		if row.State != ledger.Accepted {
			t.Fatalf("%s: %s (%q); want accepted", n.Channel, row.State, row.Reason)
		}
		var deferrals int
		for _, ev := range row.History {
			if ev.To == ledger.Unknown || ev.To == ledger.Quarantined {
				t.Fatalf("%s: a throttled attempt was recorded %s", n.Channel, ev.To)
			}
			if ev.To == ledger.Deferred && ev.From == ledger.Dispatching {
				deferrals++
				if ev.Code != wantCodes[n.Channel] || ev.NextAttemptAt.IsZero() || !strings.Contains(ev.Reason, wantCodes[n.Channel]) {
					t.Fatalf("%s deferral event: %+v", n.Channel, ev)
				}
			}
		}
		if deferrals == 0 || row.Attempts != deferrals+1 {
			t.Fatalf("%s: %d deferrals, %d attempts", n.Channel, deferrals, row.Attempts)
		}
		if err := row.Verify(); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.SESMessages(email.Message.To); got != 1 {
		t.Fatalf("captured %d emails, want 1", got)
	}
	if got := p.Provider.Recorded(key(sms)); got != 1 {
		t.Fatalf("provider recorded %d SMS, want 1", got)
	}
	// The webhook asked for 2 s: the retry did not come sooner.
	if el := time.Since(start); el < 2*time.Second {
		t.Fatalf("SMS retried %s after the 429, before its Retry-After", el)
	}
	if !strings.Contains(p.Out.String(), `"NotSent"`) {
		t.Fatal("no NotSent metric emitted")
	}
	p.AssertNoSecrets()
}

// TestNoBudgetSlotBeforeExpiryEndsExpiredNotSent: with the SMS budget
// booked beyond a challenge's deadline, the message is not sent and its row
// says why, at once, instead of waiting to expire.
func TestNoBudgetSlotBeforeExpiryEndsExpiredNotSent(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{Env: map[string]string{"SEND_RATE_SMS": "0.01", "EXPIRY_MARGIN": "1s", "SEND_GUARD": "500ms"}})
	first := p.Notification(1, ledger.SMS, 30*time.Second)
	second := p.Notification(2, ledger.SMS, 30*time.Second)
	p.Publish(first)
	p.Publish(second)
	p.PumpQueue()
	p.PumpStream()
	if row := p.Row(first); row.State != ledger.Accepted {
		t.Fatalf("first SMS: %s (%q); want accepted at once", row.State, row.Reason)
	}
	row := p.Row(second)
	if row.State != ledger.Expired || row.Reason != ledger.NotSentReason(ledger.BudgetCode) || row.Attempts != 0 {
		t.Fatalf("second SMS: %s (%q) after %d attempts; want expired, not sent for the budget", row.State, row.Reason, row.Attempts)
	}
	if got := p.Provider.Recorded(key(second)); got != 0 {
		t.Fatalf("provider recorded %d messages for the second SMS", got)
	}
	if !strings.Contains(p.Out.String(), `"ExpiredUnsent"`) {
		t.Fatal("no ExpiredUnsent metric emitted")
	}
}
