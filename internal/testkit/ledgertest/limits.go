package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Limits is what a send-limit store implements: the counters and the
// newest challenge per subject.
type Limits interface {
	ledger.Limiter
	ledger.Challenges
}

// NewLimits builds an empty limit store under test.
type NewLimits func(t *testing.T) Limits

// limitsContract is what every limit store keeps.
var limitsContract = []property[NewLimits]{
	{"counts up to the cap, then limits naming the full counter", limitsUpToCap},
	{"a message counts once", limitsCountsOnce},
	{"a limited message counts in no counter", limitsAllOrNothing},
	{"a count holds through the next window, then is gone", limitsWindows},
	{"no span of a window admits more than the cap, across an edge", limitsSliding},
	{"a worker whose clock is behind cannot spend the cap again", limitsSkewedClocks},
	{"8 racing workers never exceed a cap", limitsRacing},
	{"a release gives a count back once", limitsRelease},
	{"a message counts once across windows", limitsOnceAcrossWindows},
	{"a release takes back exactly the windows that counted", limitsReleaseExact},
	{"an unsent message's count stays until its release, which gives it all back at once", limitsUnsentCount},
	{"SMS country caps count per region, the global cap counts them all", limitsRegions},
	{"a release hours later takes nothing from the windows counting now", limitsReleaseLate},
	{"the newest challenge is the one issued last", limitsNewest},
}

// RunLimitsContract checks that a limit store admits a message in every
// counter or in none, never past a cap, even under 8 racing workers, nor
// past a cap in any span of its window across an edge; counts a message
// once however often, and in whatever window, it is admitted; releases
// exactly the counters that counted it; forgets a count after the window
// following its own, and a release hours later takes nothing from the
// windows counting then; counts each SMS region apart under one global cap;
// and keeps the newest challenge of a subject by issue time.
func RunLimitsContract(t *testing.T, newLimits NewLimits) {
	runProperties(t, limitsContract, newLimits)
}

// limitsT0 lies ahead of the clocks the tests run under, so that an
// emulator deleting expired items by the real clock (ministack's TTL reaper
// runs every minute) deletes none of the counters a test counts in.
var limitsT0 = time.Date(2036, 12, 1, 10, 0, 0, 0, time.UTC)

func admit(t *testing.T, l ledger.Limiter, key string, now time.Time, cs ...ledger.Count) ledger.Admission {
	t.Helper()
	a, err := l.Admit(context.Background(), key, cs, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func count(rule ledger.Rule, key string, max int, window time.Duration) ledger.Count {
	return ledger.Count{Rule: rule, Key: key, Cap: ledger.Cap{Max: max, Window: window}}
}

func limitsUpToCap(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	free := count(ledger.RuleSubject, "acct-1", 100, time.Hour)
	c := count(ledger.RuleDestination, "email#fp-1", 3, 10*time.Minute)
	for i := range 3 {
		if a := admit(t, l, fmt.Sprint("m", i), limitsT0.Add(time.Duration(i)*time.Second), free, c); a.Limited != -1 || a.Repeat {
			t.Fatalf("message %d: %+v, want admitted", i, a)
		}
	}
	a := admit(t, l, "m3", limitsT0.Add(time.Minute), free, c)
	if from := limitsT0.Add(-10 * time.Minute); a.Limited != 1 || a.Count != 3 || !a.Window.Equal(from) {
		t.Fatalf("4th message: %+v, want limited by counter 1 at count 3, counted from %s (its window and the one before)", a, from)
	}
	other := count(ledger.RuleDestination, "email#fp-2", 3, 10*time.Minute)
	if a := admit(t, l, "m4", limitsT0.Add(time.Minute), other); a.Limited != -1 {
		t.Fatalf("another destination: %+v, want admitted", a)
	}
}

func limitsCountsOnce(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	c := count(ledger.RuleDestination, "sms#fp", 2, time.Hour)
	admit(t, l, "m1", limitsT0, c)
	for i := range 3 { // redelivery, duplicate stream record, re-drive
		if a := admit(t, l, "m1", limitsT0.Add(time.Duration(i)*time.Second), c); a.Limited != -1 || !a.Repeat {
			t.Fatalf("repeat %d: %+v, want admitted as a repeat", i, a)
		}
	}
	if a := admit(t, l, "m2", limitsT0, c); a.Limited != -1 || a.Repeat {
		t.Fatalf("second message: %+v, want admitted: the repeats of m1 counted nothing", a)
	}
	if a := admit(t, l, "m3", limitsT0, c); a.Limited != 0 || a.Count != 2 {
		t.Fatalf("third message: %+v, want limited at 2", a)
	}
}

func limitsAllOrNothing(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	roomy := count(ledger.RuleSubject, "acct-9", 2, time.Hour)
	full := count(ledger.RuleSMSGlobal, "sms", 1, time.Hour)
	admit(t, l, "first", limitsT0, full)
	if a := admit(t, l, "m1", limitsT0, roomy, full); a.Limited != 1 {
		t.Fatalf("m1: %+v, want limited by the global cap", a)
	}
	if a := admit(t, l, "m1", limitsT0, roomy); a.Limited != -1 || a.Repeat {
		t.Fatalf("m1 again without the full counter: %+v, want admitted and not a repeat: the limited try counted nothing", a)
	}
	admit(t, l, "m2", limitsT0, roomy)
	if a := admit(t, l, "m3", limitsT0, roomy); a.Limited != 0 || a.Count != 2 {
		t.Fatalf("m3: %+v, want the subject counter full at 2 (m1, m2), not 3", a)
	}
}

// limitsWindows: a count holds in its own window and the next (so that no
// span of one window holds more than the cap) and is gone from the window
// after next.
func limitsWindows(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	c := count(ledger.RuleDestination, "email#fp", 1, 10*time.Minute)
	admit(t, l, "m1", limitsT0.Add(9*time.Minute), c)
	if a := admit(t, l, "m2", limitsT0.Add(9*time.Minute+59*time.Second), c); a.Limited != 0 {
		t.Fatalf("same window: %+v, want limited", a)
	}
	if a := admit(t, l, "m2", limitsT0.Add(10*time.Minute), c); a.Limited != 0 || a.Count != 1 || !a.Window.Equal(limitsT0) {
		t.Fatalf("next window, a second after the edge: %+v, want limited at 1, counted from %s", a, limitsT0)
	}
	if a := admit(t, l, "m2", limitsT0.Add(19*time.Minute+59*time.Second), c); a.Limited != 0 {
		t.Fatalf("next window, within 10 minutes of m1: %+v, want limited", a)
	}
	if a := admit(t, l, "m2", limitsT0.Add(20*time.Minute), c); a.Limited != -1 {
		t.Fatalf("the window after next: %+v, want admitted", a)
	}
}

// limitsSkewedClocks: workers' clocks differ. One a few seconds ahead has
// counted a message just past a window edge; another, behind, admits one
// just before the edge, two seconds earlier by its clock. Under a cap of 1
// per 10 minutes the second is limited by the counter the first filled
// (the next window's item counts this window too), so no span of 10
// minutes, by the admissions' own times, holds two.
func limitsSkewedClocks(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	c := count(ledger.RuleDestination, "sms#fp-skew", 1, 10*time.Minute)
	edge := limitsT0.Add(10 * time.Minute)
	if a := admit(t, l, "ahead", edge.Add(time.Second), c); a.Limited != -1 {
		t.Fatalf("the first message: %+v, want admitted", a)
	}
	a := admit(t, l, "behind", edge.Add(-time.Second), c)
	if a.Limited != 0 || a.Count != 1 || !a.Window.Equal(limitsT0) {
		t.Fatalf("a message 2 s earlier by a clock behind: %+v, want limited at 1 by the item counting from %s", a, limitsT0)
	}
}

// limitsSliding: a burst on both sides of a window edge, then a steady
// stream over several windows, under a cap of 3 per 10 minutes: no span of
// 10 minutes, wherever it starts, holds more than 3 admissions (fixed
// windows let 6 through in the two seconds around the edge), and the cap
// frees again later (it is not stuck shut).
func limitsSliding(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	const window = 10 * time.Minute
	c := count(ledger.RuleSubject, "acct-burst", 3, window)
	var at []time.Time
	try := func(key string, now time.Time) {
		if a := admit(t, l, key, now, c); a.Limited == -1 {
			at = append(at, now)
		}
	}
	edge := limitsT0.Add(window)
	for i := range 3 {
		try(fmt.Sprint("before-", i), edge.Add(-time.Second))
		try(fmt.Sprint("after-", i), edge)
	}
	if len(at) != 3 {
		t.Fatalf("the burst around the edge at %s: %d admitted, want 3", edge, len(at))
	}
	for i := range 150 { // every 17 s for 42.5 minutes after the burst
		try(fmt.Sprint("steady-", i), edge.Add(time.Duration(i+1)*17*time.Second))
	}
	for i, from := range at {
		n := 0
		for _, t2 := range at[i:] {
			if t2.Sub(from) < window {
				n++
			}
		}
		if n > c.Cap.Max {
			t.Fatalf("%d admissions in the %s from %s, over the cap of %d (admitted at %v)", n, window, from, c.Cap.Max, at)
		}
	}
	if len(at) < 6 {
		t.Fatalf("%d admitted over 45 minutes under 3 per 10 minutes, want at least 6: the cap must free again", len(at))
	}
}

// limitsRacing: 8 workers admit 40 distinct messages, and each of them
// again (a duplicate delivery racing the first), against a cap of 7 and a
// cap of 11 they share: exactly 7 are admitted, each once.
func limitsRacing(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	small := count(ledger.RuleDestination, "email#hot", 7, time.Hour)
	large := count(ledger.RuleSMSGlobal, "sms", 11, time.Hour)
	var admitted, repeats, limited atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 80)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				key := fmt.Sprintf("m%d", (w*5+i)%40)
				a, err := l.Admit(context.Background(), key, []ledger.Count{small, large}, limitsT0, limitsT0.Add(time.Hour))
				switch {
				case err != nil:
					errs <- err
				case a.Limited >= 0:
					limited.Add(1)
				case a.Repeat:
					repeats.Add(1)
				default:
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if admitted.Load() != 7 {
		t.Fatalf("%d first admissions, want exactly the cap of 7 (repeats %d, limited %d)", admitted.Load(), repeats.Load(), limited.Load())
	}
	if a := admit(t, l, "late", limitsT0, large); a.Limited != -1 {
		t.Fatalf("the shared cap of 11 after 7 admissions: %+v, want room for 4 more", a)
	}
}

func limitsNewest(t *testing.T, newLimits NewLimits) {
	ctx := context.Background()
	l := newLimits(t)
	ref := ledger.SubjectStream{Subject: "acct-1", Purpose: ledger.PurposePasswordReset, Channel: ledger.Email}
	if _, ok, err := l.Newest(ctx, ref); err != nil || ok {
		t.Fatalf("empty: ok=%v err=%v, want none", ok, err)
	}
	note := func(id string, issued, exp time.Duration) ledger.Challenge {
		t.Helper()
		c := ledger.Challenge{ID: id, IssuedAt: limitsT0.Add(issued), ExpiresAt: limitsT0.Add(exp)}
		if err := l.Note(ctx, ref, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	newest := func() ledger.Challenge {
		t.Helper()
		c, ok, err := l.Newest(ctx, ref)
		if err != nil || !ok {
			t.Fatalf("newest: ok=%v err=%v", ok, err)
		}
		return c
	}
	c2 := note("c2", 2*time.Minute, 20*time.Minute)
	note("c1", time.Minute, 15*time.Minute)   // older, arriving late
	note("c2", 2*time.Minute, 20*time.Minute) // repeated
	if got := newest(); got != c2 {
		t.Fatalf("newest = %+v, want %+v", got, c2)
	}
	// Issued later, expiring sooner: the newest is the one issued last,
	// whatever the expiries say (a far-future expiry shadows nothing).
	c3 := note("c3", 3*time.Minute, 10*time.Minute)
	note("far", 150*time.Second, 99*time.Hour)
	if got := newest(); got != c3 {
		t.Fatalf("newest = %+v, want %+v: ordered by issue time", got, c3)
	}
	// Issued in the same instant: the greater id, whatever the order.
	c5 := note("c5", 4*time.Minute, 10*time.Minute)
	note("c4", 4*time.Minute, 10*time.Minute)
	if got := newest(); got != c5 {
		t.Fatalf("newest = %+v, want %+v: a tie goes to the greater id", got, c5)
	}
	sms := ref
	sms.Channel = ledger.SMS
	if _, ok, _ := l.Newest(ctx, sms); ok {
		t.Fatal("the email stream's challenges leaked into the SMS stream")
	}
}

// limitsRelease: a message released gives its count back in every counter,
// once; releasing a message never counted changes nothing.
func limitsRelease(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	small := count(ledger.RuleDestination, "email#fp", 2, time.Hour)
	large := count(ledger.RuleSMSGlobal, "sms", 100, time.Hour)
	admit(t, l, "m1", limitsT0, small, large)
	admit(t, l, "m2", limitsT0, small, large)
	release(t, l, "m1", "m1", "never") // a repeated release, and one of a message never counted
	if a := admit(t, l, "m3", limitsT0.Add(time.Minute), small, large); a.Limited != -1 {
		t.Fatalf("m3 after m1's release: %+v, want admitted", a)
	}
	if a := admit(t, l, "m4", limitsT0.Add(time.Minute), small, large); a.Limited != 0 || a.Count != 2 {
		t.Fatalf("m4: %+v, want the small counter full at 2 (m2, m3): one release gave back one count", a)
	}
	only := count(ledger.RuleSMSGlobal, "sms-2", 100, time.Hour)
	admit(t, l, "m5", limitsT0, only)
	release(t, l, "m5", "m5")
	capped := count(ledger.RuleSMSGlobal, "sms-2", 1, time.Hour)
	if a := admit(t, l, "m6", limitsT0, capped); a.Limited != -1 {
		t.Fatalf("m6: %+v, want admitted: m5's count was given back once (a second release must not go below zero)", a)
	}
	if a := admit(t, l, "m5", limitsT0, capped); a.Limited != 0 || a.Repeat {
		t.Fatalf("m5 after its release: %+v, want counted afresh (and limited by m6): a released message holds nothing", a)
	}
}

func release(t *testing.T, l ledger.Limiter, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if err := l.Release(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
}

// limitsOnceAcrossWindows: a message admitted again in a later window (a
// redelivery after its first dispatch counted it and failed) is a repeat
// that names the time it was counted, and counts nothing in the new window.
func limitsOnceAcrossWindows(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	perMinute := count(ledger.RuleSubject, "acct-1", 1, time.Minute)
	roomy := count(ledger.RuleSMSGlobal, "sms", 100, time.Hour)
	admit(t, l, "old", limitsT0.Add(10*time.Second), perMinute, roomy)
	a := admit(t, l, "old", limitsT0.Add(70*time.Second), perMinute, roomy)
	if a.Limited != -1 || !a.Repeat || !a.CountedAt.Equal(limitsT0.Add(10*time.Second)) {
		t.Fatalf("old again in the next minute: %+v, want a repeat counted at %s", a, limitsT0.Add(10*time.Second))
	}
	// Counted in minute 1, old's repeat would hold minute 2's item too.
	if a := admit(t, l, "new", limitsT0.Add(125*time.Second), perMinute, roomy); a.Limited != -1 || a.Repeat {
		t.Fatalf("new in the third minute: %+v, want admitted: old's repeat counted nothing in the second", a)
	}
	if a := admit(t, l, "third", limitsT0.Add(130*time.Second), roomy); a.Limited != -1 {
		t.Fatalf("third: %+v", a)
	}
	// The roomy counter holds old, new and third: 3, not 4.
	tight := count(ledger.RuleSMSGlobal, "sms", 4, time.Hour)
	if a := admit(t, l, "fourth", limitsT0.Add(135*time.Second), tight); a.Limited != -1 {
		t.Fatalf("fourth under a cap of 4: %+v, want admitted (old counted once)", a)
	}
	if a := admit(t, l, "fifth", limitsT0.Add(135*time.Second), tight); a.Limited != 0 || a.Count != 4 {
		t.Fatalf("fifth under a cap of 4: %+v, want limited at 4", a)
	}
}

// limitsReleaseExact: a release takes back exactly the counters that
// counted the message, whenever it comes: the sequence of a reclaim after a
// repeat (an older email counted in minute 1, deferred, its newest sibling
// claimed in minute 3 when an SMS of the subject filled minute 3's
// counters).
func limitsReleaseExact(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	perMinute := count(ledger.RuleSubject, "acct-1", 1, time.Minute)
	admit(t, l, "old-email", limitsT0.Add(10*time.Second), perMinute)
	admit(t, l, "old-email", limitsT0.Add(125*time.Second), perMinute) // the redelivery: a repeat
	if a := admit(t, l, "sms", limitsT0.Add(130*time.Second), perMinute); a.Limited != -1 {
		t.Fatalf("sms in minute 3: %+v, want admitted", a)
	}
	release(t, l, "old-email") // superseded in minute 3
	if a := admit(t, l, "new-email", limitsT0.Add(135*time.Second), perMinute); a.Limited != 0 || a.Count != 1 {
		t.Fatalf("new email in minute 3 after old-email's release: %+v, want limited at 1: the release must take back minute 1's counts, not minute 3's", a)
	}
	if a := admit(t, l, "late", limitsT0.Add(20*time.Second), perMinute); a.Limited != -1 {
		t.Fatalf("minute 1 after the release: %+v, want admitted: old-email's counts there (minutes 1 and 2) were given back", a)
	}
	if a := admit(t, l, "later", limitsT0.Add(70*time.Second), perMinute); a.Limited != 0 {
		t.Fatalf("minute 2 after late's admission in minute 1: %+v, want limited: late counts there too", a)
	}
}

// limitsUnsentCount is the store's half of the rule for an unsent
// message's count (docs/design.md, "Counts are exact"): until it is
// released the message holds every counter it counted in (too high, never
// too low: the release of a message the counters refused, or never saw,
// takes nothing of it), and its release gives all of them back at once,
// not when their windows end. The simulator's unsent-count-given-back
// holds the domain's half: a dispatch that ends a counted row unsent
// releases it before it returns.
func limitsUnsentCount(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	one := count(ledger.RuleDestination, "email#fp-unsent", 1, time.Hour)
	roomy := count(ledger.RuleSMSGlobal, "sms-unsent", 100, time.Hour)
	admit(t, l, "unsent", limitsT0, one, roomy)
	if a := admit(t, l, "refused", limitsT0.Add(time.Second), one, roomy); a.Limited != 0 || a.Count != 1 {
		t.Fatalf("refused: %+v, want limited by the count the unsent message holds", a)
	}
	release(t, l, "refused", "never-counted")
	if a := admit(t, l, "next", limitsT0.Add(2*time.Second), one, roomy); a.Limited != 0 || a.Count != 1 {
		t.Fatalf("next after releases of a refused and an unknown message: %+v, want still limited at 1: they took the unsent message's count (too low)", a)
	}
	release(t, l, "unsent")
	if a := admit(t, l, "next", limitsT0.Add(3*time.Second), one, roomy); a.Limited != -1 || a.Repeat {
		t.Fatalf("next after the unsent message's release: %+v, want admitted: the release left its count (too high)", a)
	}
	tight := count(ledger.RuleSMSGlobal, "sms-unsent", 1, time.Hour)
	if a := admit(t, l, "last", limitsT0.Add(4*time.Second), tight); a.Limited != 0 || a.Count != 1 {
		t.Fatalf("last: %+v, want the second counter at exactly 1 (next): the unsent message's count gone from it too, the refused one's never there", a)
	}
}

// limitsRegions: the SMS country cap counts each region apart, the global
// SMS cap all of them together (a store may keep them in one item), and a
// release gives back in both. Regions US and CA are the ones a store may
// share an item for; FR stands for one it does not.
func limitsRegions(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	global := count(ledger.RuleSMSGlobal, "sms", 5, time.Hour)
	region := func(r string) ledger.Count { return count(ledger.RuleSMSCountryCap, r, 2, time.Hour) }
	sms := func(key, r string, at time.Duration) ledger.Admission {
		t.Helper()
		return admit(t, l, key, limitsT0.Add(at), region(r), global)
	}
	for i, r := range []string{"US", "US", "CA", "FR"} {
		if a := sms(fmt.Sprint("m", i), r, time.Duration(i)*time.Second); a.Limited != -1 || a.Repeat {
			t.Fatalf("m%d to %s: %+v, want admitted", i, r, a)
		}
	}
	if a := sms("us-3", "US", 10*time.Second); a.Limited != 0 || a.Count != 2 {
		t.Fatalf("a third SMS to US: %+v, want limited by its region's cap at 2", a)
	}
	if a := sms("ca-2", "CA", 11*time.Second); a.Limited != -1 {
		t.Fatalf("a second SMS to CA: %+v, want admitted: US's count is not CA's", a)
	}
	if a := sms("fr-2", "FR", 12*time.Second); a.Limited != 1 || a.Count != 5 {
		t.Fatalf("a second SMS to FR: %+v, want limited by the global cap at 5 (US 2, CA 2, FR 1)", a)
	}
	release(t, l, "m0")
	if a := sms("fr-2", "FR", 13*time.Second); a.Limited != -1 {
		t.Fatalf("FR after a US SMS's release: %+v, want admitted: the release gave back in the global cap", a)
	}
	if a := sms("us-4", "US", 14*time.Second); a.Limited != 1 || a.Count != 5 {
		t.Fatalf("US after the release: %+v, want its region's counter free (1 of 2) and the global one full at 5", a)
	}
	// Two windows later every counter has room again, and the repeat of
	// a message counted two hours ago counts nothing.
	if a := sms("m1", "US", 2*time.Hour); a.Limited != -1 || !a.Repeat {
		t.Fatalf("m1 two hours later: %+v, want a repeat", a)
	}
	for i := range 2 {
		if a := sms(fmt.Sprint("later-", i), "US", 2*time.Hour+time.Duration(i)*time.Second); a.Limited != -1 || a.Repeat {
			t.Fatalf("a US SMS two windows later: %+v, want admitted", a)
		}
	}
}

// limitsReleaseLate: a message counted hours ago, released now (a
// dispatch that ended it late), takes nothing from the counters of the
// windows counting now, however many windows rolled meanwhile, nor puts a
// count anywhere: the windows it counted in are read by no admission any
// more.
func limitsReleaseLate(t *testing.T, newLimits NewLimits) {
	l := newLimits(t)
	const window = 10 * time.Minute
	c := count(ledger.RuleDestination, "email#fp-late", 1, window)
	admit(t, l, "early", limitsT0, c)
	var last time.Time
	for i := range 20 { // one message every other window, for 400 minutes
		last = limitsT0.Add(time.Duration(2*i+2)*window + time.Minute)
		if a := admit(t, l, fmt.Sprint("m", i), last, c); a.Limited != -1 {
			t.Fatalf("m%d at %s: %+v, want admitted", i, last, a)
		}
	}
	release(t, l, "early")
	if a := admit(t, l, "after", last.Add(time.Minute), c); a.Limited != 0 || a.Count != 1 {
		t.Fatalf("a message just after the last one, after early's release: %+v, want limited at 1: the release took from today's counter", a)
	}
	if a := admit(t, l, "next", last.Add(2*window), c); a.Limited != -1 {
		t.Fatalf("two windows after the last one: %+v, want admitted: the release left a count behind", a)
	}
}
