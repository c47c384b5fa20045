package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// windowedTransport honors an idempotency key for a day, answers its first
// call with no acknowledgement (the row becomes unknown) and every later one
// with an ack, and reports the deadline of each call's context.
type windowedTransport struct {
	calls    int
	deadline time.Time // the last call's context deadline, in real time
}

func (t *windowedTransport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{IdempotencyWindow: 24 * time.Hour}
}

func (t *windowedTransport) Send(ctx context.Context, _ ledger.Send) (ledger.Ack, error) {
	t.calls++
	t.deadline, _ = ctx.Deadline()
	if t.calls == 1 {
		return ledger.Ack{}, errors.New("connection reset")
	}
	return ledger.Ack{ID: "msg-1"}, nil
}

// TestRetryCallBoundedByItsLease: reconcile lets a same-key retry start only
// if the retry is over within its lease before the transport's idempotency
// window ends, so the retry's transport call is cut at the lease as well as
// at the send deadline (expiry minus the guard), whichever comes first: a
// transport whose own timeout is longer cannot carry the call past the
// window the rule assumed.
func TestRetryCallBoundedByItsLease(t *testing.T) {
	for _, tc := range []struct {
		name string
		// at is when reconcile runs, as time before the challenge expires.
		at time.Duration
		// lease is the bound the call must have: true for the lease, false
		// for the send deadline.
		lease bool
	}{
		{"the lease ends first", 8 * time.Minute, true},
		{"the send deadline comes first", 40 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			tr := &windowedTransport{}
			e.Cases.Transports[ledger.Email] = tr
			in, _, _ := e.Claim(t, 90, ledger.Email, ledger.OutcomeClaimed)
			ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
			e.Clock.Advance(in.ExpiresAt.Add(-tc.at).Sub(e.Clock.Now()))

			left := in.ExpiresAt.Add(-e.Cases.Policy.SendGuard).Sub(e.Clock.Now())
			if tc.lease {
				left = e.Cases.Policy.Lease
			}
			start := time.Now()
			ledgertest.MustReconcile(t, e)
			if tr.calls != 2 {
				t.Fatalf("%d transport calls, want the dispatch and one retry", tr.calls)
			}
			// The context ends after the time left on the worker's clock, in real time.
			if tr.deadline.IsZero() || tr.deadline.Before(start.Add(left)) || tr.deadline.After(time.Now().Add(left)) {
				t.Fatalf("the retry's call ends %s after it starts, want %s", tr.deadline.Sub(start).Round(time.Second), left)
			}
			if got := e.Get(t, in.Key()); got.State != ledger.Accepted {
				t.Fatalf("row %s (%q), want accepted by the retry", got.State, got.Reason)
			}
		})
	}
}
