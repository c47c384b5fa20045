package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// fallbackGateCase brings the email row of challenge 10 into a state and
// says what the sms claim that follows must get.
type fallbackGateCase struct {
	name string
	// email brings the email row of challenge 10 into a state; nil
	// means no email intent arrived yet.
	email     func(t *testing.T, e *ledgertest.Scenario, key string)
	wantEmail ledger.State
	wantSMS   ledger.Outcome
}

// fallbackGateCases covers every state the earlier channel can be in when
// the later one is claimed.
func fallbackGateCases() []fallbackGateCase {
	ctx := context.Background()
	return []fallbackGateCase{
		{"email not claimed yet", nil, ledger.None, ledger.OutcomeHeld},
		{"email claimed", func(*testing.T, *ledgertest.Scenario, string) {}, ledger.Claimed, ledger.OutcomeHeld},
		{"email dispatching", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.FailBeforeReach }
			crashing := *e.Cases
			crashing.Store = &ledgertest.CrashStore{Store: e.Store}
			_, _ = crashing.Dispatch(ctx, key, "dispatch/crash")
		}, ledger.Dispatching, ledger.OutcomeHeld},
		{"email unknown", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeUnknown)
		}, ledger.Unknown, ledger.OutcomeHeld},
		{"email quarantined", func(t *testing.T, e *ledgertest.Scenario, key string) {
			_ = e.Content.Delete(ctx, e.ContentKey(key))
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeQuarantined)
		}, ledger.Quarantined, ledger.OutcomeHeld},
		{"email rejected", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Reject }
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeRejected)
		}, ledger.Rejected, ledger.OutcomeClaimed},
		{"email quarantined then resolved rejected", func(t *testing.T, e *ledgertest.Scenario, key string) {
			_ = e.Content.Delete(ctx, e.ContentKey(key))
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeQuarantined)
			if _, err := e.Cases.Resolve(ctx, key, ledger.DecideRejected, "provider console shows bounce", "bounce-123", "operator:alice"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Rejected, ledger.OutcomeClaimed},
		{"email accepted", func(t *testing.T, e *ledgertest.Scenario, key string) {
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeAccepted)
		}, ledger.Accepted, ledger.OutcomeSuppressed},
		{"email abandoned", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeUnknown)
			if _, err := e.Cases.Resolve(ctx, key, ledger.DecideAbandoned, "cannot tell", "", "operator:alice"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Abandoned, ledger.OutcomeSuppressed},
		{"email expired before dispatch", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Clock.Advance(ledgertest.ScenarioTTL - time.Minute) // inside the margin for email, but sms gets a fresh expiry below
			ledgertest.MustDispatch(t, e, key, ledger.OutcomeExpired)
		}, ledger.Expired, ledger.OutcomeSuppressed},
	}
}

func TestFallbackGate(t *testing.T) {
	ctx := context.Background()
	for _, tt := range fallbackGateCases() {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Cases.Policy.ExpiryMargin = 2 * time.Minute
			e.Cases.Policy.FallbackWait = 0 // no provider events: acceptance settles the fallback at once
			if tt.email != nil {
				bringEmailTo(t, e, tt)
			}
			e.Transport.Script = nil
			calls := e.Transport.Calls()

			smsIn, smsSealed := ledgertest.FallbackIntent(10, ledger.SMS, e.Clock.Now())
			res, err := e.Cases.Claim(ctx, smsIn, smsSealed, "claim/sms")
			if tt.wantSMS == ledger.OutcomeHeld {
				checkSMSHeld(t, e, smsIn.Key(), res, err, calls)
				return
			}
			if err != nil || res.Outcome != tt.wantSMS {
				t.Fatalf("sms claim: %s %v, want %s", res.Outcome, err, tt.wantSMS)
			}
			checkSMSPastGate(t, e, smsIn.Key(), tt.wantSMS, calls)
		})
	}
}

// bringEmailTo claims the email row of challenge 10 and brings it into the
// state tt names.
func bringEmailTo(t *testing.T, e *ledgertest.Scenario, tt fallbackGateCase) {
	t.Helper()
	emailIn, emailSealed := ledgertest.FallbackIntent(10, ledger.Email, e.Clock.Now())
	res, err := e.Cases.Claim(context.Background(), emailIn, emailSealed, "claim/email")
	if err != nil || res.Outcome != ledger.OutcomeClaimed {
		t.Fatalf("email claim: %s %v", res.Outcome, err)
	}
	tt.email(t, e, emailIn.Key())
	if got := e.Get(t, emailIn.Key()).State; got != tt.wantEmail {
		t.Fatalf("email is %s, want %s", got, tt.wantEmail)
	}
}

// checkSMSHeld checks that the sms claim was held: the row keeps its sealed
// content for later, and a dispatch of it sends nothing (calls is the
// transport's count before the claim).
func checkSMSHeld(t *testing.T, e *ledgertest.Scenario, key string, res claim.Result, err error, calls int) {
	t.Helper()
	if err != nil || res.Outcome != ledger.OutcomeHeld {
		t.Fatalf("want the sms held, got %s %v", res.Outcome, err)
	}
	if got := e.Get(t, key); got.State != ledger.Held || got.Reason == "" {
		t.Fatalf("held sms row: %s %q", got.State, got.Reason)
	}
	if !e.HasContent(t, key) {
		t.Fatal("held sms must keep its sealed content for later")
	}
	if d := ledgertest.MustDispatch(t, e, key, ledger.OutcomeSkipped); d.State != ledger.Held || e.Transport.Calls() != calls {
		t.Fatal("held sms sent")
	}
}

// checkSMSPastGate dispatches the sms row the gate let through (claimed) or
// closed (suppressed) and checks it was sent once or not at all.
func checkSMSPastGate(t *testing.T, e *ledgertest.Scenario, key string, wantSMS ledger.Outcome, calls int) {
	t.Helper()
	d, err := e.Cases.Dispatch(context.Background(), key, "dispatch/sms")
	if err != nil {
		t.Fatal(err)
	}
	sms := e.Get(t, key)
	ledgertest.MustVerify(t, sms)
	switch wantSMS {
	case ledger.OutcomeClaimed:
		if d.Outcome != ledger.OutcomeAccepted || sms.State != ledger.Accepted || e.Transport.Recorded(key) != 1 {
			t.Fatalf("sms %s/%s recorded %d", d.Outcome, sms.State, e.Transport.Recorded(key))
		}
	case ledger.OutcomeSuppressed:
		if d.Outcome != ledger.OutcomeSkipped || sms.State != ledger.Suppressed || sms.Reason == "" {
			t.Fatalf("sms %s/%s reason %q", d.Outcome, sms.State, sms.Reason)
		}
		if e.Transport.Calls() != calls || e.HasContent(t, key) {
			t.Fatalf("suppressed sms sent %d or stored content", e.Transport.Calls()-calls)
		}
	}
}

// settleStragglers does what the functions do after a race: the expire
// sweep settles a held row whose predecessor ended before it was written,
// and the stream record of a row that became claimed reaches dispatch.
func settleStragglers(t *testing.T, e *ledgertest.Scenario, key string) {
	t.Helper()
	if _, err := e.Cases.ExpireSweep(context.Background(), "expire/req-1", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cases.Dispatch(context.Background(), key, "dispatch/stream"); err != nil {
		t.Fatal(err)
	}
}

// Two consumers of each intent race over one fallback challenge, each
// claiming and dispatching as the functions would (a waiting fallback is
// recorded held until the email ends). Email is accepted, so exactly one
// message may reach the provider, whatever the interleaving.
func TestFallbackRace(t *testing.T) {
	ctx := context.Background()
	for round := range 50 {
		e := ledgertest.NewScenario(t)
		e.Cases.Policy.FallbackWait = 0 // no provider events: acceptance settles the fallback at once
		emailIn, emailSealed := ledgertest.FallbackIntent(round, ledger.Email, e.Clock.Now())
		smsIn, smsSealed := ledgertest.FallbackIntent(round, ledger.SMS, e.Clock.Now())
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		consume := func(in ledger.Intent, sealed []byte, w ledger.Worker) {
			defer wg.Done()
			res, err := e.Cases.Claim(ctx, in, sealed, w)
			if err != nil {
				errs <- fmt.Errorf("%s claim: %w", w, err)
				return
			}
			if _, err := e.Cases.Dispatch(ctx, res.Entry.Key, w); err != nil {
				errs <- fmt.Errorf("%s dispatch: %w", w, err)
			}
		}
		for k := range 2 {
			wg.Add(2)
			go consume(smsIn, smsSealed, ledger.Worker(fmt.Sprint("sms/", k)))
			go consume(emailIn, emailSealed, ledger.Worker(fmt.Sprint("email/", k)))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
		settleStragglers(t, e, smsIn.Key())
		email, sms := e.Get(t, emailIn.Key()), e.Get(t, smsIn.Key())
		total := e.Transport.Recorded(emailIn.Key()) + e.Transport.Recorded(smsIn.Key())
		if total != 1 || e.Transport.Calls() != 1 || email.State != ledger.Accepted || sms.State != ledger.Suppressed {
			t.Fatalf("round %d: recorded %d (calls %d), email %s, sms %s", round, total, e.Transport.Calls(), email.State, sms.State)
		}
		if e.Content.Len() != 0 {
			t.Fatalf("round %d: %d blobs left", round, e.Content.Len())
		}
	}
}

// The same race when the provider rejects email: exactly one sms is sent.
func TestFallbackRaceRejected(t *testing.T) {
	ctx := context.Background()
	for round := range 50 {
		e := ledgertest.NewScenario(t)
		e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
			if s.Channel == ledger.Email {
				return ledgertest.Reject
			}
			return ledgertest.Accept
		}
		emailIn, emailSealed := ledgertest.FallbackIntent(round, ledger.Email, e.Clock.Now())
		smsIn, smsSealed := ledgertest.FallbackIntent(round, ledger.SMS, e.Clock.Now())
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				res, err := e.Cases.Claim(ctx, emailIn, emailSealed, "email")
				if err == nil {
					_, err = e.Cases.Dispatch(ctx, res.Entry.Key, "email")
				}
				if err != nil {
					t.Error(err)
				}
			}()
			go func() {
				defer wg.Done()
				res, err := e.Cases.Claim(ctx, smsIn, smsSealed, "sms")
				if err == nil {
					_, err = e.Cases.Dispatch(ctx, res.Entry.Key, ledger.Worker(fmt.Sprint("sms/", k)))
				}
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		settleStragglers(t, e, smsIn.Key())
		email, sms := e.Get(t, emailIn.Key()), e.Get(t, smsIn.Key())
		if email.State != ledger.Rejected || sms.State != ledger.Accepted ||
			e.Transport.Recorded(emailIn.Key()) != 0 || e.Transport.Recorded(smsIn.Key()) != 1 || e.Transport.Calls() != 2 {
			t.Fatalf("round %d: email %s sms %s, recorded %d+%d, calls %d", round, email.State, sms.State,
				e.Transport.Recorded(emailIn.Key()), e.Transport.Recorded(smsIn.Key()), e.Transport.Calls())
		}
	}
}

func TestDualWorkflowIndependentClaims(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		emailFirst bool
		email      ledgertest.Behavior
		wantEmail  ledger.State
	}{
		{"email accepted, email first", true, ledgertest.Accept, ledger.Accepted},
		{"email accepted, sms first", false, ledgertest.Accept, ledger.Accepted},
		{"email rejected", true, ledgertest.Reject, ledger.Rejected},
		{"email unknown", true, ledgertest.AcceptThenDrop, ledger.Unknown},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
				if s.Channel == ledger.Email {
					return tt.email
				}
				return ledgertest.Accept
			}
			var keys []string
			chans := []ledger.Channel{ledger.Email, ledger.SMS}
			if !tt.emailFirst {
				chans = []ledger.Channel{ledger.SMS, ledger.Email}
			}
			for _, ch := range chans {
				in, sealed := ledgertest.Intent(20, ch, e.Clock.Now(), ledgertest.ScenarioTTL)
				in.Workflow = ledger.Workflow{Kind: ledger.Dual, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
				res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
				if err != nil || res.Outcome != ledger.OutcomeClaimed {
					t.Fatalf("%s claim: %s %v", ch, res.Outcome, err)
				}
				keys = append(keys, in.Key())
			}
			for _, k := range keys {
				if _, err := e.Cases.Dispatch(ctx, k, "dispatch/req-1"); err != nil {
					t.Fatal(err)
				}
			}
			email := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-000020", Channel: ledger.Email}.Key()
			sms := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-000020", Channel: ledger.SMS}.Key()
			if got := e.Get(t, email).State; got != tt.wantEmail {
				t.Fatalf("email %s, want %s", got, tt.wantEmail)
			}
			if got := e.Get(t, sms).State; got != ledger.Accepted {
				t.Fatalf("sms %s, want accepted", got)
			}
			if e.Transport.Recorded(sms) != 1 || e.Transport.Calls() != 2 {
				t.Fatalf("sms recorded %d, calls %d", e.Transport.Recorded(sms), e.Transport.Calls())
			}
		})
	}
}

// A held fallback channel moves on when the earlier channel ends, without
// waiting for a redelivery: claimed (and then sent) after a rejection,
// suppressed (content purged) otherwise, expired if its challenge ran out.
func TestHeldFallbackIsSettledWhenTheEarlierChannelEnds(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		email    ledgertest.Behavior
		wantSMS  ledger.State
		wantSent int
	}{
		{"email rejected: sms claimed and sent", ledgertest.Reject, ledger.Accepted, 1},
		{"email accepted: sms suppressed", ledgertest.Accept, ledger.Suppressed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Cases.Policy.FallbackWait = 0 // no provider events: acceptance settles the fallback at once
			emailIn, emailSealed := ledgertest.FallbackIntent(20, ledger.Email, e.Clock.Now())
			smsIn, smsSealed := ledgertest.FallbackIntent(20, ledger.SMS, e.Clock.Now())
			if res, err := e.Cases.Claim(ctx, smsIn, smsSealed, "claim/sms"); err != nil || res.Outcome != ledger.OutcomeHeld {
				t.Fatalf("sms: %s %v", res.Outcome, err)
			}
			if res, err := e.Cases.Claim(ctx, emailIn, emailSealed, "claim/email"); err != nil || res.Outcome != ledger.OutcomeClaimed {
				t.Fatalf("email: %s %v", res.Outcome, err)
			}
			e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
				if s.Channel == ledger.Email {
					return tt.email
				}
				return ledgertest.Accept
			}
			if _, err := e.Cases.Dispatch(ctx, emailIn.Key(), "dispatch/email"); err != nil {
				t.Fatal(err)
			}
			// The move out of held happened with the email's outcome; the
			// stream record of a now-claimed sms reaches dispatch.
			if _, err := e.Cases.Dispatch(ctx, smsIn.Key(), "dispatch/sms"); err != nil {
				t.Fatal(err)
			}
			sms := e.Get(t, smsIn.Key())
			if sms.State != tt.wantSMS || e.Transport.Recorded(smsIn.Key()) != tt.wantSent {
				t.Fatalf("sms %s, sent %d", sms.State, e.Transport.Recorded(smsIn.Key()))
			}
			if sms.History[1].From != ledger.Held || sms.History[1].Worker != "dispatch/email" {
				t.Fatalf("settled by %q from %s", sms.History[1].Worker, sms.History[1].From)
			}
			if e.HasContent(t, smsIn.Key()) {
				t.Fatal("sealed content left after the sms ended")
			}
			ledgertest.MustVerify(t, sms)
		})
	}
}

// In a fallback workflow the held SMS waits, after the email was accepted,
// for what the provider reports: a permanent bounce releases it (and it is
// sent, with the bounce as the reason); a delivery suppresses it; a
// transient bounce leaves it held until the wait ends, and then suppressed.
func TestFallbackOnHardBounce(t *testing.T) {
	tests := []struct {
		name      string
		kind      ledger.EventKind
		typ, det  string
		permanent bool
		wantSMS   ledger.State
		sweep     bool // the expire sweep runs after the wait
	}{
		{"permanent bounce", ledger.KindBounced, "Bounce", "Permanent/General", true, ledger.Accepted, false},
		{"reject after acceptance", ledger.KindProviderRejected, "Reject", "Bad content", true, ledger.Accepted, false},
		{"delivered", ledger.KindDelivered, "Delivery", "", false, ledger.Suppressed, false},
		{"transient bounce, then the wait ends", ledger.KindBounced, "Bounce", "Transient/MailboxFull", false, ledger.Suppressed, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Events = true
			e.Cases.Policy.FallbackWait = 2 * time.Minute
			emailIn, smsIn := ledgertest.ClaimFallbackPair(t, e, 30)
			ledgertest.MustDispatch(t, e, emailIn.Key(), ledger.OutcomeAccepted)
			if got := e.Get(t, smsIn.Key()); got.State != ledger.Held {
				t.Fatalf("sms %s right after the email was accepted, want held for the wait", got.State)
			}
			e.Clock.Advance(30 * time.Second)
			e.Record(t, e.ProviderEvent(t, emailIn.Key(), ledger.Email, tt.kind, tt.typ, tt.det, tt.permanent), ledger.OutcomeRecorded)
			if tt.sweep {
				if got := e.Get(t, smsIn.Key()); got.State != ledger.Held {
					t.Fatalf("sms %s after a transient bounce, want held", got.State)
				}
				e.Clock.Advance(2 * time.Minute)
				if _, err := e.Cases.ExpireSweep(context.Background(), "expire/req-1", 10); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Cases.Dispatch(context.Background(), smsIn.Key(), "dispatch/stream"); err != nil {
				t.Fatal(err)
			}
			sms := e.Get(t, smsIn.Key())
			sent := e.Transport.Recorded(smsIn.Key())
			if sms.State != tt.wantSMS || sent != map[bool]int{true: 1}[tt.wantSMS == ledger.Accepted] {
				t.Fatalf("sms %s, sent %d; want %s", sms.State, sent, tt.wantSMS)
			}
			if tt.permanent && !strings.Contains(sms.History[1].Reason, "permanent delivery failure: "+tt.typ) {
				t.Fatalf("released with reason %q", sms.History[1].Reason)
			}
			ledgertest.MustVerify(t, sms)
		})
	}
}
