package admission_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestThrottledOlderChallengeIsSuperseded: the provider answered every
// attempt for a number with a definite not sent (429) while the player
// asked three times. When the throttle lifts, only the newest challenge is
// sent: the older ones, of which nothing reached the provider, end
// superseded at their wake-ups.
func TestThrottledOlderChallengeIsSuperseded(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Supersede: true})
	throttled := true
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior {
		if throttled {
			return ledgertest.Throttle
		}
		return ledgertest.Accept
	}
	var asks []ledger.Intent
	for i := range 3 {
		in := e.ClaimTo(t, 1+i, ledger.SMS, "+15550100001", "acct-1", time.Duration(i)*time.Second)
		asks = append(asks, in)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
		e.Clock.Advance(time.Second)
	}
	throttled = false
	e.Clock.Advance(time.Minute)
	for i, in := range asks {
		want := ledger.OutcomeSuppressed
		if i == len(asks)-1 {
			want = ledger.OutcomeAccepted
		}
		row := ledgertest.MustDispatch(t, e, in.Key(), want)
		ledgertest.MustVerify(t, row)
	}
	if got := e.Transport.Recorded(asks[0].Key()) + e.Transport.Recorded(asks[1].Key()); got != 0 {
		t.Fatalf("%d messages of older challenges reached the player", got)
	}
	if got := e.Transport.Recorded(asks[2].Key()); got != 1 {
		t.Fatalf("the newest challenge was recorded %d times, want 1", got)
	}
}

// TestUnknownAttemptIsNeverSuperseded: a row whose attempt may have been
// taken (its acknowledgement was lost, then a retry was answered not sent)
// is not superseded by a newer challenge: the player may hold its link.
func TestUnknownAttemptIsNeverSuperseded(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Supersede: true})
	older := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "acct-1", 0)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeUnknown)
	row := e.Get(t, older.Key())
	if ledger.Supersedable(row) || row.Unsent() {
		t.Fatalf("an unknown row reads as unsent: %s", ledgertest.HistoryPath(row))
	}
	// The same history, back to deferred after a later not-sent answer.
	row.State = ledger.Deferred
	if ledger.Supersedable(row) {
		t.Fatal("a deferred row that went through unknown is supersedable")
	}
}

// TestReleaseTakesBackTheWindowThatCounted is the sequence of issue 32
// against the memory store: an older email is counted in minute 1 (in the
// counter items of minutes 1 and 2) and its first dispatch fails after the
// count; its redelivery is a repeat; in minute 3 an SMS of the same subject
// is sent under a 1-per-minute subject cap; the newest email's admission
// reclaims the older one. The release gives back the counts of minutes 1
// and 2, so the newest email finds minute 3 full: one send per window,
// never two.
func TestReleaseTakesBackTheWindowThatCounted(t *testing.T) {
	e, store := ledgertest.LimitedScenario(t, ledger.Limits{Subject: ledger.Cap{Max: 1, Window: time.Minute}, Supersede: true})
	e.Cases.Timeline = e.Mem
	e.Cases.Scheduler = &ledgertest.RecordingScheduler{}
	now := e.Clock.Now()
	e.Clock.Advance(now.Truncate(time.Minute).Add(time.Minute + 10*time.Second).Sub(now))
	older := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "acct-1", 0)
	e.DispatchCutAfterCount(t, older.Key())
	e.Clock.Advance(2 * time.Minute) // minute 3
	sms := e.ClaimTo(t, 2, ledger.SMS, "+15550100001", "acct-1", 0)
	ledgertest.MustDispatch(t, e, sms.Key(), ledger.OutcomeAccepted)
	newest := e.ClaimTo(t, 3, ledger.Email, "p@example.test", "acct-1", time.Minute)
	ledgertest.MustDispatch(t, e, newest.Key(), ledger.OutcomeLimited)
	if got := e.Get(t, older.Key()); got.State != ledger.Suppressed {
		t.Fatalf("older: %s, want superseded by the reclaim", got.State)
	}
	if n := e.Transport.Calls(); n != 1 {
		t.Fatalf("%d sends in minute 3 under a cap of 1", n)
	}
	// Minutes 1 and 2's counts were the ones given back.
	for _, back := range []time.Duration{2 * time.Minute, time.Minute} {
		minute := "#" + strconv.FormatInt(e.Clock.Now().Truncate(time.Minute).Add(-back).Unix(), 10)
		for id, n := range store.Counters() {
			if strings.HasSuffix(id, minute) && n != 0 {
				t.Fatalf("counter %s holds %d after the older email's release, want 0", id, n)
			}
		}
	}
}

// TestStaleStreamCopyGivesItsCountBack: a stream record of a claim that
// already ended limited arrives again after its window, and the next one
// that still counts its sibling, rolled over. The
// dispatch that trusts the stale copy counts it, loses its begin write,
// and gives the count back: a message that never sends holds no count.
func TestStaleStreamCopyGivesItsCountBack(t *testing.T) {
	// The subject limit needs no address: the stale copy's dispatch
	// reaches its count without opening the (purged) content.
	e, store := ledgertest.LimitedScenario(t, ledger.Limits{Subject: ledger.Cap{Max: 1, Window: time.Minute}})
	first := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "acct-1", 0)
	ledgertest.MustDispatch(t, e, first.Key(), ledger.OutcomeAccepted)
	second := e.ClaimTo(t, 2, ledger.Email, "p@example.test", "acct-1", 0)
	stale := e.Get(t, second.Key())
	ledgertest.MustDispatch(t, e, second.Key(), ledger.OutcomeLimited)
	e.Clock.Advance(2 * time.Minute)
	res, err := e.Cases.DispatchRow(context.Background(), stale, "dispatch/2")
	if err != nil || res.Outcome != ledger.OutcomeSkipped {
		t.Fatalf("stale copy: %s %v, want skipped", res.Outcome, err)
	}
	minute3 := "#" + strconv.FormatInt(e.Clock.Now().Truncate(time.Minute).Unix(), 10)
	minute4 := "#" + strconv.FormatInt(e.Clock.Now().Truncate(time.Minute).Add(time.Minute).Unix(), 10)
	for id, n := range store.Counters() {
		if (strings.HasSuffix(id, minute3) || strings.HasSuffix(id, minute4)) && n != 0 {
			t.Fatalf("counter %s of the window the stale copy was dispatched in holds %d, want 0", id, n)
		}
	}
	third := e.ClaimTo(t, 3, ledger.Email, "p@example.test", "acct-1", 0)
	ledgertest.MustDispatch(t, e, third.Key(), ledger.OutcomeAccepted)
}

// TestExpiredUnsentGivesCountBack: a counted row that expires without a
// send (the provider answered not sent until the deadline) gives its count
// back; a row that was sent keeps its count.
func TestExpiredUnsentGivesCountBack(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 1, Window: time.Hour}})
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	in := e.ClaimTo(t, 1, ledger.Email, "p@example.test", "", 0)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
	e.Clock.Advance(ledgertest.ScenarioTTL)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeExpired)
	e.Transport.Script = nil
	next := e.ClaimTo(t, 2, ledger.Email, "p@example.test", "", 0)
	ledgertest.MustDispatch(t, e, next.Key(), ledger.OutcomeAccepted)
	last := e.ClaimTo(t, 3, ledger.Email, "p@example.test", "", 0)
	ledgertest.MustDispatch(t, e, last.Key(), ledger.OutcomeLimited)
}
