package gate

import (
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// TestGateNewestReclaimsCounts: a player asks twice while a slow send-rate
// budget keeps both challenges counted and waiting for their slots (the
// destination cap, 2 per hour here, is then full), and asks a third time.
// The newest's admission is refused; through the subject index (on the
// emulator's DynamoDB) dispatch finds the two older challenges, supersedes
// them, gives their counts back and admits the newest. Nothing older is
// sent, and the newest is not limited.
func TestGateNewestReclaimsCounts(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{
		Limits: true,
		Env: map[string]string{
			settings.LimitDestination.Env: "2/1h",
			// One email per 20 s, waited for in process at most 1 s: every
			// later booking defers its row, counted, to a wake-up.
			settings.SendRateVar[ledger.Email].Env: "0.05", settings.BudgetMaxWait.Env: "1s",
		},
	})
	warm := p.Notification(1, ledger.Email, 30*time.Minute)
	publish(t, p, warm, ledger.Accepted) // takes the budget's present slot

	const player, address = "acct-reclaim", "player@reclaim.example.test"
	ask := func(i int, later time.Duration) producer.Notification {
		n := p.Notification(i, ledger.Email, 30*time.Minute+later)
		n.SubjectRef, n.Message.To = player, address
		return n
	}
	older := []producer.Notification{ask(2, 0), ask(3, time.Second)}
	for _, n := range older {
		if row := publish(t, p, n, ledger.Deferred); row.AdmittedAt.IsZero() {
			t.Fatalf("%s deferred without its admission on record", n.ChallengeID)
		}
	}
	newest := ask(4, 2*time.Second)
	row := publish(t, p, newest, ledger.Deferred)
	if row.AdmittedAt.IsZero() {
		t.Fatalf("newest deferred without its admission on record")
	}
	for _, n := range older {
		got := p.Row(n)
		if got.State != ledger.Suppressed || got.Reason != "superseded by challenge "+newest.ChallengeID {
			t.Errorf("older %s: %s %q, want superseded by %s", n.ChallengeID, got.State, got.Reason, newest.ChallengeID)
		}
		if err := got.Verify(); err != nil {
			t.Errorf("older %s history: %v", n.ChallengeID, err)
		}
	}
	if n := p.SESMessages(address); n != 0 {
		t.Errorf("%d emails to the player before the newest's slot, want none", n)
	}
}

// publish publishes n, runs claim and the stream's dispatch, and fails the
// test unless n's row then stands in state want.
func publish(t *testing.T, p *pipelinetest.Pipeline, n producer.Notification, want ledger.State) ledger.Entry {
	t.Helper()
	p.Publish(n)
	p.PumpQueue()
	p.PumpStream()
	row := p.Row(n)
	if row.State != want {
		t.Fatalf("%s: %s (%s), want %s", n.ChallengeID, row.State, row.Reason, want)
	}
	return row
}
