package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/smsregion"
	"github.com/resetledger/resetledger/internal/smsregion/codes"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestDestinationLimitStopsBombing(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 5, Window: 10 * time.Minute}})
	// The full counter item counts this window and the one before it.
	window := e.Clock.Now().Truncate(10 * time.Minute).Add(-10 * time.Minute).UTC().Format(time.RFC3339)
	var limited []ledger.Entry
	for i := range 8 {
		to := "Victim@Example.test"
		if i%2 == 1 {
			to = "victim@example.test" // one mailbox, however it is written
		}
		in := e.ClaimTo(t, i, ledger.Email, to, "", 0)
		res, err := e.Cases.Dispatch(context.Background(), in.Key(), "dispatch/1")
		if err != nil {
			t.Fatal(err)
		}
		want := ledger.OutcomeAccepted
		if i >= 5 {
			want = ledger.OutcomeLimited
			limited = append(limited, res.Entry)
		}
		if res.Outcome != want {
			t.Fatalf("challenge %d: %s, want %s", i, res.Outcome, want)
		}
	}
	if n := e.Transport.Calls(); n != 5 {
		t.Fatalf("%d sends reached the provider, want 5", n)
	}
	fp, _ := e.Cases.Fingerprints.Fingerprint(context.Background(), ledger.Email, "victim@example.test")
	for _, row := range limited {
		ledgertest.MustVerify(t, row)
		if row.State != ledger.Limited || !row.State.Terminal() {
			t.Fatalf("row %s: state %s, want limited (terminal)", row.Key, row.State)
		}
		want := "limit destination: 5 of 5 sends to this destination on email per 10m0s reached (window from " + window + "); nothing sent"
		if row.Reason != want || row.Last().Reason != want {
			t.Fatalf("reason %q, want %q", row.Reason, want)
		}
		if rule, ok := ledger.LimitRule(row); !ok || rule != ledger.RuleDestination {
			t.Fatalf("LimitRule = %q %v, want destination", rule, ok)
		}
		raw, _ := json.Marshal(row)
		if strings.Contains(string(raw), fp) || strings.Contains(strings.ToLower(string(raw)), "victim@") {
			t.Fatal("the limited row holds the fingerprint or the address")
		}
		if e.HasContent(t, row.Key) {
			t.Fatal("a limited row's sealed content was kept")
		}
	}
	// Just past the window's edge the sends of the last 10 minutes still
	// count (no burst on both sides of an edge); the window after next
	// starts empty.
	e.Clock.Advance(10*time.Minute - e.Clock.Now().Sub(e.Clock.Now().Truncate(10*time.Minute)))
	in := e.ClaimTo(t, 100, ledger.Email, "victim@example.test", "", 0)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeLimited)
	e.Clock.Advance(10 * time.Minute)
	in = e.ClaimTo(t, 101, ledger.Email, "victim@example.test", "", 0)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
}

// TestDestinationLimitCountsOneMailbox: the spellings Gmail delivers to one
// mailbox (dots, a +tag, googlemail.com, capitals) share one destination
// counter: under a cap of 2, the third spelling ends limited by the
// destination rule, while another mailbox is still sent to.
func TestDestinationLimitCountsOneMailbox(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 2, Window: time.Hour}})
	for i, tc := range []struct {
		to   string
		want ledger.Outcome
	}{
		{"a.b+x@gmail.com", ledger.OutcomeAccepted},
		{"ab@gmail.com", ledger.OutcomeAccepted},
		{"AB@googlemail.com", ledger.OutcomeLimited},
		{"abc@gmail.com", ledger.OutcomeAccepted},
	} {
		in := e.ClaimTo(t, i, ledger.Email, tc.to, "", 0)
		row := ledgertest.MustDispatch(t, e, in.Key(), tc.want)
		if rule, _ := ledger.LimitRule(row); tc.want == ledger.OutcomeLimited && rule != ledger.RuleDestination {
			t.Fatalf("%s: limited by %q, want the destination rule", tc.to, rule)
		}
	}
}

// TestLimitCountsOnce: a claimed row handed to dispatch again and again
// (redelivery, duplicate stream record, re-drive) counts once; a row whose
// first dispatch was cut after the count counts nothing more when it runs
// again.
func TestLimitCountsOnce(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 2, Window: time.Hour}})
	a := e.ClaimTo(t, 1, ledger.SMS, "+15550100001", "", 0)
	e.DispatchCutAfterCount(t, a.Key())
	for range 3 {
		ledgertest.MustDispatch(t, e, a.Key(), map[bool]ledger.Outcome{true: ledger.OutcomeAccepted, false: ledger.OutcomeSkipped}[e.Get(t, a.Key()).State == ledger.Claimed])
	}
	b := e.ClaimTo(t, 2, ledger.SMS, "+1 555 010 0001", "", 0)
	ledgertest.MustDispatch(t, e, b.Key(), ledger.OutcomeAccepted) // the second of 2: a's retries counted once
	c := e.ClaimTo(t, 3, ledger.SMS, "+15550100001", "", 0)
	ledgertest.MustDispatch(t, e, c.Key(), ledger.OutcomeLimited)
}

func TestSMSCountriesAndCaps(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{
		SMSCountries:  func(r string) bool { return r == "US" || r == "GB" },
		SMSCountryCap: ledger.Cap{Max: 2, Window: time.Hour},
		SMSGlobal:     ledger.Cap{Max: 3, Window: time.Hour},
	})
	for i, tc := range []struct {
		to   string
		want ledger.Outcome
		rule ledger.Rule
		why  string
	}{
		{"+33612345678", ledger.OutcomeLimited, ledger.RuleSMSCountry, "destination number has no recognizable region"},
		{"+88234567890", ledger.OutcomeLimited, ledger.RuleSMSCountry, "destination number has no recognizable region"},
		{"+15550100001", ledger.OutcomeAccepted, "", ""},
		{"+15550100002", ledger.OutcomeAccepted, "", ""},
		{"+15550100003", ledger.OutcomeLimited, ledger.RuleSMSCountryCap, "limit sms-country-cap: 2 of 2 SMS to region US per 1h0m0s"},
		{"+447700900001", ledger.OutcomeAccepted, "", ""},
		{"+447700900002", ledger.OutcomeLimited, ledger.RuleSMSGlobal, "limit sms-global: 3 of 3 SMS in all per 1h0m0s"},
	} {
		in := e.ClaimTo(t, i, ledger.SMS, tc.to, "", 0)
		row := ledgertest.MustDispatch(t, e, in.Key(), tc.want)
		if tc.want != ledger.OutcomeLimited {
			continue
		}
		if rule, _ := ledger.LimitRule(row); rule != tc.rule || !strings.HasPrefix(row.Reason, strings.SplitN(tc.why, ":", 2)[0]) && !strings.Contains(row.Reason, tc.why) {
			t.Fatalf("%s: rule %s reason %q, want %s %q", tc.to, rule, row.Reason, tc.rule, tc.why)
		}
		if strings.Contains(row.Reason, strings.TrimPrefix(tc.to, "+")) {
			t.Fatalf("the reason holds the number: %q", row.Reason)
		}
	}
	if n := e.Transport.Calls(); n != 3 {
		t.Fatalf("%d SMS sent, want 3", n)
	}
	// A region outside the allow-list names the region.
	e2, _ := ledgertest.LimitedScenario(t, ledger.Limits{SMSCountries: func(r string) bool { return r == "US" }})
	in := e2.ClaimTo(t, 1, ledger.SMS, "+447700900003", "", 0)
	if row := ledgertest.MustDispatch(t, e2, in.Key(), ledger.OutcomeLimited); row.Reason != "region GB is not in the SMS allow-list; nothing sent" {
		t.Fatalf("reason %q", row.Reason)
	}
}

// TestSMSNumberKinds: under the default kind allow-list, with the real
// phone-number metadata, a premium-rate or shared-cost number of an allowed
// country ends limited by the number-kind rule, its reason naming the kind
// and region and no digit of the number, and nothing is sent; a mobile
// number of the same country is sent. The kind check comes after the
// country check and before every counter: the refused SMS counts nowhere.
func TestSMSNumberKinds(t *testing.T) {
	kinds, err := codes.ParseKindList(smsregion.DefaultKinds)
	if err != nil {
		t.Fatal(err)
	}
	e, store := ledgertest.LimitedScenario(t, ledger.Limits{
		SMSCountries:   func(r string) bool { return r == "GB" || r == "DE" || r == "US" },
		SMSNumberKinds: kinds.Allows,
		SMSGlobal:      ledger.Cap{Max: 100, Window: time.Hour},
	})
	e.Cases.NumberOf = func(n string) (ledger.PhoneNumber, error) {
		l, err := smsregion.Lookup(n)
		return ledger.PhoneNumber{Region: l.Region, Kind: l.Kind.String()}, err
	}
	for i, tc := range []struct {
		to, why string
	}{
		{"+447400123456", ""},
		{"+12015550123", ""},
		{"+449012345678", "a premium-rate number (region GB) is not in the SMS number-kind allow-list; nothing sent"},
		{"+4918012345", "a shared-cost number (region DE) is not in the SMS number-kind allow-list; nothing sent"},
		{"+448001234567", "a toll-free number (region GB) is not in the SMS number-kind allow-list; nothing sent"},
		{"+33612345678", "region FR is not in the SMS allow-list; nothing sent"},
	} {
		in := e.ClaimTo(t, i, ledger.SMS, tc.to, "", 0)
		if tc.why == "" {
			ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
			continue
		}
		row := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeLimited)
		rule, _ := ledger.LimitRule(row)
		want := ledger.RuleSMSNumberKind
		if strings.HasPrefix(tc.why, "region") {
			want = ledger.RuleSMSCountry
		}
		if rule != want || row.Reason != tc.why {
			t.Errorf("%s: rule %s reason %q, want %s %q", tc.to, rule, row.Reason, want, tc.why)
		}
		if strings.Contains(row.Reason, tc.to[3:]) {
			t.Errorf("the reason holds the number: %q", row.Reason)
		}
	}
	if n := e.Transport.Calls(); n != 2 {
		t.Fatalf("%d SMS sent, want 2 (the mobile and the US number)", n)
	}
	total := 0
	for _, n := range store.Counters() {
		total += n
	}
	if total != 2*2 { // two admitted SMS, each in the two items of its global window
		t.Fatalf("the counters hold %d, want 4: a refused number counts nowhere", total)
	}
}

func TestSubjectLimitAndSupersession(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Subject: ledger.Cap{Max: 2, Window: time.Hour}, Supersede: true})
	older := e.ClaimTo(t, 1, ledger.Email, "p1@example.test", "acct-7", 0)
	newer := e.ClaimTo(t, 2, ledger.Email, "p1@example.test", "acct-7", time.Minute)
	late := e.ClaimTo(t, 3, ledger.Email, "p1@example.test", "acct-7", -time.Minute) // older challenge, claimed last
	row := ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeSuppressed)
	if row.Reason != "superseded by challenge chal-000002" || row.State != ledger.Suppressed {
		t.Fatalf("older: %s %q", row.State, row.Reason)
	}
	if rule, ok := ledger.LimitRule(row); !ok || rule != ledger.RuleSuperseded {
		t.Fatalf("LimitRule = %s %v", rule, ok)
	}
	ledgertest.MustDispatch(t, e, late.Key(), ledger.OutcomeSuppressed)
	ledgertest.MustDispatch(t, e, newer.Key(), ledger.OutcomeAccepted)
	// Another channel is another stream; the subject counts every channel.
	sms := e.ClaimTo(t, 2, ledger.SMS, "+15550100001", "acct-7", 0)
	ledgertest.MustDispatch(t, e, sms.Key(), ledger.OutcomeAccepted)
	third := e.ClaimTo(t, 4, ledger.Email, "p2@example.test", "acct-7", 2*time.Minute)
	if row := ledgertest.MustDispatch(t, e, third.Key(), ledger.OutcomeLimited); !strings.HasPrefix(row.Reason, "limit subject: 2 of 2 sends for subject acct-7") {
		t.Fatalf("reason %q", row.Reason)
	}
	// A row already sent is never touched by a newer challenge.
	if got := e.Get(t, newer.Key()); got.State != ledger.Accepted {
		t.Fatalf("the sent row moved to %s", got.State)
	}
	// Without subject_ref: not counted per subject, never superseded.
	for i := range 4 {
		in := e.ClaimTo(t, 10+i, ledger.Email, fmt.Sprintf("q%d@example.test", i), "", time.Duration(i)*time.Minute)
		ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
	}
}

// TestSupersessionOff: with the setting off, an older challenge is sent.
func TestSupersessionOff(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{})
	older := e.ClaimTo(t, 1, ledger.Email, "p1@example.test", "acct-7", 0)
	e.ClaimTo(t, 2, ledger.Email, "p1@example.test", "acct-7", time.Minute)
	ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeAccepted)
}

// TestLimitedFallbackDoesNotHandOver: a limited email does not open the
// held SMS of its fallback pair: a limit is not a rejection.
func TestLimitedFallbackDoesNotHandOver(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 1, Window: time.Hour}})
	first := e.ClaimTo(t, 1, ledger.Email, ledgertest.Message(2, ledger.Email).To, "", 0)
	ledgertest.MustDispatch(t, e, first.Key(), ledger.OutcomeAccepted)
	email, sms := ledgertest.ClaimFallbackPair(t, e, 2)
	ledgertest.MustDispatch(t, e, email.Key(), ledger.OutcomeLimited)
	if got := e.Get(t, sms.Key()); got.State != ledger.Suppressed {
		t.Fatalf("held SMS after a limited email: %s, want suppressed", got.State)
	}
	if n := e.Transport.Calls(); n != 1 {
		t.Fatalf("%d sends, want 1", n)
	}
}

// TestSupersededGivesCountBack: a row counted, deferred for its send-rate
// slot and superseded at its wake-up gives its count back, so the counter
// it held has room for a message that is sent.
func TestSupersededGivesCountBack(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 2, Window: time.Hour}, Supersede: true})
	e.Cases.Scheduler = &ledgertest.RecordingScheduler{}
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error { e.Clock.Advance(d); return nil }
	e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 0.01}}
	e.Cases.Policy.BudgetWait = 0
	warm := e.ClaimTo(t, 1, ledger.Email, "other@example.test", "", 0)
	ledgertest.MustDispatch(t, e, warm.Key(), ledger.OutcomeAccepted) // the budget's next slot is 100 s away
	older := e.ClaimTo(t, 2, ledger.Email, "p@example.test", "acct-1", 0)
	if row := ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeDeferred); row.AdmittedAt.IsZero() {
		t.Fatal("the deferred row does not record its admission")
	}
	e.ClaimTo(t, 3, ledger.Email, "p@example.test", "acct-1", time.Minute) // newer, not dispatched yet
	e.Clock.Advance(100 * time.Second)
	ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeSuppressed)
	e.Cases.Budget = nil
	for i, want := range []ledger.Outcome{ledger.OutcomeAccepted, ledger.OutcomeAccepted, ledger.OutcomeLimited} {
		in := e.ClaimTo(t, 10+i, ledger.Email, "p@example.test", "", 0)
		ledgertest.MustDispatch(t, e, in.Key(), want)
	}
}

// TestNewestReclaimsWaitingOlderCounts: two older challenges of a subject
// are counted and wait for their send-rate slots, filling the destination
// counter; the newest reaches dispatch before they wake. Its refused
// admission supersedes them, gives their counts back and admits it: the
// player gets the newest link, and only it. Without the subject timeline
// (no reclaim) the newest ends limited and nothing is sent.
func TestNewestReclaimsWaitingOlderCounts(t *testing.T) {
	for _, reclaim := range []bool{true, false} {
		t.Run(fmt.Sprintf("reclaim=%t", reclaim), func(t *testing.T) {
			e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 2, Window: time.Hour}, Supersede: true})
			if reclaim {
				e.Cases.Timeline = e.Mem
			}
			e.Cases.Scheduler = &ledgertest.RecordingScheduler{}
			e.Cases.Sleep = func(_ context.Context, d time.Duration) error { e.Clock.Advance(d); return nil }
			e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 0.01}}
			e.Cases.Policy.BudgetWait = 0
			warm := e.ClaimTo(t, 1, ledger.Email, "other@example.test", "", 0)
			ledgertest.MustDispatch(t, e, warm.Key(), ledger.OutcomeAccepted) // the next slot is 100 s away
			var older []ledger.Intent
			for i := range 2 {
				in := e.ClaimTo(t, 2+i, ledger.Email, "p@example.test", "acct-1", time.Duration(i)*time.Second)
				ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred) // counted, waiting
				older = append(older, in)
			}
			newest := e.ClaimTo(t, 4, ledger.Email, "p@example.test", "acct-1", time.Minute)
			if !reclaim {
				ledgertest.MustDispatch(t, e, newest.Key(), ledger.OutcomeLimited)
				return
			}
			ledgertest.MustDispatch(t, e, newest.Key(), ledger.OutcomeDeferred)
			for _, in := range older {
				row := e.Get(t, in.Key())
				if row.State != ledger.Suppressed || row.Reason != "superseded by challenge chal-000004" {
					t.Fatalf("older %s: %s %q, want superseded by the newest", in.ChallengeID, row.State, row.Reason)
				}
			}
			e.Clock.Advance(300 * time.Second)
			for _, in := range older {
				ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeSkipped)
			}
			ledgertest.MustDispatch(t, e, newest.Key(), ledger.OutcomeAccepted)
			if n := e.Transport.Calls(); n != 2 {
				t.Fatalf("%d sends, want 2 (the warm-up and the newest)", n)
			}
		})
	}
}

// TestSupersededWhileWaitingForSlot: a newer challenge claimed while the
// older one waits in process for its send-rate slot supersedes it: the
// older has not reached dispatching, so it is not sent, and its count is
// given back for the newer.
func TestSupersededWhileWaitingForSlot(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Destination: ledger.Cap{Max: 1, Window: time.Hour}, Supersede: true})
	e.Cases.Scheduler = &ledgertest.RecordingScheduler{}
	e.Cases.Budget = &memstore.Budget{Rates: map[ledger.Channel]float64{ledger.Email: 0.2}}
	e.Cases.Policy.BudgetWait = 10 * time.Second // waited in process
	warm := e.ClaimTo(t, 1, ledger.Email, "other@example.test", "", 0)
	ledgertest.MustDispatch(t, e, warm.Key(), ledger.OutcomeAccepted) // the next slot is 5 s away
	older := e.ClaimTo(t, 2, ledger.Email, "p@example.test", "acct-1", 0)
	var newer ledger.Intent
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error {
		if newer.ChallengeID == "" {
			newer = e.ClaimTo(t, 3, ledger.Email, "p@example.test", "acct-1", time.Minute)
		}
		e.Clock.Advance(d)
		return nil
	}
	row := ledgertest.MustDispatch(t, e, older.Key(), ledger.OutcomeSuppressed)
	if row.Reason != "superseded by challenge chal-000003" {
		t.Fatalf("older: %s %q, want superseded by the challenge claimed during its wait", row.State, row.Reason)
	}
	ledgertest.MustDispatch(t, e, newer.Key(), ledger.OutcomeAccepted) // the count the older held is back
	if n := e.Transport.Calls(); n != 2 {
		t.Fatalf("%d sends, want 2 (the warm-up and the newer)", n)
	}
}
