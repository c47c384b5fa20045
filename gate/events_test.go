package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// The gate's provider-event cases, through the route the stack builds (an SES
// configuration set, an SNS topic, the events queue with raw delivery and its
// DLQ) and the real events handler. Events are published to the topic in the
// documented record formats, recipient address and phone number included.

// ackDropper lets SES send and then loses its answer, for every send: the
// message went out, the function sees a reset connection. It keeps the
// message ids SES gave, as the provider's events will carry them.
type ackDropper struct {
	mu  sync.Mutex
	ids map[string]string // dedupe key -> SES message id
}

func (d *ackDropper) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("gate-ack-drop", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		send, ok := in.Parameters.(*sesv2.SendEmailInput)
		if !ok {
			return next.HandleInitialize(ctx, in)
		}
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		for _, tag := range send.EmailTags {
			if aws.ToString(tag.Name) == sestransport.TagIdempotencyKey {
				d.mu.Lock()
				d.ids[aws.ToString(tag.Value)] = aws.ToString(out.Result.(*sesv2.SendEmailOutput).MessageId)
				d.mu.Unlock()
			}
		}
		return middleware.InitializeOutput{}, md, errors.New("gate: connection reset after SES accepted the message")
	}), middleware.After)
}

func (d *ackDropper) id(t *testing.T, key string) string {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.ids[key]
	if !ok {
		t.Fatalf("SES sent nothing for %s", key)
	}
	return id
}

// ackLost publishes one email intent whose SES answer is lost, and returns
// the pipeline, the row (unknown) and the message id SES gave.
func ackLost(t *testing.T) (*pipelinetest.Pipeline, producer.Notification, string) {
	drop := &ackDropper{ids: map[string]string{}}
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{ProviderEvents: true, FunctionAPIOptions: []func(*middleware.Stack) error{drop.option}})
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	p.PumpQueue()
	p.PumpStream()
	row := p.Row(n)
	if row.State != ledger.Unknown {
		t.Fatalf("row %s after a lost SES answer, want unknown", row.State)
	}
	// The first look inside the settle period waits for an event.
	p.Advance(ledger.DefaultPolicy().RecheckAfter)
	p.ReconcileNow()
	if got := p.Row(n); got.State != ledger.Unknown || !strings.Contains(got.Last().Reason, "no provider event yet") {
		t.Fatalf("first reconcile: %s %q, want unknown, waiting for events", got.State, got.Last().Reason)
	}
	return p, n, drop.id(t, row.Key)
}

// TestGateAckLostEventResolves: the acknowledgement is lost, SES's Send
// event arrives later, and the row resolves to accepted with the event as
// its evidence and no operator.
func TestGateAckLostEventResolves(t *testing.T) {
	p, n, msgID := ackLost(t)
	p.PublishProviderEvent(providereventtest.SES("Send", p.Carried(p.Row(n).Key), msgID, p.Now(), ""))
	if failed := p.PumpEvents(); failed != 0 {
		t.Fatalf("%d events failed", failed)
	}
	got := p.Row(n)
	last := got.Last()
	if got.State != ledger.Accepted || got.AckID != msgID || last.Kind != ledger.KindProviderSent || last.From != ledger.Unknown ||
		!strings.HasPrefix(last.Worker, "events") || !strings.Contains(last.Reason, "without an operator") {
		t.Fatalf("row %s ack %q, last entry %+v", got.State, got.AckID, last)
	}
	for _, ev := range got.History {
		if strings.HasPrefix(ev.Worker, "operator") {
			t.Fatalf("an operator entry: %+v", ev)
		}
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Out.String(), `"`+metrics.ResolvedByEvent+`"`) {
		t.Fatal("ResolvedByEvent was not counted")
	}
	assertNoEventSecrets(t, p)
}

// TestGateAckLostNoEvent: the acknowledgement is lost and no event comes:
// after the settle period the row is quarantined for an operator, saying so.
func TestGateAckLostNoEvent(t *testing.T) {
	p, n, _ := ackLost(t)
	p.Advance(ledger.DefaultPolicy().SettlePeriod)
	p.ReconcileNow()
	got := p.Row(n)
	if got.State != ledger.Quarantined || !strings.Contains(got.Reason, "no provider event within the settle period") {
		t.Fatalf("row %s %q, want quarantined for want of an event", got.State, got.Reason)
	}
}

// heldFallback publishes fallback pair i (email, then SMS) through a
// pipeline with provider events and runs it until the email is accepted and
// the SMS held for the fallback wait.
func heldFallback(t *testing.T, i int) (p *pipelinetest.Pipeline, email, sms producer.Notification) {
	t.Helper()
	p = pipelinetest.NewWithOptions(t, pipelinetest.Options{ProviderEvents: true})
	email, sms = p.Notification(i, ledger.Email, 10*time.Minute), p.Notification(i, ledger.SMS, 10*time.Minute)
	for _, n := range []*producer.Notification{&email, &sms} {
		n.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
		p.Publish(*n)
	}
	p.PumpQueue()
	p.PumpStream()
	if e, s := p.Row(email), p.Row(sms); e.State != ledger.Accepted || s.State != ledger.Held {
		t.Fatalf("email %s, sms %s; want accepted and held", e.State, s.State)
	}
	return p, email, sms
}

// TestGateFallbackOnHardBounce: a permanent bounce of the email releases the
// held SMS, which is sent, with the bounce as its reason; a transient bounce
// leaves it held until the fallback wait ends, and then suppressed.
func TestGateFallbackOnHardBounce(t *testing.T) {
	for _, bounceType := range []string{"Permanent", "Transient"} {
		t.Run(bounceType, func(t *testing.T) {
			p, email, sms := heldFallback(t, 2)
			e := p.Row(email)
			p.PublishProviderEvent(providereventtest.SES("Bounce", p.Carried(e.Key), e.AckID, p.Now(), bounceType))
			p.PumpEvents()
			p.PumpStream()
			s := p.Row(sms)
			if bounceType == "Transient" {
				if s.State != ledger.Held {
					t.Fatalf("sms %s after a transient bounce, want held", s.State)
				}
				p.Advance(ledger.DefaultPolicy().FallbackWait + time.Second)
				p.ExpireNow()
				if s = p.Row(sms); s.State != ledger.Suppressed || p.Provider.Recorded(s.Key) != 0 {
					t.Fatalf("sms %s (sent %d) after the wait, want suppressed", s.State, p.Provider.Recorded(s.Key))
				}
				return
			}
			if s.State != ledger.Accepted || p.Provider.Recorded(s.Key) != 1 || len(s.History) < 2 ||
				!strings.Contains(s.History[1].Reason, "permanent delivery failure: Bounce Permanent/General") {
				t.Fatalf("sms %s, sent %d, history %+v", s.State, p.Provider.Recorded(s.Key), s.History)
			}
			assertNoEventSecrets(t, p)
		})
	}
}

// TestGateBadEvents: duplicates, out-of-order events, events for no row or
// the wrong channel, malformed and foreign events. None fails in a loop,
// none stops a good event in the same batches: each good one is recorded
// once, each bad one is counted with its reason, and the ones that may be
// ours are kept in the DLQ.
func TestGateBadEvents(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{ProviderEvents: true, MaxReceives: 2})
	n := p.Notification(3, ledger.Email, 10*time.Minute)
	p.Publish(n)
	p.PumpQueue()
	p.PumpStream()
	row := p.Row(n)
	at := p.Now()
	noRow := hex.EncodeToString(func() []byte { s := sha256.Sum256([]byte("no such row")); return s[:] }())
	sent := p.Carried(row.Key)
	good := [][]byte{
		providereventtest.SES("Delivery", sent, row.AckID, at.Add(2*time.Second), ""), // before its Send: out of order
		providereventtest.SES("Send", sent, row.AckID, at, ""),
	}
	// Signed as a send of ours would be: a row that is gone (its TTL), and a
	// tagging bug that put an email row's key on an SMS.
	kept := [][]byte{
		providereventtest.SES("Send", p.Sign(noRow, ledger.Email, 1), "0102-no-row", at, ""),                    // unmatched
		providereventtest.SMS("TEXT_DELIVERED", "DELIVERED", p.Sign(row.Key, ledger.SMS, 1), "sms-1", at, true), // channel mismatch
		[]byte(`{"eventType":"Bounce","mail":{"messageId":"x","tags":{"idempotency_key":["` + row.Key),          // malformed
	}
	dropped := [][]byte{
		providereventtest.SES("Send", providereventtest.Unproven(""), "0102-foreign", at, ""),         // not ours: no key
		providereventtest.SES("Open", sent, row.AckID, at, ""),                                        // a type the ledger does not keep
		providereventtest.SES("Delivery", providereventtest.Unproven(row.Key), "0102-forged", at, ""), // no proof: anyone could write it
	}
	for _, batch := range [][][]byte{good, kept, dropped, good} { // good twice: duplicates
		for _, b := range batch {
			p.PublishProviderEvent(b)
		}
	}
	p.PumpEvents()
	got := p.Row(n)
	var kinds []string
	for _, ev := range got.History[3:] {
		kinds = append(kinds, string(ev.Kind))
	}
	if got.State != ledger.Accepted || strings.Join(kinds, ",") != "delivered,provider_sent" {
		t.Fatalf("row %s with provider entries %v, want delivered then provider_sent, once each", got.State, kinds)
	}
	if err := got.Verify(); err != nil {
		t.Fatal(err)
	}
	if depth := p.QueueDepth(p.EventsDLQURL); depth != len(kept) {
		t.Fatalf("events DLQ holds %d, want %d", depth, len(kept))
	}
	out := p.Out.String()
	for _, reason := range []string{"unmatched", "channel_mismatch", "malformed", "not_ours", "ignored_type", "unproven"} {
		if !strings.Contains(out, `"Reason":"`+reason+`"`) {
			t.Errorf("no ProviderEventsRefused count with reason %s", reason)
		}
	}
	if strings.Count(out, `"`+metrics.DuplicateProviderEvents+`"`) < 2 {
		t.Error("the duplicates were not counted")
	}
	assertNoEventSecrets(t, p)
}

// assertNoEventSecrets: the recipient address and phone number the events
// carried reached no ledger row and no log line or metric.
func assertNoEventSecrets(t *testing.T, p *pipelinetest.Pipeline) {
	t.Helper()
	for _, h := range append(p.ScanLedger(), p.Out.String()) {
		for _, s := range []string{providereventtest.Recipient, providereventtest.Phone, "Reset your password", "550 5.1.1"} {
			if strings.Contains(h, s) {
				t.Fatalf("%q leaked into %.300s", s, h)
			}
		}
	}
}

// TestGateForgedEvents: what anyone who can reach the events route could
// write, with a row's dedupe key (the SHA-256 of a challenge id) and a
// made-up message id, through the route the stack builds and the real
// handler. Neither the policies (the emulator enforces none) nor the
// decoder stop these; the attempt proof does.
func TestGateForgedEvents(t *testing.T) {
	t.Run("delivery for a throttled row", func(t *testing.T) {
		// SES throttles the first send: nothing reached anyone.
		var sesCalls atomic.Int64
		p := pipelinetest.NewWithOptions(t, pipelinetest.Options{ProviderEvents: true,
			Env: map[string]string{"RETRY_BACKOFF_BASE": "1s", "RETRY_BACKOFF_MAX": "2s"},
			FunctionAPIOptions: []func(*middleware.Stack) error{
				pipelinetest.SESThrottle(func() bool { return sesCalls.Add(1) > 1 }),
			}})
		n := p.Notification(4, ledger.Email, 10*time.Minute)
		p.Publish(n)
		p.PumpQueue()
		p.PumpStream()
		row := p.Row(n)
		if row.State != ledger.Deferred {
			t.Fatalf("row %s after a throttled send, want deferred", row.State)
		}
		sent := p.Carried(row.Key)
		for _, forged := range []providereventtest.Carried{
			providereventtest.Unproven(row.Key),                        // no proof
			{Key: row.Key, Attempt: 1, Proof: strings.Repeat("A", 43)}, // a made-up proof
			{Key: row.Key, Attempt: 2, Proof: sent.Proof},              // the real proof, moved to another attempt
		} {
			p.PublishProviderEvent(providereventtest.SES("Delivery", forged, "0102018f-made-up-000000", p.Now(), ""))
		}
		if failed := p.PumpEvents(); failed != 0 {
			t.Fatalf("%d forged events failed (retried) instead of being refused", failed)
		}
		if got := p.Row(n); got.State != ledger.Deferred || got.AckID != "" || got.Version != row.Version {
			t.Fatalf("row %s ack %q version %d -> %d after forged events, want deferred and unwritten", got.State, got.AckID, row.Version, got.Version)
		}
		if c := strings.Count(p.Out.String(), `"Reason":"unproven"`); c != 3 {
			t.Fatalf("%d unproven refusals counted, want 3", c)
		}
		if depth := p.QueueDepth(p.EventsDLQURL); depth != 0 {
			t.Fatalf("%d forged events kept in the DLQ, want none (they are evidence of nothing)", depth)
		}
		// The throttle lifts: the row is sent, once.
		p.Advance(3 * time.Second)
		p.PumpDispatchQueue()
		if got := p.Row(n); got.State != ledger.Accepted || p.SESMessages(n.Message.To) != 1 {
			t.Fatalf("row %s with %d emails after the throttle, want accepted with one", got.State, p.SESMessages(n.Message.To))
		}
	})
	t.Run("bounce for a held fallback", func(t *testing.T) {
		p, email, sms := heldFallback(t, 5)
		e := p.Row(email)
		p.PublishProviderEvent(providereventtest.SES("Bounce", providereventtest.Unproven(e.Key), e.AckID, p.Now(), "Permanent"))
		p.PumpEvents()
		p.PumpStream()
		if s := p.Row(sms); s.State != ledger.Held {
			t.Fatalf("sms %s after a forged hard bounce, want held", s.State)
		}
		p.Advance(ledger.DefaultPolicy().FallbackWait + time.Second)
		p.ExpireNow()
		if s := p.Row(sms); s.State != ledger.Suppressed || p.Provider.Recorded(s.Key) != 0 {
			t.Fatalf("sms %s (sent %d) after the wait, want suppressed and never sent", s.State, p.Provider.Recorded(s.Key))
		}
		for _, ev := range p.Row(email).History {
			if ev.Kind.Provider() {
				t.Fatalf("the forged bounce was recorded: %+v", ev)
			}
		}
	})
}
