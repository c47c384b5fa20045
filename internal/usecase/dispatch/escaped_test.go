package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Two protocol slips that neither the simulator nor a unit test caught
// (issue 23); each test here fails on its slip.

// TestRetryLateInWindowThenQuarantine: a same-key retry made late in the
// transport's idempotency window is the last one. The window is measured
// from the first attempt, so the next look must quarantine even though the
// latest attempt is recent: measured from it, another retry would reach the
// provider after it forgot the key, and the provider would take the message
// a second time.
func TestRetryLateInWindowThenQuarantine(t *testing.T) {
	e := ledgertest.NewScenario(t)
	const window = 6 * time.Minute
	e.Transport.Window = window
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	p := &e.Cases.Policy
	p.MaxAttempts = 10 // the window decides here, not the attempt budget
	p.Lease, p.ExpiryMargin, p.RecheckAfter = 2*time.Minute, 30*time.Second, time.Minute
	start := e.Clock.Now()
	in, _, _ := e.Claim(t, 80, ledger.Email, ledger.OutcomeClaimed)
	key := in.Key()

	ledgertest.MustDispatch(t, e, key, ledger.OutcomeUnknown)
	// Attempt 2 early in the window, attempt 3 at the last moment a retry
	// can still finish inside it: 3 min + lease + margin < 6 min.
	for i, at := range []time.Duration{time.Minute, 3 * time.Minute} {
		e.Clock.Advance(start.Add(at).Sub(e.Clock.Now()))
		ledgertest.MustReconcile(t, e)
		if got := e.Get(t, key); got.State != ledger.Unknown || got.Attempts != i+2 {
			t.Fatalf("retry at +%s: %s after %d attempts, want unknown after %d", at, got.State, got.Attempts, i+2)
		}
	}
	calls := e.Transport.Calls()

	// The next look, one minute after the late retry: 4 min + lease + margin
	// is past the window from the first attempt (though not from the last).
	e.Clock.Advance(time.Minute)
	ledgertest.MustReconcile(t, e)
	got := e.Get(t, key)
	if got.State != ledger.Quarantined || e.Transport.Calls() != calls {
		t.Fatalf("next look after a late retry: %s with %d more sends (attempts %d); want quarantined and no send",
			got.State, e.Transport.Calls()-calls, got.Attempts)
	}
	if !got.FirstAttemptAt.Equal(start.Truncate(ledger.Precision)) {
		t.Fatalf("first attempt at %s, want %s: the window's start moved", got.FirstAttemptAt, start)
	}
}

// slowBeginStore is a store whose answer to the write that starts an
// attempt (the move to dispatching) comes back after a delay: the write
// lands at once, the clock moves on before the caller hears of it.
type slowBeginStore struct {
	ledger.Store
	clock *ledgertest.Clock
	delay time.Duration
}

func (s *slowBeginStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if c.Next.State == ledger.Dispatching && c.From != ledger.Dispatching {
		s.clock.Advance(s.delay)
	}
	return got, err
}

// TestBeginAnsweredAfterDeadline: the move to dispatching is conditioned
// on the clock when it is written, but its answer can come back after the
// challenge's expiry minus the margin. Dispatch must judge the expiry again
// with the clock as it reads then, and send nothing.
func TestBeginAnsweredAfterDeadline(t *testing.T) {
	e := ledgertest.NewScenario(t)
	in, _, _ := e.Claim(t, 81, ledger.Email, ledger.OutcomeClaimed)
	margin := e.Cases.Policy.ExpiryMargin
	// One second before expires_at − margin: the write's condition holds.
	e.Clock.Advance(in.ExpiresAt.Add(-margin - time.Second).Sub(e.Clock.Now()))
	e.Cases.Store = &slowBeginStore{Store: e.Store, clock: e.Clock, delay: 2 * time.Second}

	row := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeExpired)
	if e.Transport.Calls() != 0 {
		t.Fatalf("%d sends after the begin write answered past expires_at − margin, want none", e.Transport.Calls())
	}
	if row.State != ledger.Expired || row.Attempts != 1 {
		t.Fatalf("row %s after %d attempts, want expired after the one attempt it began", row.State, row.Attempts)
	}
	ledgertest.CheckHistory(t, row)
}

// slowRetryStore is slowBeginStore for reconcile's record of a same-key
// retry (the write that starts the retry's attempt).
type slowRetryStore struct {
	ledger.Store
	clock *ledgertest.Clock
	delay time.Duration
}

func (s *slowRetryStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if c.Event.Kind == ledger.KindRetry && c.Next.Attempts > c.Next.History[len(c.Next.History)-2].Attempt {
		s.clock.Advance(s.delay)
	}
	return got, err
}

// TestRetryAnsweredAfterDeadline: the same slip on reconcile's side (found
// by the simulator's late-call invariant, seed 91 with slow retry writes):
// the record of a same-key retry is conditioned on the clock when it is
// written, but its answer can come back inside the margin. The retry must
// not be sent then; the row is quarantined, its outcome still unknown.
func TestRetryAnsweredAfterDeadline(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Window = 24 * time.Hour
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	in, _, _ := e.Claim(t, 82, ledger.Email, ledger.OutcomeClaimed)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
	calls := e.Transport.Calls()
	margin := e.Cases.Policy.ExpiryMargin
	// One second before expires_at − margin: the retry's record may land.
	e.Clock.Advance(in.ExpiresAt.Add(-margin - time.Second).Sub(e.Clock.Now()))
	e.Cases.Store = &slowRetryStore{Store: e.Store, clock: e.Clock, delay: 2 * time.Second}

	ledgertest.MustReconcile(t, e)
	got := e.Get(t, in.Key())
	if e.Transport.Calls() != calls || got.State != ledger.Quarantined {
		t.Fatalf("retry whose record answered past expires_at − margin: %d sends, row %s (%q); want no send, quarantined",
			e.Transport.Calls()-calls, got.State, got.Reason)
	}
	ledgertest.CheckHistory(t, got)
}
