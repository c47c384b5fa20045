package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The send limits in the simulated world: a limit policy with small caps and
// short windows (so that they bind often), subjects and addresses shared by
// several challenges (bombing one mailbox, one account asking again and
// again), SMS numbers of several regions and one the region lookup cannot
// place, and the counters and newest challenges in a store (memstore.Limits)
// behind ports that park and fail like the other stores'.

// Choices offered to the draws of the limits; index 0 is where shrinking goes.
var (
	capMaxes   = []int{1, 2, 3}
	capWindows = []time.Duration{time.Minute, 10 * time.Minute}
	arrivals   = []time.Duration{0, 30 * time.Second, 90 * time.Second}
	emails     = []string{"player1@example.test", "player2@example.test"}
	// numbers are SMS destinations: three in the US, one in GB, one in FR,
	// one in an international range that belongs to no region, and a GB
	// premium-rate number (SMS pumping inside an allowed country).
	numbers = []string{"+15550000001", "+15550000002", "+15550000003", "+447700900001", "+33612345001", "+88299000001", "+449012345001"}
	// kindLists are the number-kind allow-lists: off, or the default.
	kindLists = [][]string{nil, {"fixed_line_or_mobile", "mobile"}}
	subjects  = []string{"", "subj-000001", "subj-000001", "subj-000002"}
	allowList = [][]string{nil, {"US", "GB", "FR"}, {"US"}}
)

// regionPrefixes is the world's numbering plan: what the phone-number library
// answers for its numbers.
var regionPrefixes = []struct{ prefix, region string }{{"+1", "US"}, {"+44", "GB"}, {"+33", "FR"}}

// regionOf is the region of a world number; false when it has none.
func regionOf(number string) (string, bool) {
	for _, p := range regionPrefixes {
		if strings.HasPrefix(number, p.prefix) {
			return p.region, true
		}
	}
	return "", false
}

var errNoRegion = errors.New("sim: number belongs to no region")

// kindOf is the kind of a world number that has a region, as the
// phone-number library's metadata classifies it.
func kindOf(number string) string {
	switch {
	case strings.HasPrefix(number, "+4490"):
		return "premium_rate"
	case strings.HasPrefix(number, "+1"):
		return "fixed_line_or_mobile"
	}
	return "mobile"
}

// fingerprintKey is the world's fingerprint key (the stack's HMAC key).
var fingerprintKey = []byte("sim-fingerprint-key")

// drawLimits draws the send-limit policy: off in half the worlds.
func (w *world) drawLimits(c chooser) {
	if !c.coin(1, "send limits") {
		return
	}
	// The destination and subject caps are off one time in two, so that
	// the SMS caps behind them in the order of checks bind often too.
	draw := func(label string, offOdds, maxes int) ledger.Cap {
		if c.coin(offOdds, label+" off") {
			return ledger.Cap{}
		}
		return ledger.Cap{Max: capMaxes[c.pick(maxes, label)], Window: capWindows[c.pick(len(capWindows), label+" window")]}
	}
	l := ledger.Limits{Destination: draw("destination cap", 1, 3), Subject: draw("subject cap", 1, 3),
		SMSCountryCap: draw("sms country cap", 2, 2), SMSGlobal: draw("sms global cap", 2, 3), Supersede: !c.coin(3, "no supersession")}
	if codes := allowList[c.pick(len(allowList), "allow-list")]; codes != nil {
		w.allowed = map[string]bool{}
		for _, r := range codes {
			w.allowed[r] = true
		}
		l.SMSCountries = func(r string) bool { return w.allowed[r] }
	}
	if kinds := kindLists[c.pick(len(kindLists), "number kinds")]; kinds != nil {
		w.kinds = kinds
		l.SMSNumberKinds = func(k string) bool { return slices.Contains(kinds, k) }
	}
	w.sendLimits = l
	w.asksAgain = c.coin(2, "asks again")
}

// askAgainEvery is how long after each other the challenges of a world that
// asks again arrive: the older one is counted and waiting for its slot.
const askAgainEvery = 3 * time.Second

// fingerprintSecret adds the fingerprint of an address the destination
// limit counts to the secrets, once: it must stay in the counters' keys.
func (w *world) fingerprintSecret(ch ledger.Channel, addr string) {
	fp, _ := (&fingerprint.Local{Key: fingerprintKey}).Fingerprint(context.Background(), ch, addr)
	if w.sendLimits.Destination.On() && !slices.Contains(w.secrets, fp) {
		w.secrets = append(w.secrets, fp)
	}
}

// drawParties draws the subject, the addresses and the arrival of ch. With
// the limits off, each challenge has an account and addresses of its own,
// arriving at once, as before the limits.
func (w *world) drawParties(c chooser, ch *challenge) {
	ch.to = map[ledger.Channel]string{}
	for _, chn := range ledger.Channels {
		ch.to[chn] = ledgertest.Message(ch.n, chn).To
	}
	if !w.limitsOn() {
		return
	}
	if w.asksAgain {
		// One player asking again and again, seconds apart, while a slow
		// budget keeps the older challenges counted and waiting.
		ch.subject, ch.to[ledger.Email], ch.to[ledger.SMS] = subjects[1], emails[0], numbers[0]
		ch.arrival = time.Duration(ch.n-1) * askAgainEvery
		for _, chn := range ch.channels {
			w.fingerprintSecret(chn, ch.to[chn])
		}
		return
	}
	ch.subject = subjects[c.pick(len(subjects), "subject")]
	ch.to[ledger.Email] = emails[c.pick(len(emails), "email address")]
	ch.to[ledger.SMS] = numbers[c.pick(len(numbers), "sms number")]
	ch.arrival = arrivals[c.pick(len(arrivals), "arrival")]
	for _, chn := range ch.channels {
		w.fingerprintSecret(chn, ch.to[chn])
	}
}

func (w *world) limitsOn() bool {
	l := w.sendLimits
	return l.Destination.On() || l.Subject.On() || l.SMSCountryCap.On() || l.SMSGlobal.On() || l.SMSCountries != nil || l.SMSNumberKinds != nil || l.Supersede
}

func (ch *challenge) describeParties() string {
	if ch.subject == "" && ch.arrival == 0 {
		return ""
	}
	return fmt.Sprintf(", subject %q, arrives +%s", ch.subject, ch.arrival)
}

func (w *world) describeLimits() string {
	l := w.sendLimits
	if !w.limitsOn() {
		return "send limits off"
	}
	var codes []string
	for r := range w.allowed {
		codes = append(codes, r)
	}
	slices.Sort(codes)
	return fmt.Sprintf("send limits: destination %s, subject %s, SMS allow-list %v, SMS kinds %v, SMS country %s, SMS global %s, supersede %t",
		l.Destination, l.Subject, codes, w.kinds, l.SMSCountryCap, l.SMSGlobal, l.Supersede)
}

// numberPort is the phone-number library: the region and kind of a number.
func (s *sim) numberPort(number string) (ledger.PhoneNumber, error) {
	if r, ok := regionOf(number); ok && s.mutant == KindAsMobile {
		return ledger.PhoneNumber{Region: r, Kind: "mobile"}, nil
	} else if ok {
		return ledger.PhoneNumber{Region: r, Kind: kindOf(number)}, nil
	}
	if s.mutant == RegionDefaultUS {
		return ledger.PhoneNumber{Region: "US", Kind: "fixed_line_or_mobile"}, nil
	}
	return ledger.PhoneNumber{}, errNoRegion
}

// limiterPort is the limits table's counters as seen from one invocation.
type limiterPort struct{ inv *invocation }

func (p *limiterPort) Admit(ctx context.Context, key string, counts []ledger.Count, now, until time.Time) (ledger.Admission, error) {
	s, inv := p.inv.sim, p.inv
	r := inv.yield(&call{op: opAdmit, key: key, detail: fmt.Sprintf("%d counters", len(counts))})
	if r.fault == failCall {
		return ledger.Admission{}, injected("admit", key)
	}
	a, err := s.admit(ctx, inv, key, counts, now, until)
	switch r.fault {
	case lostResponse:
		return ledger.Admission{}, lost("admit", key)
	case crashAfter:
		inv.crash()
	}
	inv.answerLate(key, false)
	return a, err
}

// Release gives an unsent message's count back. It is not a point the
// schedule interleaves or faults: a release that fails leaves a count too
// high, which no invariant of the world can mistake for a send. What it
// takes back is judged against the world's own bookkeeping: only counters
// that counted the message may lose one, each at most once, and once the
// release answers, the message counts in none of them.
func (p *limiterPort) Release(ctx context.Context, key string) error {
	s := p.inv.sim
	if s.mutant == ReleaseNoOp && p.inv.fn == fnDispatch {
		return nil // the wrapper's Release: nothing reaches the counters
	}
	before := s.limiter.Counters()
	err := s.limiter.Release(ctx, key)
	if s.mutant == ReleaseInReleaseWindows {
		s.releaseInWindowsOf(key, before, p.inv.clock())
	}
	after := s.limiter.Counters()
	for id, n := range after {
		if d := before[id] - n; d > 0 && s.on(ClassCaps) && len(s.providers[s.w.rows[key].channel].msgs[key]) > 0 {
			s.fail(invSentUncounted, fmt.Sprintf("%s's release of %s took %d from counter %s, though the provider took the message (%s)",
				p.inv, s.label(key), d, s.counterName(id), s.providers[s.w.rows[key].channel].msgs[key][0].ack), key)
		}
		if d := before[id] - n; s.on(ClassConserved) && (d > 1 || d == 1 && !s.countedIn[id][key]) {
			s.fail(invCountsConserved, fmt.Sprintf("%s's release of %s took %d from counter %s, where it counted %d (its admission counted it in %s)",
				p.inv, s.label(key), d, s.counterName(id), b2i(s.countedIn[id][key]), s.counterNames(s.countersOf(key))), key)
		}
	}
	if err != nil {
		s.checkConserved(key)
		return err
	}
	for _, id := range s.countersOf(key) {
		delete(s.countedIn[id], key)
		if after[id] < before[id] {
			s.stats.Paths[pathRelease]++
		}
	}
	s.checkConserved(key)
	return nil
}

// counterName renders the counter id (ledger.CounterID) for a report: its
// rule, its key (a destination's fingerprint as "fingerprint …": it
// stays in the counters) and its window, relative to the epoch.
func (s *sim) counterName(id string) string {
	rule, rest, _ := strings.Cut(id, "#")
	i := strings.LastIndexByte(rest, '#')
	if i < 0 {
		return id
	}
	key, unix := rest[:i], rest[i+1:]
	if ch, fp, ok := strings.Cut(key, "#"); ok && fp != "" {
		key = ch + " fingerprint " + fp[:min(4, len(fp))] + "…"
	}
	var sec int64
	fmt.Sscan(unix, &sec)
	return fmt.Sprintf("%s[%s, window from %s]", rule, key, s.rel(time.Unix(sec, 0)))
}

func (s *sim) counterNames(ids []string) string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = s.counterName(id)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// countersOf lists, in order, the counters the world saw count key.
func (s *sim) countersOf(key string) []string {
	var ids []string
	for id, keys := range s.countedIn {
		if keys[key] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// releaseInWindowsOf turns the release of key that just landed into the
// mutant's: each counter its admission counted in (before holds the
// counters before the release) keeps its count, and the counter of the same
// rule and key in the window containing at loses one, if it holds any (the
// old adapter's guard).
func (s *sim) releaseInWindowsOf(key string, before map[string]int, at time.Time) {
	for id, n := range s.limiter.Counters() {
		if before[id]-n != 1 {
			continue
		}
		rule, rest, _ := strings.Cut(id, "#")
		i := strings.LastIndexByte(rest, '#')
		c := s.capOf(ledger.Rule(rule))
		if i < 0 || !c.On() {
			continue
		}
		now := fmt.Sprintf("%s#%s#%d", rule, rest[:i], ledger.WindowStart(c, at).Unix())
		if now == id {
			continue
		}
		s.limiter.Add(id, 1)
		if s.limiter.Counter(now) > 0 {
			s.limiter.Add(now, -1)
		}
	}
}

// checkConserved judges every counter against the world's bookkeeping:
// each holds exactly the messages it counted minus those given back. It
// runs at every admission and release, and after every step (key names the
// message a call concerned, or is empty).
func (s *sim) checkConserved(key string) {
	if !s.on(ClassConserved) {
		return
	}
	cs := s.limiter.Counters()
	ids := slices.Sorted(maps.Keys(cs))
	for _, id := range ids {
		if n := cs[id]; n != len(s.countedIn[id]) {
			var keys []string
			if key != "" {
				keys = append(keys, key)
			}
			s.fail(invCountsConserved, fmt.Sprintf("counter %s holds %d, but the world counts %d messages in it (counted and not given back)", s.counterName(id), n, len(s.countedIn[id])), keys...)
			return
		}
	}
}

// admit is the counters' Admit for inv, with the mutant's slip, and what
// the world sees of it: which counters the call raised (read from the
// store before and after, whatever the counts named), and for which
// message.
func (s *sim) admit(ctx context.Context, inv *invocation, key string, counts []ledger.Count, now, until time.Time) (ledger.Admission, error) {
	before := s.limiter.Counters()
	storeKey, cs := key, counts
	switch s.mutant {
	case LimitCapOffByOne:
		cs = slices.Clone(counts)
		for i := range cs {
			cs[i].Cap.Max++
		}
	case CounterWithoutKey:
		cs = slices.Clone(counts)
		for i := range cs {
			cs[i].Key = ""
		}
	case LimitCountsAgain:
		storeKey = key + "#" + string(inv.worker)
	}
	a, err := s.limiter.Admit(ctx, storeKey, cs, now, until)
	if err == nil && a.Limited >= 0 && a.Limited < len(cs) {
		s.refused(key, ledger.CounterID(cs[a.Limited], now))
	}
	if s.mutant == LimitFullAsRepeat && err == nil && a.Limited >= 0 {
		a = ledger.Admission{Limited: -1, Repeat: true}
	}
	if s.mutant == LimitIndexByItem && err == nil && a.Limited >= 0 {
		a.Limited++ // the counted marker is item 0 of the transaction
	}
	if _, ok := s.admittedAt[key]; ok {
		s.stats.Paths[pathRepeatAdmission]++
	}
	after := s.limiter.Counters()
	for _, id := range slices.Sorted(maps.Keys(after)) {
		if after[id] <= before[id] {
			continue
		}
		if s.countedIn[id] == nil {
			s.countedIn[id] = map[string]bool{}
		}
		if s.countedIn[id][key] {
			s.fail(invCountedTwice, fmt.Sprintf("%s's admission of %s counted it again in counter %s: it holds %d, for %d messages",
				inv, s.label(key), s.counterName(id), after[id], len(s.countedIn[id])), key)
		}
		s.countedIn[id][key] = true
		s.lastAdmit[key] = admitFact{inv: inv, step: s.step}
		if _, ok := s.admittedAt[key]; !ok {
			s.admittedAt[key] = now
		}
	}
	s.checkConserved(key)
	return a, err
}

// refused records the older challenges of key's stream that the full
// counter id holds and that are reclaimable now: counted and unsent
// (claimed or deferred, no attempt).
func (s *sim) refused(key, id string) {
	self, ok := s.peek(key)
	if !ok {
		return
	}
	var holders []string
	for h := range s.countedIn[id] {
		o, ok := s.peek(h)
		if ok && h != key && o.SubjectRef == self.SubjectRef && o.Identity.Channel == self.Identity.Channel &&
			s.markOf(s.w.challenge(self.Identity.ChallengeID), self.Identity.Channel).Newer(s.markOf(s.w.challenge(o.Identity.ChallengeID), o.Identity.Channel)) &&
			!s.unordered(s.w.challenge(self.Identity.ChallengeID), s.w.challenge(o.Identity.ChallengeID), self.Identity.Channel) && o.Attempts == 0 &&
			(o.State == ledger.Claimed || o.State == ledger.Deferred) {
			holders = append(holders, h)
		}
	}
	slices.Sort(holders)
	s.refusals[key] = holders
}

// checkStarved judges a write that ended a row limited or superseded: a
// newest challenge is never limited by a counter that older challenges of
// its own stream filled while they waited, when those end superseded by it
// (the reclaim supersedes them and gives their counts back first).
func (s *sim) checkStarved(w writeFact) {
	a := w.after
	if a.State != ledger.Limited && a.State != ledger.Suppressed {
		return
	}
	limited, holder := a.Key, ""
	if a.State == ledger.Suppressed {
		holder = a.Key
		newer := strings.TrimPrefix(a.Reason, "superseded by challenge ")
		if newer == a.Reason {
			return
		}
		limited = ledger.Identity{Purpose: a.Identity.Purpose, ChallengeID: newer, Channel: a.Identity.Channel}.Key()
	}
	l, ok := s.peek(limited)
	if !ok || l.State != ledger.Limited {
		return
	}
	for _, h := range s.refusals[limited] {
		o, _ := s.peek(h)
		if (holder == "" || holder == h) && o.State == ledger.Suppressed && o.Reason == "superseded by challenge "+l.Identity.ChallengeID {
			s.fail(invStarved, fmt.Sprintf("%s ended limited (%s) by a counter that %s filled while it waited; %s then ended superseded by it, and neither was sent",
				s.label(limited), l.Reason, s.label(h), s.label(h)), limited, h)
			return
		}
	}
}

// challengesPort is the limits table's newest challenges as seen from one
// invocation.
type challengesPort struct{ inv *invocation }

func (p *challengesPort) Note(ctx context.Context, ref ledger.SubjectStream, c ledger.Challenge) error {
	s, inv := p.inv.sim, p.inv
	r := inv.yield(&call{op: opNote, detail: fmt.Sprintf("%s %s newest %s", ref.Subject, ref.Channel, c.ID)})
	if r.fault == failCall {
		return injected("note", c.ID)
	}
	if s.mutant == SupersedeLastNoted {
		// The write without its condition on the later issue time: the
		// last challenge noted wins.
		s.lastNoted[ref] = c
	}
	err := s.limiter.Note(ctx, ref, c)
	switch r.fault {
	case lostResponse:
		return lost("note", c.ID)
	case crashAfter:
		inv.crash()
	}
	return err
}

func (p *challengesPort) Newest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	s, inv := p.inv.sim, p.inv
	if f := inv.first; f != nil && f.stream == ref {
		if s.mutant == FirstReadsReused {
			// Never read: the first reads' answer, from memory.
			return f.read.Value, f.read.OK, nil
		}
		if inv.woke > 0 {
			s.stats.Paths[pathNewestAfterWait]++
		}
	}
	r := inv.yield(&call{op: opNewest, detail: fmt.Sprintf("%s %s", ref.Subject, ref.Channel)})
	if r.fault == failCall {
		return ledger.Challenge{}, false, injected("newest", ref.Subject)
	}
	c, ok, err := inv.readNewest(ctx, ref)
	inv.answerLate("", false)
	return c, ok, err
}

// readNewest is a strongly consistent read of the newest challenge of ref,
// as the limits table answers it to inv.
func (inv *invocation) readNewest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	s := inv.sim
	inv.newestStep = s.step
	c, ok, err := s.limiter.Newest(ctx, ref)
	if last, noted := s.lastNoted[ref]; noted && s.mutant == SupersedeLastNoted {
		c = last
	}
	return c, ok, err
}

// challenge returns the world's challenge id.
func (w *world) challenge(id string) *challenge {
	for _, ch := range w.challenges {
		if ch.id == id {
			return ch
		}
	}
	return nil
}

// The invariants of the send limits, judged from the providers' records and
// the world's own counting: which messages the counters took (a call that
// raised a counter), when by the admitting worker's clock, and what the
// world knows of each message (its address, subject and region).

// limitKey is one counter as the world counts it: a rule over one key in
// one window.
type limitKey struct {
	rule   ledger.Rule
	key    string
	window time.Time
	// id is the store's name for the counter (ledger.CounterID, keyed by
	// the stack's fingerprint of the address where the rule needs one).
	id string
}

// worldCounts are the counters a message of key counts in, by the world's
// policy and knowledge (its address, subject and region, the stack's
// fingerprint key), in the windows containing at.
func (s *sim) worldCounts(key string, at time.Time) []limitKey {
	info := s.w.rows[key]
	l, ch := s.w.sendLimits, info.channel
	addr := info.challenge.to[ch]
	var out []limitKey
	add := func(rule ledger.Rule, c ledger.Cap, k, storeKey string) {
		if c.On() {
			id := ledger.CounterID(ledger.Count{Rule: rule, Key: storeKey, Cap: c}, at)
			out = append(out, limitKey{rule, k, ledger.WindowStart(c, at), id})
		}
	}
	fp, _ := (&fingerprint.Local{Key: fingerprintKey}).Fingerprint(context.Background(), ch, addr)
	add(ledger.RuleDestination, l.Destination, string(ch)+" "+addr, string(ch)+"#"+fp)
	if info.challenge.subject != "" {
		add(ledger.RuleSubject, l.Subject, info.challenge.subject, info.challenge.subject)
	}
	if ch == ledger.SMS {
		r, _ := regionOf(addr)
		add(ledger.RuleSMSCountryCap, l.SMSCountryCap, r, r)
		add(ledger.RuleSMSGlobal, l.SMSGlobal, "sms", string(ledger.SMS))
	}
	return out
}

// capOf is the cap of rule.
func (s *sim) capOf(rule ledger.Rule) ledger.Cap {
	l := s.w.sendLimits
	return map[ledger.Rule]ledger.Cap{ledger.RuleDestination: l.Destination, ledger.RuleSubject: l.Subject,
		ledger.RuleSMSCountryCap: l.SMSCountryCap, ledger.RuleSMSGlobal: l.SMSGlobal}[rule]
}

// checkLimits judges a send that reached a provider against the limits.
func (s *sim) checkLimits(f sendFact) {
	if !f.res.reached || !s.w.limitsOn() {
		return
	}
	info := s.w.rows[f.key]
	lbl, l, ch := s.label(f.key), s.w.sendLimits, info.channel
	addr := info.challenge.to[ch]
	if ch == ledger.SMS && l.SMSNumberKinds != nil {
		if _, ok := regionOf(addr); ok && !slices.Contains(s.w.kinds, kindOf(addr)) {
			s.fail(invRefusedKindSent, fmt.Sprintf("%s sent %s (attempt %d) to a %s number, outside the kind allow-list %v",
				f.inv, lbl, f.attempt, kindOf(addr), s.w.kinds), f.key)
			return
		}
	}
	if ch == ledger.SMS && (l.SMSCountries != nil || l.SMSNumberKinds != nil || l.SMSCountryCap.On()) {
		r, ok := regionOf(addr)
		if !ok || l.SMSCountries != nil && !s.w.allowed[r] {
			where := "a number of no region"
			if ok {
				where = "region " + r + ", outside the allow-list"
			}
			s.fail(invRefusedRegionSent, fmt.Sprintf("%s sent %s (attempt %d) to %s", f.inv, lbl, f.attempt, where), f.key)
			return
		}
	}
	if l.Supersede && info.challenge.subject != "" && (f.attempt == 1 || s.on(ClassSupersede) && s.untaken(f)) {
		s.checkSuperseded(f, info)
	}
	if s.received[f.key] {
		return
	}
	s.received[f.key] = true
	at, admitted := s.admittedAt[f.key]
	counts := s.worldCounts(f.key, at)
	if len(counts) > 0 && !admitted {
		s.fail(invLimitedSent, fmt.Sprintf("%s sent %s (attempt %d); the limits count it (%s first), and no admission ever counted it",
			f.inv, lbl, f.attempt, counts[0].rule), f.key)
		return
	}
	if !f.res.recorded {
		return
	}
	if s.on(ClassCaps) {
		s.checkCounted(f, at)
	}
	for _, k := range counts {
		rk := [2]string{string(k.rule), k.key}
		if s.receivedIn[rk] == nil {
			s.receivedIn[rk] = map[string]time.Time{}
		}
		s.receivedIn[rk][f.key] = at
		c := s.capOf(k.rule)
		if keys, from := overCap(s.receivedIn[rk], c); keys != nil {
			var lbls []string
			for _, key := range keys {
				lbls = append(lbls, s.label(key))
			}
			s.fail(invCapExceeded, fmt.Sprintf("the providers received %d messages of %s admitted within %s from %s (%s), over its cap %s",
				len(keys), k.rule, c.Window, s.rel(from), strings.Join(lbls, ", "), c), keys...)
			return
		}
	}
}

// overCap returns the messages of admitted (message -> admission time)
// admitted within one span of c's window, wherever the span starts, when
// they are more than c's cap, and the span's start; nil if no span is.
func overCap(admitted map[string]time.Time, c ledger.Cap) ([]string, time.Time) {
	keys := slices.Sorted(maps.Keys(admitted))
	slices.SortStableFunc(keys, func(a, b string) int { return admitted[a].Compare(admitted[b]) })
	for i, first := range keys {
		var in []string
		for _, k := range keys[i:] {
			if admitted[k].Sub(admitted[first]) < c.Window {
				in = append(in, k)
			}
		}
		if len(in) > c.Max {
			slices.Sort(in)
			return in, admitted[first]
		}
	}
	return nil, time.Time{}
}

// untaken reports whether the later attempt f (its second or after) is of a
// message nothing of which the provider took before it: the provider took
// no message under its key and refused none, and by the row's history when
// the attempt began no earlier attempt could have reached it (every one was
// answered not sent). Such a message is, for the player, unsent: a newer
// challenge supersedes it at its wake-up as at its first dispatch.
func (s *sim) untaken(f sendFact) bool {
	if f.attempt < 2 || !f.unsent {
		return false
	}
	p := s.providers[s.w.rows[f.key].channel]
	return len(p.msgs[f.key]) == b2i(f.res.recorded) && p.rejected[f.key] == b2i(f.behavior == reject && f.res.reached)
}

// nothingTaken reports whether nothing of the row e can have reached its
// provider, read from its history by the simulator (not ledger.Unsent): no
// attempt went through unknown, accepted, rejected or abandoned, and no
// provider event was recorded. Every attempt it made was answered not sent.
func nothingTaken(e ledger.Entry) bool {
	for _, ev := range e.History {
		switch {
		case ev.Kind.Provider(), ev.To == ledger.Unknown, ev.To == ledger.Accepted, ev.To == ledger.Rejected, ev.To == ledger.Abandoned:
			return false
		}
	}
	return true
}

// checkCounted judges a message a provider took (ClassCaps): a sent message
// is counted, in every counter of its own that the world's policy names,
// in the windows of its admission at (the admitting worker's clock), and
// holds that count from then on (Release judges that none is given back).
func (s *sim) checkCounted(f sendFact, at time.Time) {
	s.stats.Paths[pathTakenCounted]++
	for _, k := range s.worldCounts(f.key, at) {
		if id := k.id; !s.countedIn[id][f.key] {
			s.fail(invSentUncounted, fmt.Sprintf("the %s provider took %s (attempt %d, %s's send) while its counter %s did not count it (it is counted in %s)",
				s.w.rows[f.key].channel, s.label(f.key), f.attempt, f.inv, s.counterName(id), s.counterNames(s.countersOf(f.key))), f.key)
			return
		}
	}
}

// checkSuperseded judges an attempt that reached a provider, of a message
// nothing of which the provider took before (its first attempt, or one
// after not-sent answers only: untaken): no newer challenge of its subject,
// purpose and channel was claimed before the sender's last read of the
// newest challenge (or, without one, before the write that began the
// attempt). A claim recorded after that read is the documented race: the
// check is the last read before the send. A sender that waited for its
// send-rate slot after that read is judged from the end of the wait: a
// challenge claimed during the wait supersedes still (the dispatch reads
// the newest challenge again after it), whatever the sender answered
// itself from an earlier read.
func (s *sim) checkSuperseded(f sendFact, info rowInfo) {
	if f.attempt > 1 {
		s.stats.Paths[pathSupersedeLater]++
	}
	read := f.inv.newestStep
	if read == 0 {
		read = f.inv.begun[f.key]
	}
	read = max(read, f.inv.woke)
	for _, o := range s.w.challenges {
		if o.subject != info.challenge.subject || !slices.Contains(o.channels, info.channel) || !s.markOf(o, info.channel).Newer(s.markOf(info.challenge, info.channel)) || s.unordered(o, info.challenge, info.channel) {
			continue
		}
		okey := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: o.id, Channel: info.channel}.Key()
		if c, ok := s.claimedStep[okey]; ok && c < read {
			before := ""
			if f.attempt > 1 {
				before = fmt.Sprintf("; the provider answered its %d earlier attempts not sent", f.attempt-1)
			}
			s.fail(invSupersededSent, fmt.Sprintf("%s sent %s (attempt %d%s) after newer challenge c%d (issued %s, later than %s) was claimed at step %d, before the sender's check at step %d",
				f.inv, s.label(f.key), f.attempt, before, o.n, s.rel(o.issuedAt()), s.rel(info.challenge.issuedAt()), c, read), f.key, okey)
			return
		}
	}
}

// limitPaths counts the limit decisions a write recorded.
func (s *sim) limitPaths(w writeFact, entered bool) {
	if !entered {
		return
	}
	if rule, ok := ledger.LimitRule(w.after); ok {
		s.stats.Paths[limitPath(rule)]++
		if rule == ledger.RuleSuperseded && w.after.Attempts > 0 {
			s.stats.Paths[pathSupersededThrottled]++
		}
	}
}

// invCountGivenBack is the name of a violation of the rule for an unsent
// row's count (docs/design.md, "Counts are exact"): a dispatch that ends a
// counted row while nothing of it can have reached the provider gives its
// count back before it returns; only a dispatch that fails or dies on the
// way, or a function that holds no counters (expire, reconcile, events,
// the operator: limitsOf), leaves it too high.
const invCountGivenBack = "unsent-count-given-back"

// admitFact is the latest admission that counted a message: by whom, and
// at which step.
type admitFact struct {
	inv  *invocation
	step int
}

// checkGivenBack judges a dispatch that returned without an error: every
// row ended (terminal or quarantined, not limited) unsent that it owes a
// release counts in no counter, by the world's bookkeeping
// (ClassConserved). It owes one for a row one of its writes ended, unless
// another invocation counted the message again after that write (a stale
// dispatch, which owes it then), and for a row it counted itself and then
// wrote no more, that had ended (the stale copy's rule: its move lost to
// the write that ended it). A row it counted and then wrote (deferred) is
// no longer its own: another dispatch that ends it owes the release, and
// an expire, reconcile, events or operator write that ends it keeps the
// count, too high.
func (s *sim) checkGivenBack(inv *invocation) {
	if inv.fn != fnDispatch || !s.on(ClassConserved) || !s.w.limitsOn() {
		return
	}
	keys := maps.Clone(inv.ended)
	for k, a := range s.lastAdmit {
		if a.inv == inv && inv.wrote[k] <= a.step {
			keys[k] = a.step
		}
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		e, ok := s.peek(key)
		if !ok || e.State == ledger.Limited || !e.State.Terminal() && e.State != ledger.Quarantined || !e.Unsent() || !e.WasClaimed() {
			continue
		}
		if a := s.lastAdmit[key]; a.inv != inv && a.step > keys[key] {
			continue // counted again after this invocation's write, by another
		}
		if ids := s.countersOf(key); len(ids) > 0 {
			s.fail(invCountGivenBack, fmt.Sprintf("%s ended %s %s (%q) with nothing of it sent, and returned with its count still in %s",
				inv, s.label(key), e.State, e.Reason, s.counterNames(ids)), key)
			return
		}
		s.stats.Paths[pathGivenBack]++
	}
}
