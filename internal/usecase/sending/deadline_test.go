package sending_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/sending"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// stallingTransport reports the deadline of each call and, if stall is set,
// holds the call until its context ends, as a provider that never answers.
type stallingTransport struct {
	stall    bool
	calls    int
	deadline time.Time // the context's, in real time
	send     ledger.Send
}

func (t *stallingTransport) Capabilities() ledger.Capabilities { return ledger.Capabilities{} }

func (t *stallingTransport) Send(ctx context.Context, s ledger.Send) (ledger.Ack, error) {
	t.calls++
	t.send = s
	t.deadline, _ = ctx.Deadline()
	if !t.stall {
		return ledger.Ack{ID: "msg-1"}, nil
	}
	select {
	case <-ctx.Done():
		return ledger.Ack{}, ctx.Err()
	case <-time.After(10 * time.Second):
		return ledger.Ack{}, errors.New("the send deadline did not cut the call")
	}
}

// TestSendDeadline: every transport call runs under a context deadline of
// the challenge's expiry minus SendGuard by the worker's clock, and is cut
// there; an attempt with no time left is not made.
func TestSendDeadline(t *testing.T) {
	t.Run("every call has the deadline", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		tr := &stallingTransport{}
		e.Cases.Transports[ledger.Email] = tr
		in, _, _ := e.Claim(t, 50, ledger.Email, ledger.OutcomeClaimed)
		start := time.Now()
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
		want := in.ExpiresAt.Add(-e.Cases.Policy.SendGuard)
		if !tr.send.Deadline.Equal(want) {
			t.Fatalf("Send.Deadline %s, want expiry minus the guard %s", tr.send.Deadline, want)
		}
		// The context ends after the time left on the worker's clock, in real time.
		left := want.Sub(e.Clock.Now())
		if tr.deadline.IsZero() || tr.deadline.Before(start.Add(left)) || tr.deadline.After(time.Now().Add(left)) {
			t.Fatalf("context deadline %s, want %s from the call", tr.deadline.Sub(start), left)
		}
	})
	t.Run("a stalled call is cut and recorded unknown", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		tr := &stallingTransport{stall: true}
		e.Cases.Transports[ledger.Email] = tr
		in, _, _ := e.Claim(t, 51, ledger.Email, ledger.OutcomeClaimed)
		// 100 ms left before the deadline when dispatch begins.
		e.Cases.Policy.SendGuard = in.ExpiresAt.Sub(e.Clock.Now()) - 100*time.Millisecond
		e.Cases.Policy.ExpiryMargin = e.Cases.Policy.SendGuard + time.Millisecond
		start := time.Now()
		row := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("the stalled call ran %s", el)
		}
		if row.State != ledger.Unknown || tr.calls != 1 {
			t.Fatalf("row %s after %d calls, want unknown after one", row.State, tr.calls)
		}
	})
	t.Run("no time left: not sent", func(t *testing.T) {
		// A valid policy's margin exceeds its guard, so dispatch's expiry
		// check stops a send before its deadline passes; only a clock read
		// between that check and the call reaches this defence, the
		// Sender's own. It is called here directly, its clock past the
		// deadline.
		e := ledgertest.NewScenario(t)
		core, err := ledger.NewCore("dispatch", e.Cases.Store, e.Cases.Content, e.Cases.Clock, e.Cases.Policy, ledger.Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		tr := &stallingTransport{}
		snd, err := sending.New("dispatch", sending.Ports{Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr}},
			func(ledger.Capabilities) bool { return false })
		if err != nil {
			t.Fatal(err)
		}
		snd = snd.For(&core)
		row := ledger.Entry{Key: "k", Attempts: 1, ExpiresAt: e.Clock.Now().Add(e.Cases.Policy.SendGuard / 2)}
		_, err = snd.Attempt(context.Background(), row, tr, ledger.Message{})
		var ns *ledger.NotSent
		if !errors.As(err, &ns) || ns.Code != ledger.DeadlineCode || tr.calls != 0 {
			t.Fatalf("%d calls, error %v; want no call, not sent for the deadline", tr.calls, err)
		}
	})
}
