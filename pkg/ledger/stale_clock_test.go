package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

// The write that starts an attempt is conditioned on the worker's clock at
// that write, not on a reading taken before the content was fetched (found
// by the simulator, sim/: the content read, decryption and budget booking
// between the two are network calls, and a send started past expires_at
// minus the margin by the sender's own clock).
func TestAttemptStartsOnTheClockOfItsWrite(t *testing.T) {
	ctx := context.Background()
	t.Run("dispatch", func(t *testing.T) {
		e := newEnv(t)
		in, _, _ := e.claim(t, 1, ledger.Email, ledger.ClaimCreated)
		slow := *e.Svc
		// The content read returns when the deadline has just passed.
		slow.Content = &hookContent{ContentStore: e.Content, beforeGet: func() {
			e.Clock.Advance(ttl - e.Svc.Policy.ExpiryMargin)
		}}
		res, err := slow.Dispatch(ctx, in.Key(), "dispatch/slow")
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != ledger.DispatchExpired || e.Transport.Calls() != 0 {
			t.Fatalf("outcome %s with %d sends; want expired and none", res.Outcome, e.Transport.Calls())
		}
		mustVerify(t, e.get(t, in.Key()))
	})
	t.Run("reconcile same-key retry", func(t *testing.T) {
		e := newEnv(t)
		e.Transport.Window = 24 * time.Hour
		in := e.stuckDispatching(t, 1, ledger.Email, ledgertest.FailBeforeReach)
		calls := e.Transport.Calls()
		// The lease has passed: the sweep marks the row unknown and retries
		// it under the same key; the retry's content read returns when the
		// deadline has just passed.
		e.Clock.Advance(e.Svc.Policy.Lease + time.Second)
		deadline := e.get(t, in.Key()).ExpiresAt.Add(-e.Svc.Policy.ExpiryMargin)
		slow := *e.Svc
		slow.Content = &hookContent{ContentStore: e.Content, beforeGet: func() {
			e.Clock.Advance(deadline.Sub(e.Clock.Now()))
		}}
		if _, err := slow.Reconcile(ctx, "reconcile/slow", 10); err != nil {
			t.Fatal(err)
		}
		if got := e.Transport.Calls(); got != calls {
			t.Fatalf("%d sends after the deadline passed during the content read; want none", got-calls)
		}
		mustVerify(t, e.get(t, in.Key()))
	})
}
