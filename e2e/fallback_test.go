package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// sweepSlack is how long after the fallback wait the test gives the expire
// sweep (scheduled once a minute) to suppress a held row: two ticks.
const sweepSlack = 2*time.Minute + 10*time.Second

// TestEndToEndFallback: a fallback pair (email, then SMS) sent through the
// deployed stack, and SES's bounce for the accepted email published to the
// deployed provider-events topic in the event-publishing format, carrying the
// attempt proof the email's send carried.
//   - Permanent: the hard bounce hands over: the held SMS is claimed and sent
//     exactly once.
//   - Transient: a forged hard bounce (no proof) goes first and is refused;
//     the real soft bounce does not hand over: the SMS stays held and is
//     suppressed, never sent, when the fallback wait ends.
//
// Both need a fallback wait above zero: with none, the SMS is suppressed the
// moment the email is accepted, before any bounce can arrive.
func TestEndToEndFallback(t *testing.T) {
	e := setup(t)
	for _, need := range []struct{ name, value string }{
		{"ProviderEventsTopicArn", e.out.ProviderEventsTopicARN}, {"AttemptProofKeyArn", e.out.AttemptProofKeyARN},
		{outputs.Function(settings.Events).Name, e.out.All[outputs.Function(settings.Events).Name]},
		{outputs.Function(settings.Expire).Name, e.out.ExpireFunction},
	} {
		if need.value == "" {
			t.Fatalf("stack %s has no %s output", e.out.Stack, need.name)
		}
	}
	wait, v := e.fallbackWait(t), settings.FallbackDeliveryWait
	if wait <= 0 {
		t.Fatalf("stack %s deploys the provider-events route with %s=%v: a held SMS is suppressed when the email is "+
			"accepted, before a bounce can hand over to it; deploy a non-zero -c %s (localstack/deploy-local.sh does)",
			e.out.Stack, v.Env, wait, v.Context)
	}
	run := emulator.UniqueName(t, "fallback")
	start := time.Now()
	t.Logf("stack %s, run %s, fallback wait %v", e.out.Stack, run, wait)

	sms := map[string]string{} // bounce type -> key of the pair's SMS row
	t.Run("bounce", func(t *testing.T) {
		for _, bounce := range []string{"Permanent", "Transient"} {
			k := key(producer.Notification{ChallengeID: run + "-" + strings.ToLower(bounce), Channel: ledger.SMS})
			sms[bounce] = k
			t.Run(bounce, func(t *testing.T) { t.Parallel(); e.fallback(t, run, bounce, wait) })
		}
	})

	// Count the SMS sends last, after the slower scenario: a late duplicate
	// has had all that time to show up.
	msgs, err := ProviderMessages(context.Background(), e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	for bounce, want := range map[string]int{"Permanent": 1, "Transient": 0} {
		got := 0
		for _, m := range msgs {
			if m.IdempotencyKey == sms[bounce] {
				got++
			}
		}
		if got != want {
			t.Errorf("%s bounce: the webhook provider recorded %d SMS under %s, want %d", bounce, got, sms[bounce], want)
		}
	}
	t.Logf("fallback pairs settled in %v", time.Since(start).Round(time.Second))
}

// fallbackWait is the FALLBACK_DELIVERY_WAIT the deployed expire function (the
// one that ends the wait) runs with.
func (e *env) fallbackWait(t *testing.T) time.Duration {
	t.Helper()
	vars, err := FunctionEnvironment(context.Background(), e.cfg, e.endpoint, e.out.ExpireFunction)
	if err != nil {
		t.Fatalf("expire function of stack %s: %v", e.out.Stack, err)
	}
	v := settings.FallbackDeliveryWait
	raw, ok := vars[v.Env]
	if !ok {
		raw = v.Default
	}
	wait, err := time.ParseDuration(raw)
	if err != nil {
		t.Fatalf("expire function of stack %s: %s=%q: %v", e.out.Stack, v.Env, raw, err)
	}
	return wait
}

// heldTimeout bounds publish -> terminal row for a held fallback channel that
// is not handed over: the send of the earlier channel, the wait, and up to two
// expire sweeps.
func (e *env) heldTimeout(t *testing.T) time.Duration {
	t.Helper()
	return sendTimeout + e.fallbackWait(t) + sweepSlack
}

// fallback runs one pair: the email is accepted, the SMS held; then SES's
// bounce of type bounce is published for the email (a Transient one after a
// forged Permanent one), and the SMS must be sent (Permanent) or suppressed
// when the wait ends (Transient). The parent counts its sends.
func (e *env) fallback(t *testing.T, run, bounce string, wait time.Duration) {
	ctx := context.Background()
	challenge := run + "-" + strings.ToLower(bounce)
	expires := time.Now().Add(10 * time.Minute)
	email := notification(challenge, ledger.Email, "bounce+"+challenge+"@"+simulatorDomain, expires)
	sms := notification(challenge, ledger.SMS, number(t, "US"), expires)
	wf := ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	email.Workflow, sms.Workflow = wf, wf
	for _, n := range []producer.Notification{email, sms} {
		if _, err := e.producer.Publish(ctx, n); err != nil {
			t.Fatalf("publish %s/%s: %v", n.ChallengeID, n.Channel, err)
		}
	}

	sent := e.terminal(t, key(email), sendTimeout)
	if sent.State != ledger.Accepted {
		t.Fatalf("email %s is %s (%s), want accepted", sent.Key, sent.State, sent.Reason)
	}
	acceptedAt := sent.UpdatedAt
	for _, ev := range sent.History {
		if ev.To == ledger.Accepted && ev.From != ledger.Accepted {
			acceptedAt = ev.At
		}
	}
	// The SMS is held from its claim on (the email open or within its wait).
	held := e.row(t, key(sms), func(r ledger.Entry) bool { return r.State != ledger.None })
	if held.State != ledger.Held {
		t.Fatalf("sms %s is %s (%s) %v after the email was accepted, want held for the fallback wait (%v)",
			held.Key, held.State, held.Reason, time.Since(acceptedAt).Round(time.Millisecond), wait)
	}

	forgedID := "0102018f-forged-" + challenge
	publishBounces(t, ctx, e, sent, bounce, forgedID)
	published := time.Now()
	t.Logf("%s bounce published %v after the email was accepted", bounce, published.Sub(acceptedAt).Round(time.Millisecond))

	// The bounce is recorded on the email's row.
	bounced := e.row(t, sent.Key, func(r ledger.Entry) bool {
		for _, ev := range r.History {
			if ev.Kind == ledger.KindBounced {
				return true
			}
		}
		return false
	})
	for _, ev := range bounced.History {
		if ev.Kind.Provider() && (ev.AckID != sent.AckID || ev.Detail != bounce+"/General") {
			t.Errorf("email history has provider entry %s %q (ack %s), want only the %s bounce of %s", ev.Kind, ev.Detail, ev.AckID, bounce, sent.AckID)
		}
	}

	if bounce == "Permanent" {
		s := e.terminalWithin(t, held.Key, sendTimeout)
		if s.State != ledger.Accepted || len(s.History) < 2 || s.History[1].From != ledger.Held || s.History[1].To != ledger.Claimed ||
			!strings.Contains(s.History[1].Reason, "permanent delivery failure: Bounce Permanent/General") {
			t.Fatalf("sms %s after a hard bounce %v after acceptance (wait %v): %s (%s), history %+v; want held -> claimed by the bounce, then accepted",
				s.Key, published.Sub(acceptedAt).Round(time.Millisecond), wait, s.State, s.Reason, s.History)
		}
		if err := s.Verify(); err != nil {
			t.Errorf("sms history: %v", err)
		}
		t.Logf("sms %s: handed over and accepted %v after the bounce (ack %s)", s.Key[:12], time.Since(published).Round(time.Millisecond), s.AckID)
		return
	}

	checkTransientFallback(t, ctx, e, forgedID, published, acceptedAt, wait, held, bounced)
}

// publishBounces publishes SES's bounce of type bounce for the email that
// was sent, carrying the send's attempt proof, after (for a Transient one) a
// forged Permanent one under forgedID that carries none.
func publishBounces(t *testing.T, ctx context.Context, e *env, sent ledger.Entry, bounce, forgedID string) {
	t.Helper()
	// The email's send carried this proof; the emulator's SES keeps no tags,
	// so it is made again with the deployed key, as dispatch made it.
	proofs := &attemptproof.KMS{Client: kms.NewFromConfig(e.cfg), KeyARN: e.out.AttemptProofKeyARN}
	proof, err := proofs.Sign(ctx, ledger.AttemptRef{Key: sent.Key, Channel: ledger.Email, Attempt: sent.Attempts})
	if err != nil {
		t.Fatal(err)
	}
	carried := providereventtest.Carried{Key: sent.Key, Attempt: sent.Attempts, Proof: proof}
	var records [][]byte
	if bounce == "Transient" {
		records = append(records, providereventtest.SES("Bounce", providereventtest.Unproven(sent.Key), forgedID, time.Now(), "Permanent"))
	}
	records = append(records, providereventtest.SES("Bounce", carried, sent.AckID, time.Now(), bounce))
	topic := sns.NewFromConfig(e.cfg)
	for _, rec := range records {
		if _, err := topic.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(e.out.ProviderEventsTopicARN), Message: aws.String(string(rec))}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTransientFallback: after a transient bounce and a forged hard one, the
// forged one is refused as unproven and recorded nowhere, and the SMS stays
// held until the wait ends, then is suppressed, never sent.
func checkTransientFallback(t *testing.T, ctx context.Context, e *env, forgedID string, published, acceptedAt time.Time, wait time.Duration, held, bounced ledger.Entry) {
	t.Helper()
	// The forged hard bounce was handled, refused as unproven, and recorded nowhere.
	events := LogGroup(e.out.All[outputs.Function(settings.Events).Name])
	err := Poll(ctx, sendTimeout, pollEvery, func(ctx context.Context) (bool, string, error) {
		lines, err := FilterLogEvents(ctx, e.cfg, e.endpoint, events, `"`+forgedID+`"`, published.Add(-time.Minute))
		if err != nil {
			return false, "", err
		}
		for _, l := range lines {
			if m := jsonLine(l.Message); m != nil && m["provider_message_id"] == forgedID && m["reason"] == "unproven" {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events log lines about %s, none refusing it as unproven", len(lines), forgedID), nil
	})
	if err != nil {
		t.Errorf("forged bounce, events function log (%s): %v", events, err)
	}
	if now := time.Now(); now.Before(acceptedAt.Add(wait)) {
		if s, err := e.store.Get(ctx, held.Key); err != nil || s.State != ledger.Held {
			t.Errorf("sms %s after a transient bounce and a forged hard one, %v before the wait ends: %s (%v), want held",
				held.Key, acceptedAt.Add(wait).Sub(now).Round(time.Millisecond), s.State, err)
		}
	}
	s := e.terminalWithin(t, held.Key, time.Until(acceptedAt.Add(wait+sweepSlack)))
	if s.State != ledger.Suppressed || s.Attempts != 0 || !strings.Contains(s.Reason, "no permanent delivery failure reported within") {
		t.Fatalf("sms %s after a transient bounce: %s (%s), %d attempts; want suppressed when the wait ended, never sent", s.Key, s.State, s.Reason, s.Attempts)
	}
	settled := acceptedAt
	if n := len(s.History); n > 0 {
		settled = s.History[n-1].At
	}
	if settled.Before(acceptedAt.Add(wait)) {
		t.Errorf("sms %s suppressed %v after the email was accepted, before the wait (%v) ended", s.Key, settled.Sub(acceptedAt), wait)
	}
	for _, ev := range bounced.History {
		if ev.AckID == forgedID {
			t.Errorf("the forged bounce was recorded: %+v", ev)
		}
	}
	t.Logf("sms %s: suppressed %v after the email was accepted: %s", s.Key[:12], settled.Sub(acceptedAt).Round(time.Millisecond), s.Reason)
}

// row polls the row of key until done accepts it (sendTimeout) and returns it.
func (e *env) row(t *testing.T, key string, done func(ledger.Entry) bool) ledger.Entry {
	t.Helper()
	var row ledger.Entry
	err := Poll(context.Background(), sendTimeout, pollEvery, func(ctx context.Context) (bool, string, error) {
		r, err := e.store.Get(ctx, key)
		if errors.Is(err, ledger.ErrNotFound) {
			return false, "no row " + key + " yet", nil
		}
		if err != nil {
			return false, "", err
		}
		row = r
		return done(r), fmt.Sprintf("row %s is %s", key, r.State), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// terminalWithin is terminal with a timeout of at least sendTimeout.
func (e *env) terminalWithin(t *testing.T, key string, timeout time.Duration) ledger.Entry {
	t.Helper()
	return e.terminal(t, key, max(timeout, sendTimeout))
}
