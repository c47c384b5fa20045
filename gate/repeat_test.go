package gate

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Repeat subjects (issue 21, "supersession under a backlog"): a share of the
// burst's subjects ask three times, three challenges of one subject_ref on
// one channel, each expiring later than the one before and published a
// third of the channel's burst after it, so that the older ones still wait
// for their send slots when the newer is claimed. Only the newest may then
// be sent.
const (
	// defaultRepeats is SURGE_REPEATS: one subject in ten asks three times.
	defaultRepeats = 0.1
	repeatAsks     = 3
	// askSpacing is how much later each ask of a repeat subject expires
	// than the one before, whenever it is published.
	askSpacing = time.Minute
	// supersededPrefix is the reason of a row superseded by challenge <id>.
	supersededPrefix = "superseded by challenge "
)

// supersedeRace is how long after a newer challenge's claim (its row's
// CreatedAt) an older challenge's send may begin (its move to dispatching)
// and still count as decided before that claim. It is needed: dispatch's
// last read of the subject's newest challenge (before it admits the row,
// and again after an in-process wait for its send slot) precedes its
// dispatching write, and a claim notes its challenge as the newest after
// the time its row records; a second covers the calls between (the
// content read, the dispatching write) on a loaded machine. A send that
// began later was decided after the newer challenge was noted.
var supersedeRace = time.Second

// loadRepeats reads SURGE_REPEATS, the share of subjects that ask three
// times: 0.1 unless set, 0 when the limits are off (supersession is one).
func loadRepeats(t *testing.T, limits bool) float64 {
	t.Helper()
	v := os.Getenv("SURGE_REPEATS")
	if v == "" {
		if !limits {
			return 0
		}
		return defaultRepeats
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		t.Fatalf("SURGE_REPEATS=%q: want the share of subjects that ask three times, from 0 to 1", v)
	}
	if f > 0 && !limits {
		t.Fatalf("SURGE_REPEATS=%q with SURGE_LIMITS=off: supersession is one of the limits (SURGE_REPEATS=0 compares the limits' cost on the same traffic)", v)
	}
	return f
}

// planBurst lays out a burst of n intents: intent i is on email if i is
// even, SMS if odd, for challenge i/2, short-lived if the challenge is
// (every tenth), with a subject of its own. On each channel, a share
// repeats of the subjects asks three times instead: the asks of repeat
// subject j take the channel's intents j·⅓/subjects, that plus a third and
// plus two thirds of the channel's burst, long-lived. The backlog is then
// there by construction: the budget sends R a second per channel, and a
// third of the channel's burst is published and claimed far faster, so an
// older ask still waits for its slot when the newer is claimed unless it
// is among the first few of the burst (sent at once).
func planBurst(n int, repeats float64) []intentPlan {
	plans := make([]intentPlan, n)
	for i := range plans {
		ch := ledger.Email
		if i%2 == 1 {
			ch = ledger.SMS
		}
		plans[i] = intentPlan{Index: i, Challenge: i / 2, Channel: ch, Short: (i/2)%10 == 9,
			Subject: fmt.Sprintf("subject-%d:%s", i/2, ch)}
	}
	for parity, ch := range []ledger.Channel{ledger.Email, ledger.SMS} {
		m := (n - parity + 1) / 2 // the channel's intents: parity, parity+2, ...
		subjects, third := repeatSubjects(m, repeats), m/repeatAsks
		for j := range subjects {
			for k := range repeatAsks {
				pl := &plans[2*(j*third/subjects+k*third)+parity]
				pl.Subject, pl.Ask, pl.Short = fmt.Sprintf("repeat-%d:%s", j, ch), k+1, false
			}
		}
	}
	return plans
}

// repeatSubjects is how many of a channel's m intents' subjects ask three
// times when a share f of the subjects does: s·(1−f) + 3·s·f = m.
func repeatSubjects(m int, f float64) int {
	return int(f * float64(m) / (1 + 2*f))
}

// repeatFigures is what the repeat subjects showed.
type repeatFigures struct {
	Subjects, Intents int
	// Superseded counts older asks ended suppressed, superseded by a newer
	// ask of their subject.
	Superseded int
	// OlderSent counts older asks whose send began before a newer ask's
	// claim; InRace those whose send began after it, but within
	// supersedeRace (the latest MaxLag after it): the check cannot tell
	// these from sends decided after the claim, so it counts them.
	OlderSent, InRace int
	MaxLag            time.Duration
	// SentWaiting counts older asks sent although they still waited when
	// a newer ask was claimed: each is a violation.
	SentWaiting int
	// Held counts the older SMS asks the provider held back (olderHold);
	// HeldThrottled how many 429 answers it gave them, HeldSuperseded how
	// many of them ended superseded.
	Held, HeldThrottled, HeldSuperseded int
	// NewestSent counts newest asks accepted with one provider acceptance.
	NewestSent int
	Violations []string
}

func (f *repeatFigures) violate(format string, a ...any) {
	if len(f.Violations) < 20 {
		f.Violations = append(f.Violations, fmt.Sprintf(format, a...))
	}
}

// analyzeRepeats checks supersession from the ledger rows and what the
// providers took (sends, by key). For every repeat subject, its newest ask
// must be accepted and taken once: it is long-lived, counted at most three
// times against the subject cap (10 an hour) and has its own address, so no
// limit stops it, and nothing newer supersedes it. Every older ask must
// have been sent before a newer ask's claim (supersedeRace), or have ended
// superseded by a newer ask of its subject and never been taken. No row of
// a subject that asked once may end superseded.
func analyzeRepeats(plans []intentPlan, rows map[string]ledger.Entry, sends map[string][]time.Time) repeatFigures {
	var f repeatFigures
	asks := map[string][]intentPlan{}
	for _, pl := range plans {
		if pl.Ask > 0 {
			asks[pl.Subject] = append(asks[pl.Subject], pl)
			continue
		}
		if e, ok := rows[pl.Key]; ok && supersededBy(e) != "" {
			f.violate("%s: %q, but its subject %s asked once", e.Key, e.Reason, pl.Subject)
		}
	}
	f.Subjects = len(asks)
	for _, subject := range slices.Sorted(maps.Keys(asks)) {
		group := asks[subject]
		slices.SortFunc(group, func(a, b intentPlan) int { return a.Ask - b.Ask })
		f.Intents += len(group)
		for k, pl := range group {
			e, ok := rows[pl.Key]
			if !ok {
				continue // reported as missing
			}
			if k == len(group)-1 {
				f.checkNewest(e, subject, len(sends[pl.Key]))
				continue
			}
			f.checkOlder(e, subject, group[k+1:], rows, len(sends[pl.Key]))
		}
	}
	return f
}

func (f *repeatFigures) checkNewest(e ledger.Entry, subject string, taken int) {
	if e.State != ledger.Accepted || taken != 1 {
		f.violate("%s: newest challenge of %s ended %s (%q), the provider took it %d time(s): want accepted, taken once", e.Key, subject, e.State, e.Reason, taken)
		return
	}
	f.NewestSent++
}

// checkOlder checks the older ask e of subject against its newer asks.
func (f *repeatFigures) checkOlder(e ledger.Entry, subject string, newer []intentPlan, rows map[string]ledger.Entry, taken int) {
	var claimed time.Time // the first claim of a newer ask
	ids := map[string]bool{}
	for _, pl := range newer {
		ids[pl.ChallengeID] = true
		if n, ok := rows[pl.Key]; ok && (claimed.IsZero() || n.CreatedAt.Before(claimed)) {
			claimed = n.CreatedAt
		}
	}
	if by := supersededBy(e); by != "" {
		switch {
		case !ids[by]:
			f.violate("%s: %q, not a newer challenge of %s", e.Key, e.Reason, subject)
		case taken > 0:
			f.violate("%s: superseded, but the provider took it %d time(s)", e.Key, taken)
		default:
			f.Superseded++
		}
		return
	}
	began, ok := takenDispatching(e)
	if e.State != ledger.Accepted || !ok {
		f.violate("%s: older challenge of %s ended %s (%q): want sent, or superseded", e.Key, subject, e.State, e.Reason)
		return
	}
	if claimed.IsZero() {
		return // the newer rows are missing, reported as such
	}
	lag := began.Sub(claimed)
	if lag > supersedeRace {
		f.SentWaiting++
		f.violate("%s: sent, but it was still waiting when a newer challenge of %s was claimed: its send began %s after that claim (allowed %s)",
			e.Key, subject, lag.Round(time.Millisecond), supersedeRace)
		return
	}
	if lag <= 0 {
		f.OlderSent++
		return
	}
	f.InRace++
	f.MaxLag = max(f.MaxLag, lag)
}

// supersededBy returns the challenge that superseded e, or "".
func supersededBy(e ledger.Entry) string {
	if rule, ok := ledger.LimitRule(e); !ok || rule != ledger.RuleSuperseded {
		return ""
	}
	by, _ := strings.CutPrefix(e.Reason, supersededPrefix)
	return by
}

// takenDispatching returns when e last moved to dispatching: the attempt
// the provider took. An earlier attempt the provider answered with a
// definite not sent (a 429) left nothing at the provider, so an older ask
// throttled before a newer claim and sent after it is judged by the send
// that reached the player.
func takenDispatching(e ledger.Entry) (time.Time, bool) {
	for i := len(e.History) - 1; i >= 0; i-- {
		if ev := e.History[i]; ev.To == ledger.Dispatching {
			return ev.At, true
		}
	}
	return time.Time{}, false
}

// holdSlack is how long after a subject's newest ask is published the
// provider keeps answering 429 to its held older asks: long enough for the
// newest to be claimed (and noted as the subject's newest) first.
const holdSlack = 2 * time.Second

// olderHold throttles, at the SMS provider, the older asks of every other
// SMS repeat subject until holdSlack after its newest ask was published:
// the player asked again while the provider refused the earlier sends. A
// 429 leaves nothing at the provider, so when the throttle lifts only the
// newest ask may be sent; the older ones end superseded at their next
// wake-up. So that every held subject shows it, whatever the machine's
// pace, its newest ask is published only after the provider refused one of
// its older asks (waitRefused).
type olderHold struct {
	mu        sync.Mutex
	held      map[string]string        // dedupe key → subject
	newest    map[string]time.Time     // subject → when its newest ask was published
	refused   map[string]chan struct{} // subject → closed at its first 429
	throttled int
}

// holds reports whether pl's subject is one the provider holds back.
func (h *olderHold) holds(pl intentPlan) bool {
	if pl.Ask == 0 || pl.Channel != ledger.SMS {
		return false
	}
	var j int
	_, err := fmt.Sscanf(pl.Subject, "repeat-%d:", &j)
	return err == nil && j%2 == 0
}

// refusal returns the channel closed when subject's first older ask is
// refused; h.mu must be held.
func (h *olderHold) refusal(subject string) chan struct{} {
	if h.held == nil {
		h.held, h.newest, h.refused = map[string]string{}, map[string]time.Time{}, map[string]chan struct{}{}
	}
	c, ok := h.refused[subject]
	if !ok {
		c = make(chan struct{})
		h.refused[subject] = c
	}
	return c
}

// publishing records pl, about to be published: an older ask of a held
// subject is held; a newest ask's time starts its subject's release.
func (h *olderHold) publishing(pl intentPlan, published bool) {
	if !h.holds(pl) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refusal(pl.Subject)
	switch {
	case pl.Ask < repeatAsks && !published:
		h.held[pl.Key] = pl.Subject
	case pl.Ask == repeatAsks && published:
		h.newest[pl.Subject] = time.Now()
	}
}

// waitRefused reports whether pl is a held subject's newest ask, and if so
// waits until the provider refused one of its older asks, or until limit:
// the older ask is then throttled before the newest is claimed.
func (h *olderHold) waitRefused(ctx context.Context, pl intentPlan, limit time.Duration) bool {
	if !h.holds(pl) || pl.Ask != repeatAsks {
		return false
	}
	h.mu.Lock()
	c := h.refusal(pl.Subject)
	h.mu.Unlock()
	select {
	case <-c:
	case <-time.After(limit):
	case <-ctx.Done():
	}
	return true
}

// wrap answers 429 to a held older ask until its subject's newest ask was
// published holdSlack ago; everything else goes to next.
func (h *olderHold) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		h.mu.Lock()
		subject, held := h.held[key]
		at, newer := h.newest[subject]
		hold := r.Method == http.MethodPost && held && (!newer || time.Since(at) < holdSlack)
		if hold {
			h.throttled++
			if c := h.refusal(subject); !newer {
				select {
				case <-c:
				default:
					close(c)
				}
			}
		}
		h.mu.Unlock()
		if hold {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"error":"rate limit exceeded for this number"}`))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// figures adds what the hold did to f: how many asks it held, how many
// 429s it gave, and how many held asks ended superseded.
func (h *olderHold) figures(f *repeatFigures, rows map[string]ledger.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f.Held, f.HeldThrottled = len(h.held), h.throttled
	for key := range h.held {
		if supersededBy(rows[key]) != "" {
			f.HeldSuperseded++
		}
	}
}

// bookedSlot reports whether e waited for a send-rate slot it booked.
func bookedSlot(e ledger.Entry) bool {
	return slices.ContainsFunc(e.History, func(ev ledger.Event) bool {
		return ev.To == ledger.Deferred && ev.Code == ledger.BudgetCode
	})
}

// check fails t for every repeat subject supersession got wrong, and, in a
// burst, when none of their older asks was superseded: then no backlog held
// them (or supersession did not act), and the run proved nothing about it.
// At a quiet pace an older ask is usually sent before a newer one arrives.
func (f repeatFigures) check(t *testing.T, burst bool) {
	t.Helper()
	for _, v := range f.Violations {
		t.Errorf("supersession: %s", v)
	}
	if burst && f.Subjects > 0 && f.Superseded == 0 {
		t.Errorf("supersession: none of the %d repeat subjects' older challenges was superseded: either none was still waiting when a newer one was claimed (no backlog; a larger SURGE_INTENTS makes one) or supersession did not act; the run proved nothing", f.Subjects)
	}
	if burst && f.Held > 0 && (f.HeldThrottled == 0 || f.HeldSuperseded == 0) {
		t.Errorf("supersession: the provider held %d older SMS asks back with %d 429s and %d of them ended superseded: no older ask was throttled before its newest was claimed and superseded after, so the run proved nothing about throttled older challenges", f.Held, f.HeldThrottled, f.HeldSuperseded)
	}
}

// printRepeats prints the repeat subjects' rows of the report.
func (r *report) printRepeats(row func(string, any)) {
	f := r.Repeats
	row("repeat subjects (asking 3 times; SURGE_REPEATS)", fmt.Sprintf("%d (%d intents; share %g of the subjects)", f.Subjects, f.Intents, r.Cfg.Repeats))
	row("  newest asks accepted, taken once", f.NewestSent)
	row("  older asks superseded (rows superseded in all)", fmt.Sprintf("%d (%d)", f.Superseded, r.Superseded))
	row("  older asks sent before a newer ask's claim", f.OlderSent)
	row(fmt.Sprintf("  older asks sent after it, within %s (the race)", supersedeRace), fmt.Sprintf("%d (latest %s after)", f.InRace, f.MaxLag.Round(time.Millisecond)))
	row("  older asks sent though waiting at a newer claim (must be 0)", f.SentWaiting)
	row("  older SMS asks the provider throttled until the newest (429s; superseded)", fmt.Sprintf("%d (%d; %d)", f.Held, f.HeldThrottled, f.HeldSuperseded))
}

func TestPlanBurst(t *testing.T) {
	for _, c := range []struct {
		n        int
		repeats  float64
		subjects int
	}{{1000, 0.1, 2 * 41}, {300, 0.1, 2 * 12}, {21, 0.1, 0}, {1000, 0, 0}, {999, 1, 166 + 166}} {
		plans := planBurst(c.n, c.repeats)
		if len(plans) != c.n {
			t.Fatalf("n=%d: %d intents planned", c.n, len(plans))
		}
		asks := map[string][]intentPlan{}
		for _, pl := range plans {
			if pl.Ask > 0 {
				asks[pl.Subject] = append(asks[pl.Subject], pl)
			}
		}
		if len(asks) != c.subjects {
			t.Errorf("n=%d repeats=%g: %d repeat subjects, want %d", c.n, c.repeats, len(asks), c.subjects)
		}
		for subject, group := range asks {
			if len(group) != repeatAsks {
				t.Errorf("n=%d: %s asks %d times", c.n, subject, len(group))
				continue
			}
			for k, pl := range group {
				if pl.Ask != k+1 || pl.Short || pl.Channel != group[0].Channel || k > 0 && pl.Index-group[k-1].Index < c.n/4 {
					t.Errorf("n=%d: %s ask %d is %+v, after %+v", c.n, subject, k+1, pl, group[max(k-1, 0)])
				}
			}
		}
	}
}

// TestAnalyzeRepeats feeds analyzeRepeats one repeat subject's rows: an
// older ask sent before the newer claims, one superseded, the newest sent.
// Each case breaks one of them.
func TestAnalyzeRepeats(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	plans := []intentPlan{
		{Index: 0, Subject: "repeat-0:email", Ask: 1, ChallengeID: "chal-1", Key: "k1"},
		{Index: 1, Subject: "repeat-0:email", Ask: 2, ChallengeID: "chal-2", Key: "k2"},
		{Index: 2, Subject: "repeat-0:email", Ask: 3, ChallengeID: "chal-3", Key: "k3"},
		{Index: 3, Subject: "subject-3:email", ChallengeID: "chal-4", Key: "k4"},
	}
	sent := func(key string, created, dispatching time.Duration) ledger.Entry {
		return ledger.Entry{Key: key, State: ledger.Accepted, CreatedAt: t0.Add(created), History: []ledger.Event{
			{To: ledger.Claimed, At: t0.Add(created)}, {To: ledger.Dispatching, At: t0.Add(dispatching)}, {To: ledger.Accepted}}}
	}
	superseded := func(key string, created time.Duration, by string) ledger.Entry {
		return ledger.Entry{Key: key, State: ledger.Suppressed, CreatedAt: t0.Add(created), Reason: supersededPrefix + by}
	}
	good := func() (map[string]ledger.Entry, map[string][]time.Time) {
		return map[string]ledger.Entry{
				"k1": sent("k1", 0, time.Second), "k2": superseded("k2", 2*time.Second, "chal-3"),
				"k3": sent("k3", 3*time.Second, 40*time.Second), "k4": sent("k4", 0, 5*time.Second),
			}, map[string][]time.Time{
				"k1": {t0.Add(time.Second)}, "k3": {t0.Add(40 * time.Second)}, "k4": {t0.Add(5 * time.Second)},
			}
	}
	for _, c := range []struct {
		name   string
		mutate func(map[string]ledger.Entry, map[string][]time.Time)
		want   string
	}{
		{"as it should be", func(map[string]ledger.Entry, map[string][]time.Time) {}, ""},
		{"older sent while waiting", func(rows map[string]ledger.Entry, sends map[string][]time.Time) {
			rows["k2"], sends["k2"] = sent("k2", 2*time.Second, 30*time.Second), []time.Time{t0.Add(30 * time.Second)}
		}, "k2: sent, but it was still waiting"},
		{"older throttled before the newer claim, sent after it", func(rows map[string]ledger.Entry, sends map[string][]time.Time) {
			e := sent("k2", 2*time.Second, time.Second)
			e.History = []ledger.Event{e.History[0], e.History[1], {To: ledger.Deferred, Code: "HTTP 429"}, {To: ledger.Dispatching, At: t0.Add(30 * time.Second)}, {To: ledger.Accepted}}
			rows["k2"], sends["k2"] = e, []time.Time{t0.Add(30 * time.Second)}
		}, "k2: sent, but it was still waiting"},
		{"older sent within the race", func(rows map[string]ledger.Entry, sends map[string][]time.Time) {
			rows["k2"], sends["k2"] = sent("k2", 2*time.Second, 3500*time.Millisecond), []time.Time{t0.Add(3500 * time.Millisecond)}
		}, ""},
		{"superseded by an older one", func(rows map[string]ledger.Entry, _ map[string][]time.Time) {
			rows["k2"] = superseded("k2", 2*time.Second, "chal-1")
		}, "not a newer challenge"},
		{"newest superseded", func(rows map[string]ledger.Entry, sends map[string][]time.Time) {
			rows["k3"], sends["k3"] = superseded("k3", 3*time.Second, "chal-2"), nil
		}, "k3: newest challenge"},
		{"newest sent twice", func(_ map[string]ledger.Entry, sends map[string][]time.Time) {
			sends["k3"] = append(sends["k3"], t0.Add(41*time.Second))
		}, "took it 2 time(s)"},
		{"a subject that asked once superseded", func(rows map[string]ledger.Entry, sends map[string][]time.Time) {
			rows["k4"], sends["k4"] = superseded("k4", 0, "chal-3"), nil
		}, "asked once"},
	} {
		rows, sends := good()
		c.mutate(rows, sends)
		f := analyzeRepeats(plans, rows, sends)
		got := strings.Join(f.Violations, "\n")
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s: violations %q, want one with %q", c.name, got, c.want)
		}
	}
	rows, sends := good()
	f := analyzeRepeats(plans, rows, sends)
	if f.Subjects != 1 || f.Superseded != 1 || f.OlderSent != 1 || f.InRace != 0 || f.SentWaiting != 0 || f.NewestSent != 1 {
		t.Errorf("figures %+v: want 1 subject, 1 superseded, 1 older sent before, 1 newest sent", f)
	}
}
