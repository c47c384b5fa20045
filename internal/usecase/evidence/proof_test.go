package evidence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Attempt proofs: an event is evidence only if it proves it answers an
// attempt this system made. Anyone who can reach the events route can write
// an event with a row's dedupe key (the SHA-256 of a challenge id); no one
// but the senders can sign its attempt.

// forgeries are events about the attempt a row made, each missing what only
// a send of ours could give it.
func forgeries(t *testing.T, e *ledgertest.Scenario, genuine ledger.ProviderEvent) map[string]ledger.ProviderEvent {
	t.Helper()
	noProof, madeUp, otherKey, later, noAttempt := genuine, genuine, genuine, genuine, genuine
	noProof.Proof = ""
	madeUp.Proof = strings.Repeat("A", 43)
	stranger := &attemptproof.Local{Key: []byte("a key the senders do not hold")}
	otherKey.Proof, _ = stranger.Sign(context.Background(), ledger.AttemptRef{Key: genuine.Key, Channel: genuine.Channel, Attempt: genuine.Attempt})
	// A valid proof for an attempt the row has not made (only the senders
	// could sign it; the row's attempt count refuses it all the same).
	later.Attempt++
	later.Proof = ledgertest.SignProof(t, e, later)
	noAttempt.Attempt = 0
	return map[string]ledger.ProviderEvent{
		"no proof": noProof, "made-up proof": madeUp, "proof under another key": otherKey,
		"attempt not made": later, "no attempt": noAttempt,
	}
}

// refuseAll records each forgery and fails unless every one is ErrUnproven
// and the row is unchanged.
func refuseAll(t *testing.T, e *ledgertest.Scenario, forged map[string]ledger.ProviderEvent) {
	t.Helper()
	for name, p := range forged {
		before := e.Get(t, p.Key)
		_, err := e.Cases.RecordProviderEvent(context.Background(), p, "events/req-1")
		if !errors.Is(err, ledger.ErrUnproven) {
			t.Errorf("%s: %v, want ErrUnproven", name, err)
		}
		if after := e.Get(t, p.Key); after.Version != before.Version || after.Holds(p.ID()) {
			t.Errorf("%s: the row was written (version %d -> %d)", name, before.Version, after.Version)
		}
	}
}

// TestForgedDeliveryLeavesDeferredRowDeferred: the provider throttled the
// send, so nothing reached anyone. A Delivery event carrying the row's key and
// a made-up message id must not turn it into accepted; the row is sent when
// the provider takes it again, and a genuine event still resolves rows.
func TestForgedDeliveryLeavesDeferredRowDeferred(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Events = true
	in, _, _ := e.Claim(t, 40, ledger.Email, ledger.OutcomeClaimed)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
	genuine := ledger.ProviderEvent{
		Key: in.Key(), Channel: ledger.Email, Kind: ledger.KindDelivered, Type: "Delivery",
		MessageID: "0100018f-made-up-000000", At: e.Clock.Now(),
	}
	e.Prove(t, &genuine) // what a real event about the throttled attempt would carry
	refuseAll(t, e, forgeries(t, e, genuine))
	if row := e.Get(t, in.Key()); row.State != ledger.Deferred || row.AckID != "" {
		t.Fatalf("row %s ack %q after forged events, want deferred without an ack", row.State, row.AckID)
	}
	e.Transport.Script = nil
	e.Clock.Advance(time.Minute)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
	if n := e.Transport.Recorded(in.Key()); n != 1 {
		t.Fatalf("provider recorded %d messages, want 1", n)
	}
}

// TestForgedBounceNeverReleasesHeldSMS: the email was accepted and the SMS is
// held for the provider's word. A forged permanent bounce must not claim the
// SMS; when the wait ends without a genuine one, the SMS is suppressed.
func TestForgedBounceNeverReleasesHeldSMS(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Events = true
	e.Cases.Policy.FallbackWait = 2 * time.Minute
	emailIn, smsIn := ledgertest.ClaimFallbackPair(t, e, 41)
	ledgertest.MustDispatch(t, e, emailIn.Key(), ledger.OutcomeAccepted)
	bounce := e.ProviderEvent(t, emailIn.Key(), ledger.Email, ledger.KindBounced, "Bounce", "Permanent/General", true)
	refuseAll(t, e, forgeries(t, e, bounce))
	if got := e.Get(t, smsIn.Key()); got.State != ledger.Held {
		t.Fatalf("sms %s after forged bounces, want held", got.State)
	}
	e.Clock.Advance(3 * time.Minute)
	if _, err := e.Cases.ExpireSweep(context.Background(), "expire/req-1", 10); err != nil {
		t.Fatal(err)
	}
	if got := e.Get(t, smsIn.Key()); got.State != ledger.Suppressed {
		t.Fatalf("sms %s after the wait, want suppressed", got.State)
	}
	if n := e.Transport.Recorded(smsIn.Key()); n != 0 {
		t.Fatalf("the SMS was sent %d times", n)
	}
}

// TestDispatchSignsEveryAttempt: a send through a transport that reports
// events carries the proof of its own attempt; one through a transport that
// does not carries none; and a proof that cannot be signed stops the attempt
// before the provider, as not sent.
func TestDispatchSignsEveryAttempt(t *testing.T) {
	t.Run("events transport", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		e.Transport.Events = true
		in, _, _ := e.Claim(t, 42, ledger.SMS, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
		attempt, proof, _ := e.Transport.Carried(in.Key())
		if err := e.Proofs.Verify(context.Background(), ledger.AttemptRef{Key: in.Key(), Channel: ledger.SMS, Attempt: 1}, proof); err != nil || attempt != 1 {
			t.Fatalf("attempt %d carried proof that does not verify: %v", attempt, err)
		}
	})
	t.Run("no events", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		in, _, _ := e.Claim(t, 43, ledger.Email, ledger.OutcomeClaimed)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
		if _, proof, _ := e.Transport.Carried(in.Key()); proof != "" {
			t.Fatalf("a send without events carried proof %q", proof)
		}
	})
	t.Run("signer fails", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		e.Transport.Events = true
		e.Cases.Proofs = failingProofs{}
		in, _, _ := e.Claim(t, 44, ledger.Email, ledger.OutcomeClaimed)
		row := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
		if e.Transport.Calls() != 0 || row.State != ledger.Deferred || !strings.HasPrefix(row.NotSentCode, ledger.ProofCode) {
			t.Fatalf("%d sends, row %s code %q", e.Transport.Calls(), row.State, row.NotSentCode)
		}
	})
}

// TestNoVerifierRefusesEveryEvent: a service without Proofs cannot tell a
// genuine event from a forged one, so it takes none.
// TestNoVerifierNoEventRecorder: the events use case cannot be built
// without its verifier (it would have to trust or refuse every event), and
// the refusal names the port.
func TestNoVerifierNoEventRecorder(t *testing.T) {
	e := ledgertest.NewScenario(t)
	p := e.Cases.Filled()
	p.Proofs = nil
	_, err := assemble.EventRecorder(p)
	var missing *ledger.MissingPortError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "Proofs") {
		t.Fatalf("evidence.New without Proofs: %v, want a MissingPortError naming Proofs", err)
	}
}

type failingProofs struct{}

func (failingProofs) Sign(context.Context, ledger.AttemptRef) (string, error) {
	return "", errors.New("kms: throttled")
}
func (failingProofs) Verify(context.Context, ledger.AttemptRef, string) error {
	return errors.New("kms: throttled")
}
