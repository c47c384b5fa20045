package e2e

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smsregion"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// The sizes of the send-limit proofs (issue 21). The sizes are 1,000
// intents for the email bombing and 500 SMS for each pumping case; make test
// runs smaller defaults because every intent travels the whole deployed
// stack on a single emulator process shared by the rest of the suite (at
// 1,000 the bombing alone takes minutes there, not seconds), and the
// property does not depend on the size once it is past the cap. Run the full
// sizes by hand:
//
//	E2E_BOMB_INTENTS=1000 E2E_PUMP_SMS=500 go test -count=1 -v -run TestSendLimitsEndToEnd -timeout 30m ./e2e/
const (
	defaultBombIntents = 200
	defaultPumpSMS     = 60
)

// limitsSettings are the deployed dispatch function's limit settings, read
// from its environment as the function reads them.
func (e *env) limitsSettings(t *testing.T) settings.Settings {
	t.Helper()
	vars, err := FunctionEnvironment(context.Background(), e.cfg, e.endpoint, e.out.DispatchFunction)
	if err != nil {
		t.Fatalf("dispatch function of stack %s: %v", e.out.Stack, err)
	}
	s, err := settings.Load(settings.Dispatch, func(k string) string { return vars[k] })
	if err != nil {
		t.Fatalf("dispatch function's settings: %v", err)
	}
	if s.LimitsTable == "" {
		t.Fatalf("stack %s deploys dispatch without %s: no send limit is on; redeploy with localstack/deploy-local.sh",
			e.out.Stack, settings.LimitsTable.Env)
	}
	return s
}

func sizeFromEnv(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

// TestSendLimitsEndToEnd proves the send limits on the deployed stack, each
// intent published with pkg/producer to the intent queue and sent (or not)
// by the deployed functions to the emulator's SES and the local webhook
// provider:
//
//   - bombing: E2E_BOMB_INTENTS distinct challenges (default 200) for one
//     mailbox. The sends captured for it equal the accepted rows and stay
//     within the destination cap per window; every other row ends limited by
//     the destination rule; no row is left open; every chain verifies.
//   - pumping, disallowed: E2E_PUMP_SMS SMS (default 60) to numbers the
//     phone-number library places in France and the United Kingdom, outside
//     the allow-list: none reaches the provider, each ends limited by
//     sms-country.
//   - pumping, capped: E2E_PUMP_SMS SMS to distinct Canadian numbers, an
//     allowed region whose per-country cap the local stage lowers
//     (deploy-local.sh: -c limitSmsCountry): the sends stay within the cap
//     per window, the rest end limited by sms-country-cap, and the
//     dispatch function's LimitStops metric for that rule rises by at least
//     as many (read from its EMF log lines: the emulator's CloudWatch makes
//     no metrics of them).
//
// A cap holds in any span of its window, across the clock's window edges
// (issue 33: each counter item covers two windows), so the bound is the cap
// times the spans of one window that cover the run: the cap itself for a
// run shorter than the window, even one that crosses an edge. An earlier run in
// the same window uses the same country counter, so the capped case bounds
// this run's sends but cannot require any.
func TestSendLimitsEndToEnd(t *testing.T) {
	e := setup(t)
	s := e.limitsSettings(t)
	emulatorLog := e.markEmulatorLog(t)
	run := emulator.UniqueName(t, "lim")
	start := time.Now()
	t.Logf("stack %s, run %s: destination %s, SMS country cap %s, SMS global %s, allowed SMS regions %s",
		e.out.Stack, run, s.Limits.Destination, s.Limits.SMSCountryCap, s.Limits.SMSGlobal, s.SMSAllowedCountries)

	t.Run("cases", func(t *testing.T) {
		t.Run("bombing", func(t *testing.T) { t.Parallel(); e.bombing(t, run, s) })
		t.Run("pumping-disallowed", func(t *testing.T) { t.Parallel(); e.pumpingDisallowed(t, run, s) })
		t.Run("pumping-capped", func(t *testing.T) { t.Parallel(); e.pumpingCapped(t, run, s) })
		t.Run("pumping-premium", func(t *testing.T) { t.Parallel(); e.pumpingPremium(t, run, s) })
	})
	if emulatorLog != nil {
		problems, err := emulatorLog.Problems()
		if err != nil {
			t.Errorf("emulator log: %v", err)
		}
		if len(problems) > 0 {
			t.Errorf("the emulator logged %d errors of its own during the run (%s); the first:\n%s",
				len(problems), emulatorLog.Path, problems[0])
		}
	}
	t.Logf("send limits end to end: %v", time.Since(start).Round(time.Second))
}

// bombing publishes n distinct challenges for one mailbox.
func (e *env) bombing(t *testing.T, run string, s settings.Settings) {
	lim := s.Limits.Destination
	if !lim.On() {
		t.Fatalf("the deployed destination limit is off (%s)", settings.LimitDestination.Env)
	}
	n := sizeFromEnv(t, "E2E_BOMB_INTENTS", defaultBombIntents)
	if n <= lim.Max {
		t.Fatalf("E2E_BOMB_INTENTS=%d does not exceed the destination cap %s", n, lim)
	}
	victim := "bomb+" + run + "@" + simulatorDomain
	ns := make([]producer.Notification, n)
	expires := time.Now().Add(30 * time.Minute)
	for i := range ns {
		// A subject_ref of its own for each (notification): each request
		// looks like another account's, so neither the subject cap nor
		// supersession applies; only the destination limit stands between
		// the attacker and the mailbox. Each refused admission still looks
		// for older challenges of its subject (finding none), which is what
		// records dispatch's subject-index reads for iam-coverage.
		ns[i] = notification(fmt.Sprintf("%s-bomb-%04d", run, i), ledger.Email, victim, expires)
	}
	first := time.Now()
	e.publishAll(t, ns)
	rows := e.terminalAll(t, ns, first)
	last := time.Now()

	accepted, limited := e.checkLimited(t, rows, ledger.RuleDestination, lim)
	emails, err := CapturedEmails(context.Background(), e.web, e.endpoint)
	if err != nil {
		t.Fatal(err)
	}
	got := EmailsTo(emails, victim)
	e.checkSends(t, "emails to the victim", accepted, ackIDs(got, func(m Email) string { return m.MessageID }))
	bound := lim.Max * windows(lim, first, last)
	if len(got) > bound {
		t.Errorf("%d emails reached the victim, want at most %d (cap %s, %d windows touched)", len(got), bound, lim, windows(lim, first, last))
	}
	t.Logf("bombing: intents=%d sent=%d limited=%d (cap %s, bound %d over %d windows) in %v",
		n, len(got), limited, lim, bound, windows(lim, first, last), last.Sub(first).Round(time.Second))
}

// pumpingDisallowed sends SMS to regions outside the allow-list.
func (e *env) pumpingDisallowed(t *testing.T, run string, s settings.Settings) {
	n := sizeFromEnv(t, "E2E_PUMP_SMS", defaultPumpSMS)
	regions := []string{"FR", "GB"}
	for _, r := range regions {
		if s.SMSAllowedCountries.Allows(r) {
			t.Fatalf("the deployed allow-list (%s) allows %s; this case needs a region outside it", s.SMSAllowedCountries, r)
		}
	}
	ns := make([]producer.Notification, n)
	expires := time.Now().Add(30 * time.Minute)
	for i := range ns {
		to := number(t, regions[i%len(regions)])
		ns[i] = notification(fmt.Sprintf("%s-abroad-%04d", run, i), ledger.SMS, to, expires)
	}
	first := time.Now()
	e.publishAll(t, ns)
	rows := e.terminalAll(t, ns, first)
	for _, r := range rows {
		if r.State != ledger.Limited {
			t.Errorf("row %s: %s (%s), want limited: its region is outside the allow-list", r.Key, r.State, r.Reason)
			continue
		}
		if rule, _ := ledger.LimitRule(r); rule != ledger.RuleSMSCountry || !strings.Contains(r.Reason, "not in the SMS allow-list") {
			t.Errorf("row %s limited by %q (%s), want %s and the region outside the allow-list", r.Key, rule, r.Reason, ledger.RuleSMSCountry)
		}
		if r.Attempts != 0 {
			t.Errorf("row %s: %d attempts, want none", r.Key, r.Attempts)
		}
		if err := r.Verify(); err != nil {
			t.Errorf("row %s history: %v", r.Key, err)
		}
	}
	sent := e.providerSends(t, ns)
	if len(sent) != 0 {
		t.Errorf("the provider received %d of the %d SMS to regions outside the allow-list, want none", len(sent), n)
	}
	t.Logf("pumping outside the allow-list: sms=%d sent=%d in %v", n, len(sent), time.Since(first).Round(time.Second))
}

// pumpingPremium sends SMS to premium-rate numbers of an allowed region (US
// +1 900): each ends limited by the number-kind rule, before any counter,
// and the provider receives none.
func (e *env) pumpingPremium(t *testing.T, run string, s settings.Settings) {
	const region = "US"
	if !s.SMSAllowedCountries.Allows(region) || s.SMSAllowedNumberKinds.Allows(smsregion.PremiumRate.String()) {
		t.Fatalf("the deployed allow-lists (%s; kinds %s) must allow %s and refuse premium-rate numbers", s.SMSAllowedCountries, s.SMSAllowedNumberKinds, region)
	}
	n := min(sizeFromEnv(t, "E2E_PUMP_SMS", defaultPumpSMS), 20)
	ns := make([]producer.Notification, n)
	expires := time.Now().Add(30 * time.Minute)
	for i := range ns {
		ns[i] = notification(fmt.Sprintf("%s-premium-%04d", run, i), ledger.SMS, premiumNumber(t, region), expires)
	}
	first := time.Now()
	e.publishAll(t, ns)
	rows := e.terminalAll(t, ns, first)
	for _, r := range rows {
		rule, _ := ledger.LimitRule(r)
		if r.State != ledger.Limited || rule != ledger.RuleSMSNumberKind || !strings.Contains(r.Reason, "premium-rate number (region US)") {
			t.Errorf("row %s: %s by %q (%s), want limited by %s naming the kind", r.Key, r.State, rule, r.Reason, ledger.RuleSMSNumberKind)
		}
		if r.Attempts != 0 {
			t.Errorf("row %s: %d attempts, want none", r.Key, r.Attempts)
		}
		if err := r.Verify(); err != nil {
			t.Errorf("row %s history: %v", r.Key, err)
		}
	}
	if sent := e.providerSends(t, ns); len(sent) != 0 {
		t.Errorf("the provider received %d of the %d SMS to premium-rate numbers, want none", len(sent), n)
	}
	t.Logf("pumping premium-rate numbers: sms=%d sent=0 in %v", n, time.Since(first).Round(time.Second))
}

// premiumNumber draws a random +1 900 number that the phone-number library
// classifies as a premium-rate number of region.
func premiumNumber(t *testing.T, region string) string {
	t.Helper()
	for range 1000 {
		d, err := rand.Int(rand.Reader, big.NewInt(10_000_000))
		if err != nil {
			t.Fatal(err)
		}
		n := fmt.Sprintf("+1900%07d", d.Int64())
		if l, err := smsregion.Lookup(n); err == nil && l.Region == region && l.Kind == smsregion.PremiumRate {
			return n
		}
	}
	t.Fatalf("no premium-rate number of %s drawn from +1 900", region)
	return ""
}

// pumpingCapped sends SMS to distinct numbers of one allowed region.
func (e *env) pumpingCapped(t *testing.T, run string, s settings.Settings) {
	lim := s.Limits.SMSCountryCap
	if !lim.On() {
		t.Fatalf("the deployed per-country SMS cap is off (%s)", settings.LimitSMSCountry.Env)
	}
	const region = "CA"
	if !s.SMSAllowedCountries.Allows(region) {
		t.Fatalf("the deployed allow-list (%s) does not allow %s", s.SMSAllowedCountries, region)
	}
	n := sizeFromEnv(t, "E2E_PUMP_SMS", defaultPumpSMS)
	if n <= lim.Max {
		t.Fatalf("E2E_PUMP_SMS=%d does not exceed the per-country cap %s; the local stage lowers it with -c limitSmsCountry "+
			"(localstack/deploy-local.sh)", n, lim)
	}
	ns := make([]producer.Notification, n)
	expires := time.Now().Add(30 * time.Minute)
	seen := map[string]bool{}
	for i := range ns {
		to := number(t, region)
		for seen[to] {
			to = number(t, region)
		}
		seen[to] = true
		ns[i] = notification(fmt.Sprintf("%s-capped-%04d", run, i), ledger.SMS, to, expires)
	}
	first := time.Now()
	e.publishAll(t, ns)
	rows := e.terminalAll(t, ns, first)
	last := time.Now()

	accepted, limited := e.checkLimited(t, rows, ledger.RuleSMSCountryCap, lim)
	sent := e.providerSends(t, ns)
	e.checkSends(t, "SMS the provider received", accepted, sent)
	bound := lim.Max * windows(lim, first, last)
	if len(sent) > bound {
		t.Errorf("the provider received %d SMS to %s, want at most %d (cap %s, %d windows touched)", len(sent), region, bound, lim, windows(lim, first, last))
	}
	if limited == 0 {
		t.Errorf("no SMS of %d was limited by the cap %s", n, lim)
	}

	// The alarm's metric: LimitStops{Rule=sms-country-cap} in the dispatch
	// function's EMF lines since the run started.
	var stops int
	err := Poll(context.Background(), 30*time.Second, pollEvery, func(ctx context.Context) (bool, string, error) {
		var err error
		stops, err = e.limitStops(ctx, ledger.RuleSMSCountryCap, first)
		return stops >= limited, fmt.Sprintf("%s LimitStops{Rule=%s} logged, %d rows limited", strconv.Itoa(stops), ledger.RuleSMSCountryCap, limited), err
	})
	if err != nil {
		t.Errorf("the dispatch function's LimitStops metric did not rise with the limited rows: %v", err)
	}
	t.Logf("pumping a capped region: sms=%d sent=%d limited=%d LimitStops{Rule=%s}+=%d (cap %s, bound %d over %d windows) in %v",
		n, len(sent), limited, ledger.RuleSMSCountryCap, stops, lim, bound, windows(lim, first, last), last.Sub(first).Round(time.Second))
}

// publishAll publishes every notification, a few at a time.
func (e *env) publishAll(t *testing.T, ns []producer.Notification) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	next := make(chan producer.Notification)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				if _, err := e.producer.Publish(context.Background(), n); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("publish %s: %w", n.ChallengeID, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, n := range ns {
		next <- n
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// terminalAll waits until the row of every notification is terminal and
// returns them in order. The wait grows with the count: every row takes the
// claim, the stream and dispatch on one emulator.
func (e *env) terminalAll(t *testing.T, ns []producer.Notification, since time.Time) []ledger.Entry {
	t.Helper()
	rows := make([]ledger.Entry, len(ns))
	done := make([]bool, len(ns))
	timeout := sendTimeout + time.Duration(len(ns))*300*time.Millisecond
	err := Poll(context.Background(), timeout, 2*time.Second, func(ctx context.Context) (bool, string, error) {
		open, missing := 0, 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		sem := make(chan struct{}, 8)
		for i, n := range ns {
			if done[i] {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				r, err := e.store.Get(ctx, key(n))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, ledger.ErrNotFound):
					missing++
				case err != nil:
					firstErr = err
				case r.State.Terminal():
					rows[i], done[i] = r, true
				default:
					open++
				}
			}()
		}
		wg.Wait()
		return open+missing == 0, fmt.Sprintf("%d rows not yet claimed, %d open, of %d (%v since the first publish)",
			missing, open, len(ns), time.Since(since).Round(time.Second)), firstErr
	})
	if err != nil {
		t.Fatalf("rows: %v (lost)", err)
	}
	return rows
}

// checkLimited checks that every row is accepted once or limited by rule
// with a reason naming the rule, the full count and the cap, and that
// every chain verifies. It returns the accepted rows and the limited count.
func (e *env) checkLimited(t *testing.T, rows []ledger.Entry, rule ledger.Rule, lim ledger.Cap) (map[string]ledger.Entry, int) {
	t.Helper()
	accepted, limited := map[string]ledger.Entry{}, 0
	full := fmt.Sprintf("limit %s: %d of %d ", rule, lim.Max, lim.Max)
	for _, r := range rows {
		if err := r.Verify(); err != nil {
			t.Errorf("row %s history: %v", r.Key, err)
		}
		switch r.State {
		case ledger.Accepted:
			if r.Attempts != 1 || r.AckID == "" {
				t.Errorf("row %s accepted after %d attempts, ack %q; want 1 attempt and an ack id", r.Key, r.Attempts, r.AckID)
			}
			accepted[r.AckID] = r
		case ledger.Limited:
			limited++
			got, _ := ledger.LimitRule(r)
			if got != rule || !strings.HasPrefix(r.Reason, full) || !strings.Contains(r.Reason, "per "+lim.Window.String()) ||
				!strings.Contains(r.Reason, "(window from ") || !strings.HasSuffix(r.Reason, "nothing sent") {
				t.Errorf("row %s limited by %q: %q; want rule %s, %q, the window and \"nothing sent\"", r.Key, got, r.Reason, rule, full)
			}
			if r.Attempts != 0 || r.AckID != "" {
				t.Errorf("limited row %s: %d attempts, ack %q; want none", r.Key, r.Attempts, r.AckID)
			}
		default:
			t.Errorf("row %s ended %s (%s), want accepted or limited by %s", r.Key, r.State, r.Reason, rule)
		}
	}
	if len(accepted)+limited != len(rows) {
		t.Errorf("%d rows: %d accepted, %d limited; want every row one or the other", len(rows), len(accepted), limited)
	}
	return accepted, limited
}

// checkSends checks that the provider's record and the accepted rows are
// the same messages: one send per accepted row, none for any other.
func (e *env) checkSends(t *testing.T, what string, accepted map[string]ledger.Entry, sent []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range sent {
		seen[id]++
		switch {
		case seen[id] > 1:
			t.Errorf("%s: message %s recorded %d times (duplicate)", what, id, seen[id])
		case accepted[id].Key == "":
			t.Errorf("%s: message %s answers no accepted row (a send of a limited row?)", what, id)
		}
	}
	for id, r := range accepted {
		if seen[id] == 0 {
			t.Errorf("%s: accepted row %s (ack %s) has no send recorded", what, r.Key, id)
		}
	}
	if len(sent) != len(accepted) {
		t.Errorf("%s: %d, accepted rows %d; want equal", what, len(sent), len(accepted))
	}
}

// providerSends returns the webhook provider's message ids for the
// notifications' keys.
func (e *env) providerSends(t *testing.T, ns []producer.Notification) []string {
	t.Helper()
	msgs, err := ProviderMessages(context.Background(), e.web, e.provider)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, n := range ns {
		keys[key(n)] = true
	}
	var ids []string
	for _, m := range msgs {
		if keys[m.IdempotencyKey] {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// limitStops sums the LimitStops metric for rule in the dispatch function's
// EMF lines since start.
func (e *env) limitStops(ctx context.Context, rule ledger.Rule, since time.Time) (int, error) {
	events, err := FilterLogEvents(ctx, e.cfg, e.endpoint, LogGroup(e.out.DispatchFunction), `"`+metrics.LimitStops+`"`, since)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range events {
		m := jsonLine(ev.Message)
		if m == nil || m["_aws"] == nil || m[metrics.DimRule] != string(rule) {
			continue
		}
		if v, ok := m[metrics.LimitStops].(float64); ok {
			n += int(v)
		}
	}
	return n, nil
}

func ackIDs[M any](ms []M, id func(M) string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = id(m)
	}
	return out
}

// windows is how many consecutive spans of cap's window it takes to cover
// the run from first to last (at least one): the cap holds in each.
func windows(lim ledger.Cap, first, last time.Time) int {
	return max(1, int((last.Sub(first)+lim.Window-1)/lim.Window))
}

// numberPlans are national number patterns the phone-number library
// assigns to each region: a fixed prefix and random digits after it.
var numberPlans = map[string]struct {
	prefix string
	digits int
}{
	"US": {"+1201", 7}, // New Jersey
	"CA": {"+1416", 7}, // Toronto
	"FR": {"+336", 8},  // French mobiles
	"GB": {"+447", 9},  // UK mobiles (some ranges are the Crown dependencies': redrawn)
}

// number draws a random number that the phone-number library places in
// region (smsregion, the library dispatch uses).
func number(t *testing.T, region string) string {
	t.Helper()
	plan, ok := numberPlans[region]
	if !ok {
		t.Fatalf("no number plan for %s", region)
	}
	for range 1000 {
		d, err := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(plan.digits)), nil))
		if err != nil {
			t.Fatal(err)
		}
		n := fmt.Sprintf("%s%0*d", plan.prefix, plan.digits, d.Int64())
		if r, err := smsregion.Region(n); err == nil && r == region {
			return n
		}
	}
	t.Fatalf("no number in %s drawn from %s and %d digits", region, plan.prefix, plan.digits)
	return ""
}
