package expire_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// sweepCase is a row seeded before an expire sweep and what the sweep at
// start+5m must leave it as.
type sweepCase struct {
	name    string
	in      ledger.Intent
	want    ledger.State
	content bool
}

// seedSweepRows claims one row per case, each with its own lifetime from the
// env's start, and brings it to the state the case names.
func seedSweepRows(t *testing.T, e *ledgertest.Scenario) []sweepCase {
	ctx := context.Background()
	start := e.Clock.Now()
	claimAt := func(i int, ch ledger.Channel, life time.Duration) ledger.Intent {
		in, sealed := ledgertest.Intent(i, ch, start, life)
		if r, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1"); err != nil || r.Outcome != ledger.OutcomeClaimed {
			t.Fatalf("claim %d: %s %v", i, r.Outcome, err)
		}
		return in
	}
	expiredClaimed := claimAt(70, ledger.Email, time.Minute)
	inMargin := claimAt(71, ledger.SMS, 5*time.Minute+20*time.Second)
	live := claimAt(72, ledger.Email, 30*time.Minute)
	accepted := claimAt(73, ledger.Email, 2*time.Minute)
	ledgertest.MustDispatch(t, e, accepted.Key(), ledger.OutcomeAccepted)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	unknown := claimAt(74, ledger.Email, 2*time.Minute)
	ledgertest.MustDispatch(t, e, unknown.Key(), ledger.OutcomeUnknown)
	quarantined := claimAt(75, ledger.Email, 2*time.Minute)
	_ = e.Content.Delete(ctx, e.ContentKey(quarantined.Key()))
	ledgertest.MustDispatch(t, e, quarantined.Key(), ledger.OutcomeQuarantined)
	e.Transport.Script = nil
	dispatching := e.StuckDispatching(t, 76, ledger.Email, ledgertest.Accept)
	return []sweepCase{
		{"claimed past expiry", expiredClaimed, ledger.Expired, false},
		{"claimed inside the margin", inMargin, ledger.Expired, false},
		{"claimed and live", live, ledger.Claimed, true},
		{"accepted", accepted, ledger.Accepted, false},
		{"unknown past expiry", unknown, ledger.Unknown, true},
		{"quarantined", quarantined, ledger.Quarantined, false},
		{"dispatching past expiry", dispatching, ledger.Dispatching, true},
	}
}

func TestExpireSweep(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	// Rows and what the sweep at start+5m must do with them.
	tests := seedSweepRows(t, e)

	before := map[string]ledger.Entry{}
	for _, tt := range tests {
		before[tt.in.Key()] = e.Get(t, tt.in.Key())
	}
	calls := e.Transport.Calls()
	e.Clock.Advance(5 * time.Minute)
	rep, err := e.Cases.ExpireSweep(ctx, "expire/req-1", 100)
	if err != nil || rep.Err() != nil {
		t.Fatalf("sweep: %v %v", err, rep.Err())
	}
	if rep.Actions["claimed->expired"] != 2 || len(rep.Actions) != 1 {
		t.Fatalf("actions %v", rep.Actions)
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSweptRow(t, e, tt, before[tt.in.Key()])
		})
	}
	if e.Transport.Calls() != calls {
		t.Fatal("expire sweep sent")
	}
	// A second sweep finds nothing more to do.
	rep, err = e.Cases.ExpireSweep(ctx, "expire/req-2", 100)
	if err != nil || rep.Actions["claimed->expired"] != 0 {
		t.Fatalf("second sweep: %+v %v", rep, err)
	}
}

// checkSweptRow checks one row after the sweep against its case: expired
// rows lost their content and carry the sweep's event, every other row was
// not written (b is the row before the sweep).
func checkSweptRow(t *testing.T, e *ledgertest.Scenario, tt sweepCase, b ledger.Entry) {
	t.Helper()
	got := e.Get(t, tt.in.Key())
	if got.State != tt.want {
		t.Fatalf("state %s, want %s", got.State, tt.want)
	}
	if e.HasContent(t, tt.in.Key()) != tt.content {
		t.Fatalf("content kept = %v, want %v", !tt.content, tt.content)
	}
	if tt.want != ledger.Expired {
		if got.Version != b.Version {
			t.Fatalf("untouched row was written: v%d -> v%d", b.Version, got.Version)
		}
		return
	}
	last := got.Last()
	if got.Version != b.Version+1 || last.From != ledger.Claimed || last.To != ledger.Expired ||
		last.Worker != "expire/req-1" || got.Reason == "" || last.Reason != got.Reason {
		t.Fatalf("expire event %+v", last)
	}
	ledgertest.CheckHistory(t, got)
}

func TestExpireSweepSettlesHeldRows(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	// A held sms whose email never arrives expires with its challenge.
	lonely, lonelySealed := ledgertest.FallbackIntent(30, ledger.SMS, e.Clock.Now())
	lonely.ExpiresAt = e.Clock.Now().Add(ledgertest.ScenarioTTL / 2) // first in the held listing
	if res, err := e.Cases.Claim(ctx, lonely, lonelySealed, "claim/sms"); err != nil || res.Outcome != ledger.OutcomeHeld {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	// A held sms whose move the email's outcome missed (the settle read
	// raced, or the function died right after the outcome) is claimed by
	// the sweep.
	emailIn, emailSealed := ledgertest.FallbackIntent(31, ledger.Email, e.Clock.Now())
	smsIn, smsSealed := ledgertest.FallbackIntent(31, ledger.SMS, e.Clock.Now())
	if _, err := e.Cases.Claim(ctx, emailIn, emailSealed, "claim/email"); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Cases.Claim(ctx, smsIn, smsSealed, "claim/sms"); err != nil || res.Outcome != ledger.OutcomeHeld {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	missing := *e.Cases
	missing.Store = &staleGetStore{Store: e.Store, key: smsIn.Key()}
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Reject }
	if _, err := missing.Dispatch(ctx, emailIn.Key(), "dispatch/email"); err != nil {
		t.Fatal(err)
	}
	if st := e.Get(t, smsIn.Key()).State; st != ledger.Held {
		t.Fatalf("sms should still be held, is %s", st)
	}

	// A limit of 1 must not let the waiting row hide the straggler.
	rep, err := e.Cases.ExpireSweep(ctx, "expire/req-1", 1)
	if err != nil || rep.Actions["held->claimed"] != 1 {
		t.Fatalf("sweep: %v %v", rep.Actions, err)
	}
	if st := e.Get(t, lonely.Key()).State; st != ledger.Held {
		t.Fatalf("lonely sms settled early: %s", st)
	}
	e.Clock.Advance(ledgertest.ScenarioTTL)
	rep, err = e.Cases.ExpireSweep(ctx, "expire/req-2", 100)
	if err != nil || rep.Actions["held->expired"] != 1 || e.HasContent(t, lonely.Key()) {
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

func TestExpireSweepClosesDeferredRowsThatRanOutOfTime(t *testing.T) {
	ctx := context.Background()
	e, _ := ledgertest.PacedScenario(t)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	in, _, _ := e.Claim(t, 50, ledger.SMS, ledger.OutcomeClaimed)
	res, err := e.Cases.Dispatch(ctx, in.Key(), "d")
	if err != nil || res.Outcome != ledger.OutcomeDeferred {
		t.Fatalf("%s, %v", res.Outcome, err)
	}
	// Its wake-up and every re-drive are lost; the challenge runs out.
	e.Clock.Advance(ledgertest.ScenarioTTL)
	rep, err := e.Cases.ExpireSweep(ctx, "expire/req-1", 100)
	if err != nil || rep.Actions["deferred->expired"] != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	row := e.Get(t, in.Key())
	if row.State != ledger.Expired || row.Reason != ledger.NotSentReason(ledgertest.ThrottleCode) || e.HasContent(t, in.Key()) {
		t.Fatalf("row %s %q (content kept: %v)", row.State, row.Reason, e.HasContent(t, in.Key()))
	}
}
