package ledger_test

import (
	"context"
	"testing"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

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
			e := newEnv(t)
			e.Svc.Policy.FallbackWait = 0 // no provider events: acceptance settles the fallback at once
			emailIn, emailSealed := fallbackIntent(20, ledger.Email, e.Clock.Now())
			smsIn, smsSealed := fallbackIntent(20, ledger.SMS, e.Clock.Now())
			if res, err := e.Svc.Claim(ctx, smsIn, smsSealed, "claim/sms"); err != nil || res.Outcome != ledger.ClaimHeld {
				t.Fatalf("sms: %s %v", res.Outcome, err)
			}
			if res, err := e.Svc.Claim(ctx, emailIn, emailSealed, "claim/email"); err != nil || res.Outcome != ledger.ClaimCreated {
				t.Fatalf("email: %s %v", res.Outcome, err)
			}
			e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
				if s.Channel == ledger.Email {
					return tt.email
				}
				return ledgertest.Accept
			}
			if _, err := e.Svc.Dispatch(ctx, emailIn.Key(), "dispatch/email"); err != nil {
				t.Fatal(err)
			}
			// The move out of held happened with the email's outcome; the
			// stream record of a now-claimed sms reaches dispatch.
			if _, err := e.Svc.Dispatch(ctx, smsIn.Key(), "dispatch/sms"); err != nil {
				t.Fatal(err)
			}
			sms := e.get(t, smsIn.Key())
			if sms.State != tt.wantSMS || e.Transport.Recorded(smsIn.Key()) != tt.wantSent {
				t.Fatalf("sms %s, sent %d", sms.State, e.Transport.Recorded(smsIn.Key()))
			}
			if sms.History[1].From != ledger.Held || sms.History[1].Worker != "dispatch/email" {
				t.Fatalf("settled by %q from %s", sms.History[1].Worker, sms.History[1].From)
			}
			if e.hasContent(t, smsIn.Key()) {
				t.Fatal("sealed content left after the sms ended")
			}
			mustVerify(t, sms)
		})
	}
}

func TestExpireSweepSettlesHeldRows(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// A held sms whose email never arrives expires with its challenge.
	lonely, lonelySealed := fallbackIntent(30, ledger.SMS, e.Clock.Now())
	lonely.ExpiresAt = e.Clock.Now().Add(ttl / 2) // first in the held listing
	if res, err := e.Svc.Claim(ctx, lonely, lonelySealed, "claim/sms"); err != nil || res.Outcome != ledger.ClaimHeld {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	// A held sms whose move the email's outcome missed (the settle read
	// raced, or the function died right after the outcome) is claimed by
	// the sweep.
	emailIn, emailSealed := fallbackIntent(31, ledger.Email, e.Clock.Now())
	smsIn, smsSealed := fallbackIntent(31, ledger.SMS, e.Clock.Now())
	if _, err := e.Svc.Claim(ctx, emailIn, emailSealed, "claim/email"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Svc.Claim(ctx, smsIn, smsSealed, "claim/sms"); err != nil || res.Outcome != ledger.ClaimHeld {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	missing := *e.Svc
	missing.Store = &staleGetStore{Store: e.Store, key: smsIn.Key()}
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Reject }
	if _, err := missing.Dispatch(ctx, emailIn.Key(), "dispatch/email"); err != nil {
		t.Fatal(err)
	}
	if st := e.get(t, smsIn.Key()).State; st != ledger.Held {
		t.Fatalf("sms should still be held, is %s", st)
	}

	// A limit of 1 must not let the waiting row hide the straggler.
	rep, err := e.Svc.ExpireSweep(ctx, "expire/req-1", 1)
	if err != nil || rep.Actions["held->claimed"] != 1 {
		t.Fatalf("sweep: %v %v", rep.Actions, err)
	}
	if st := e.get(t, lonely.Key()).State; st != ledger.Held {
		t.Fatalf("lonely sms settled early: %s", st)
	}
	e.Clock.Advance(ttl)
	rep, err = e.Svc.ExpireSweep(ctx, "expire/req-2", 100)
	if err != nil || rep.Actions["held->expired"] != 1 || e.hasContent(t, lonely.Key()) {
		t.Fatalf("sweep after expiry: %v %v", rep.Actions, err)
	}
	if e.Transport.Recorded(lonely.Key()) != 0 {
		t.Fatal("an expired held sms was sent")
	}
}

// staleGetStore answers reads of one key with ErrNotFound, as a read that
// raced the key's creation would.
type staleGetStore struct {
	ledger.Store
	key string
}

func (s *staleGetStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	if key == s.key {
		return ledger.Entry{}, ledger.ErrNotFound
	}
	return s.Store.Get(ctx, key)
}
