package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Send limits: the rate-control layer in front of the send. A claimed entry
// is admitted once, at its first dispatch, before it books a send-rate slot:
// every counter that applies to it (its destination on its channel, its
// subject, its SMS country and the global SMS cap) counts it in one atomic
// step, or, if one of them is full, none does and the entry ends limited, its
// reason naming the rule, the window and the count. An entry that passed goes
// on as before; a deferred entry passed already and is not counted again.
//
// Superseded challenges: an entry whose subject has a newer challenge for the
// same purpose and channel, while nothing of it can have reached the
// provider (Supersedable), ends suppressed with the reason "superseded by
// challenge <id>". An entry that is dispatching, or whose attempt may have
// been taken, is never touched.
//
// Counts are exact: a message counts once, in the windows of its first
// admission, and the limiter records which counters those were. Every
// write that ends a counted entry while nothing of it can have reached the
// provider (superseded, expired, quarantined for its content) gives the
// count back (apply); a dispatch that counted an entry from a stale copy and
// then found it already ended gives back what it counted (dispatch). A
// count whose release failed stays: too high, never too low.

// Rule names a send limit. It is what the reason, the metrics and
// ledgerctl show; the counted key (a destination fingerprint, a subject)
// never leaves the counter items.
type Rule string

// The send limits.
const (
	// RuleDestination counts sends to one destination on one channel. The
	// key is a keyed fingerprint of the normalized address (Fingerprinter).
	RuleDestination Rule = "destination"
	// RuleSubject counts sends for one subject_ref, on every channel.
	RuleSubject Rule = "subject"
	// RuleSMSCountry refuses an SMS to a region outside the allow-list.
	RuleSMSCountry Rule = "sms-country"
	// RuleSMSNumberKind refuses an SMS to a number whose kind (premium
	// rate, shared cost, toll free, fixed line, ...) is outside the kind
	// allow-list: SMS pumping inside an allowed country.
	RuleSMSNumberKind Rule = "sms-number-kind"
	// RuleSMSCountryCap counts SMS sends to one region.
	RuleSMSCountryCap Rule = "sms-country-cap"
	// RuleSMSGlobal counts every SMS send: the circuit breaker.
	RuleSMSGlobal Rule = "sms-global"
	// RuleSuperseded is the rule of an entry suppressed because a newer
	// challenge of its subject exists (metrics only: it ends suppressed).
	RuleSuperseded Rule = "superseded"
)

// Rules lists the rules, in the order they are checked.
var Rules = []Rule{RuleSMSCountry, RuleSMSNumberKind, RuleDestination, RuleSubject, RuleSMSCountryCap, RuleSMSGlobal, RuleSuperseded}

// Cap is a limit of Max sends in any span of Window, however it lies
// across the clock's window edges. Max zero switches the limit off.
//
// It is counted in fixed windows (the time truncated to the window: whole
// hours for 1h, and so on), by counters that each cover two consecutive
// windows: the counter of window k counts the admissions of windows k-1
// and k, and holds at most Max. An admission in window k counts in the
// counters of windows k and k+1 (Counters), or in neither. Any span of one
// Window lies inside two consecutive windows, so inside one counter's
// cover: no such span holds more than Max admissions, whatever the
// burst at an edge (a fixed window let 2×Max through around it). The price
// is that a full cap drains a window later than a sliding log would: after
// Max sends the next admission waits for the window after next to begin,
// between one and two Windows later; in steady traffic at most Max go
// through every two windows.
type Cap struct {
	Max    int
	Window time.Duration
}

// On reports whether the cap limits anything.
func (c Cap) On() bool { return c.Max > 0 && c.Window > 0 }

func (c Cap) String() string {
	if !c.On() {
		return "off"
	}
	return fmt.Sprintf("%d/%s", c.Max, c.Window)
}

// ParseCap reads "<max>/<window>" ("5/10m") or "off".
func ParseCap(v string) (Cap, error) {
	if v == "off" || v == "0" {
		return Cap{}, nil
	}
	n, w, ok := strings.Cut(v, "/")
	var c Cap
	if _, err := fmt.Sscanf(n, "%d", &c.Max); !ok || err != nil || c.Max < 1 || fmt.Sprint(c.Max) != n {
		return Cap{}, fmt.Errorf("ledger: limit %q: want <max>/<window> (5/10m) or off", v)
	}
	d, err := time.ParseDuration(w)
	if err != nil || d < time.Second || d > 24*time.Hour || d%time.Second != 0 {
		return Cap{}, fmt.Errorf("ledger: limit %q: window must be whole seconds from 1s to 24h", v)
	}
	c.Window = d
	return c, nil
}

// Limits is the limit policy. Its zero value limits nothing.
type Limits struct {
	// Destination caps sends to one address on one channel.
	Destination Cap
	// Subject caps sends for one subject_ref, every channel together.
	Subject Cap
	// SMSCountries, if set, is the allow-list of SMS destination regions
	// (ISO 3166-1 alpha-2): an SMS to any other region is never sent.
	SMSCountries func(region string) bool
	// SMSNumberKinds, if set, is the allow-list of SMS number kinds
	// (PhoneNumber.Kind: "mobile", "fixed_line_or_mobile", ...): an SMS to
	// a number of any other kind is never sent.
	SMSNumberKinds func(kind string) bool
	// SMSCountryCap caps SMS sends to one region.
	SMSCountryCap Cap
	// SMSGlobal caps every SMS send together: the circuit breaker.
	SMSGlobal Cap
	// Supersede suppresses an entry whose subject has a newer challenge for
	// the same purpose and channel before it is sent.
	Supersede bool
}

// needsAddress reports whether admitting an entry of channel ch needs its
// opened content.
func (l Limits) needsAddress(ch Channel) bool {
	return l.Destination.On() || ch == SMS && l.needsNumber()
}

// needsNumber reports whether an SMS is admitted by its number's region or
// kind.
func (l Limits) needsNumber() bool {
	return l.SMSCountries != nil || l.SMSNumberKinds != nil || l.SMSCountryCap.On()
}

// Count is one counter a message counts in: a rule's cap over one key.
type Count struct {
	Rule Rule
	// Key is what the rule counts per (a fingerprint, a subject, a region,
	// a channel). It stays in the counter items: never in a reason, a log
	// line or a metric.
	Key string
	Cap Cap
}

// Admission is the answer of Limiter.Admit.
type Admission struct {
	// Limited is the index in the counts of a counter that was full, or -1
	// when the message was admitted.
	Limited int
	// Count is, when limited, how many sends that counter held; when
	// admitted, unused.
	Count int
	// Repeat reports that the message had been counted already (a
	// redelivery of an admitted entry): admitted, nothing counted again.
	Repeat bool
	// CountedAt is, when admitted, when the message was counted: now, or
	// the time of the admission a Repeat repeats.
	CountedAt time.Time
	// Window is, when limited, the start of what the full counter
	// counts: the window before the one it is named by (Counter.From).
	Window time.Time
}

// Limiter keeps the send-limit counters in shared storage: items with
// conditional writes and a TTL past the windows they count, never in
// process memory. (The DynamoDB store keeps a rule and key's counters in
// one item, one attribute per window.)
//
// A message counts once, in the windows containing the time it was first
// admitted, and the store records which counters those were: a release
// takes back exactly them, whenever it comes and whatever the time then.
type Limiter interface {
	// Admit counts the message key in every counter of every count
	// (Counters: two per count, by now), in one atomic step, unless one of
	// them holds its count's Max already: then none counts it, and the
	// answer names that count.
	// A message counted once is never counted again, in this window or a
	// later one, until it is released: a repeated Admit of the same key
	// answers Repeat, with the time it was counted. Racing calls never push
	// a counter past its Max. until bounds how long the key must be
	// remembered.
	Admit(ctx context.Context, key string, counts []Count, now, until time.Time) (Admission, error)
	// Release gives back the count of the message key in exactly the
	// counters, and their windows, that its admission counted it in. A
	// release of a message not counted, or released already, changes
	// nothing.
	Release(ctx context.Context, key string) error
}

// Challenges records the newest challenge of each subject, purpose and
// channel, for supersession.
type Challenges interface {
	// Note records challenge c as the newest of ref unless a newer one is
	// recorded (Challenge.Newer); a repeated note is harmless. The record
	// is kept at least until c.ExpiresAt.
	Note(ctx context.Context, ref SubjectStream, c Challenge) error
	// Newest returns the newest recorded challenge of ref; ok is false if
	// none is recorded. It reads strongly consistently.
	Newest(ctx context.Context, ref SubjectStream) (c Challenge, ok bool, err error)
}

// Challenge is one challenge of a subject stream, as supersession orders
// them: by when the account service issued it, never by its expiry (a
// far-future expiry must not shadow a later challenge), ties broken by the
// challenge id so that every reader orders them alike.
type Challenge struct {
	ID        string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// Newer reports whether c was issued after o (or, issued in the same
// instant, has the greater id).
func (c Challenge) Newer(o Challenge) bool {
	if d := c.IssuedAt.Compare(o.IssuedAt); d != 0 {
		return d > 0
	}
	return c.ID > o.ID
}

// ChallengeOf returns e's challenge. An entry written before entries carried
// IssuedAt counts as issued when it was claimed.
func ChallengeOf(e Entry) Challenge {
	issued := e.IssuedAt
	if issued.IsZero() {
		issued = e.CreatedAt
	}
	return Challenge{ID: e.Identity.ChallengeID, IssuedAt: issued, ExpiresAt: e.ExpiresAt}
}

// SubjectStream is what one subject's challenges supersede each other in.
type SubjectStream struct {
	Subject string
	Purpose Purpose
	Channel Channel
}

func StreamOf(e Entry) SubjectStream {
	return SubjectStream{Subject: e.SubjectRef, Purpose: e.Identity.Purpose, Channel: e.Identity.Channel}
}

// Fingerprinter makes the destination key of the per-destination limit: a
// MAC of the normalized address under a key the stack manages. A plain
// hash of a phone number is reversed by enumerating numbers, so the
// address is never hashed without a key.
type Fingerprinter interface {
	Fingerprint(ctx context.Context, ch Channel, address string) (string, error)
}

// PhoneNumber is what the SMS limits know of a destination number: nothing
// from which the number could be recovered.
type PhoneNumber struct {
	// Region is the ISO 3166-1 alpha-2 region ("GB").
	Region string
	// Kind is the number's kind by the phone-number metadata, in
	// smsregion's names ("mobile", "premium_rate").
	Kind string
}

// NumberOf looks a phone number up: its region and kind. Its errors must
// not contain the number.
type NumberOf func(number string) (PhoneNumber, error)

// LimitCode is the NotSentCode prefix of the history entry that ends a
// entry limited: "limit:<rule>".
const LimitCode = "limit:"

// LimitRule returns the rule that stopped e: a limit for a limited entry,
// RuleSuperseded for an entry suppressed as superseded.
func LimitRule(e Entry) (Rule, bool) {
	switch {
	case e.State == Limited && strings.HasPrefix(e.NotSentCode, LimitCode):
		return Rule(strings.TrimPrefix(e.NotSentCode, LimitCode)), true
	case e.State == Suppressed && strings.HasPrefix(e.Reason, supersededPrefix):
		return RuleSuperseded, true
	}
	return "", false
}

const supersededPrefix = "superseded by challenge "

// on reports whether a rule limits entries of channel ch.
func (l Limits) on(ch Channel) bool {
	return l.Destination.On() || l.Subject.On() || ch == SMS && (l.needsNumber() || l.SMSGlobal.On())
}

// counting reports whether a rule limits entries of any channel.
func (l Limits) counting() bool { return l.on(SMS) || l.on(Email) }

// admission is dispatch's send limits and supersession: the policy, the
// counters, and what the rules read (the newest challenge per subject, the
// destination's fingerprint, the number's region, the subject's timeline).
// Its methods decide without writing; the Dispatcher's methods in this file
// write what they decide.
type admission struct {
	limits       Limits
	limiter      Limiter
	challenges   Challenges
	fingerprints Fingerprinter
	numberOf     NumberOf
	timeline     Timeline
}

// Supersedable reports whether a newer challenge may still end e: it is
// claimed or deferred, and nothing of it can have reached the provider
// (Unsent: no attempt, or only attempts answered with a definite not
// sent). An entry with an unknown, accepted or in-flight attempt never is.
func Supersedable(e Entry) bool {
	return (e.State == Claimed || e.State == Deferred) && e.Unsent()
}

// superseded returns the newer challenge that supersedes e, if any. Only a
// entry nothing of which reached the provider is superseded.
func (s *admission) superseded(ctx context.Context, e Entry) (string, bool, error) {
	if !s.limits.Supersede || e.SubjectRef == "" || !Supersedable(e) {
		return "", false, nil
	}
	newest, ok, err := s.challenges.Newest(ctx, StreamOf(e))
	if err != nil {
		return "", false, fmt.Errorf("dispatch %s: newest challenge: %w", e.Key, err)
	}
	if !ok || newest.ID == e.Identity.ChallengeID || !newest.Newer(ChallengeOf(e)) {
		return "", false, nil
	}
	return newest.ID, true, nil
}

// supersedeIfNewer ends e superseded if a newer challenge of its stream
// exists; done reports that it did.
func (s *Dispatcher) supersedeIfNewer(ctx context.Context, e Entry, w Worker) (_ DispatchResult, done bool, _ error) {
	newer, ok, err := s.superseded(ctx, e)
	if !ok || err != nil {
		return DispatchResult{}, false, err
	}
	res, err := s.supersede(ctx, e, w, newer)
	return res, true, err
}

// supersede ends the unsent entry e suppressed in favour of challenge newer.
// An entry the limits counted gives its count back with that write (apply):
// superseded entries must not fill the counters the newest challenge is
// counted in.
func (s *Dispatcher) supersede(ctx context.Context, e Entry, w Worker, newer string) (DispatchResult, error) {
	reason := supersededPrefix + newer
	c, err := s.core.Transition(e, Suppressed, w, reason, func(n *Entry) {
		s.core.ClearDeferral(n)
		n.Reason = reason
	})
	if err != nil {
		return DispatchResult{}, err
	}
	return s.core.Apply(ctx, c, OutcomeSuppressed)
}

// errRefused is a limit decision made without a counter: the region is
// outside the allow-list, or the address cannot be read as a number.
type errRefused struct {
	rule   Rule
	reason string
}

func (e *errRefused) Error() string { return e.reason }

// counts returns the counters the message msg of entry e counts in.
func (s *admission) counts(ctx context.Context, e Entry, msg Message) ([]Count, error) {
	l, ch := s.limits, e.Identity.Channel
	var cs []Count
	var region string
	if ch == SMS && l.needsNumber() {
		n, err := s.numberOf(msg.To)
		if err != nil {
			return nil, &errRefused{RuleSMSCountry, "destination number has no recognizable region"}
		}
		if l.SMSCountries != nil && !l.SMSCountries(n.Region) {
			return nil, &errRefused{RuleSMSCountry, fmt.Sprintf("region %s is not in the SMS allow-list", n.Region)}
		}
		if l.SMSNumberKinds != nil && !l.SMSNumberKinds(n.Kind) {
			return nil, &errRefused{RuleSMSNumberKind, fmt.Sprintf("a %s number (region %s) is not in the SMS number-kind allow-list", kindText(n.Kind), n.Region)}
		}
		region = n.Region
	}
	if l.Destination.On() {
		fp, err := s.fingerprints.Fingerprint(ctx, ch, msg.To)
		if err != nil {
			return nil, fmt.Errorf("fingerprint destination: %w", err)
		}
		cs = append(cs, Count{Rule: RuleDestination, Key: string(ch) + "#" + fp, Cap: l.Destination})
	}
	if l.Subject.On() && e.SubjectRef != "" {
		cs = append(cs, Count{Rule: RuleSubject, Key: e.SubjectRef, Cap: l.Subject})
	}
	if ch == SMS && l.SMSCountryCap.On() {
		cs = append(cs, Count{Rule: RuleSMSCountryCap, Key: region, Cap: l.SMSCountryCap})
	}
	if ch == SMS && l.SMSGlobal.On() {
		cs = append(cs, Count{Rule: RuleSMSGlobal, Key: string(SMS), Cap: l.SMSGlobal})
	}
	return cs, nil
}

// admit decides whether the claimed entry e may be sent under the limits.
// It returns the result of ending e limited, or a zero result and when the
// counters counted it (zero if none applied) if admitted.
func (s *Dispatcher) admit(ctx context.Context, e Entry, w Worker, msg Message) (time.Time, DispatchResult, error) {
	cs, err := s.counts(ctx, e, msg)
	var ref *errRefused
	if errors.As(err, &ref) {
		res, err := s.limit(ctx, e, w, ref.rule, ref.reason+"; nothing sent")
		return time.Time{}, res, err
	}
	if err != nil {
		return time.Time{}, DispatchResult{}, fmt.Errorf("dispatch %s: limits: %w", e.Key, err)
	}
	if len(cs) == 0 {
		return time.Time{}, DispatchResult{}, nil
	}
	a, err := s.admitReclaiming(ctx, e, w, cs, s.core.Now())
	if err != nil {
		return time.Time{}, DispatchResult{}, fmt.Errorf("dispatch %s: limits: %w", e.Key, err)
	}
	if a.Limited < 0 {
		return a.CountedAt, DispatchResult{}, nil
	}
	c := cs[a.Limited]
	what := map[Rule]string{
		RuleDestination: "sends to this destination on " + string(e.Identity.Channel), RuleSubject: "sends for subject " + e.SubjectRef,
		RuleSMSCountryCap: "SMS to region " + c.Key, RuleSMSGlobal: "SMS in all",
	}[c.Rule]
	reason := fmt.Sprintf("limit %s: %d of %d %s per %s reached (window from %s); nothing sent",
		c.Rule, a.Count, c.Cap.Max, what, c.Cap.Window, a.Window.UTC().Format(time.RFC3339))
	res, err := s.limit(ctx, e, w, c.Rule, reason)
	return time.Time{}, res, err
}

// admitReclaiming counts e in the counters cs. If one is full and e's
// subject has older challenges in e's stream that the limits counted while
// they waited for their send-rate slots, those are superseded by e (the
// newest: superseded checked it just before), their counts given back,
// and e is admitted again, once. Without this the newest challenge, reaching
// dispatch before its older siblings wake, would find the counter full of
// them: it would end limited, they superseded, and the player get nothing.
func (s *Dispatcher) admitReclaiming(ctx context.Context, e Entry, w Worker, cs []Count, now time.Time) (Admission, error) {
	until := e.ExpiresAt.Add(s.core.Policy().Lease)
	a, err := s.limiter.Admit(ctx, e.Key, cs, now, until)
	if err != nil || a.Limited < 0 {
		return a, err
	}
	n, err := s.reclaim(ctx, e, w)
	if err != nil || n == 0 {
		return a, err
	}
	return s.limiter.Admit(ctx, e.Key, cs, now, until)
}

// ReclaimLookback is how many of a subject's newest entries a refused
// admission reads (one index Query and one batch read, bounded by it) to
// find the older challenges that still hold counts. Such entries are recent:
// each waits in the backlog behind a newer claim of the same subject.
const ReclaimLookback = 16

// reclaim supersedes by e the unsent older challenges of e's stream (a
// newer challenge supersedes them whatever they hold), giving back the
// counts they hold, and returns how many entries of the stream are now
// superseded by e (by this call, or by their own dispatch meanwhile: either
// gave its count back). An entry that moved on to its send keeps its count.
func (s *Dispatcher) reclaim(ctx context.Context, e Entry, w Worker) (int, error) {
	if !s.limits.Supersede || s.timeline == NoTimeline || e.SubjectRef == "" {
		return 0, nil
	}
	rows, err := s.timeline.ListByRef(ctx, BySubject, e.SubjectRef, time.Time{}, ReclaimLookback)
	if err != nil {
		return 0, fmt.Errorf("older challenges of its subject: %w", err)
	}
	n := 0
	for _, o := range rows {
		if o.Key == e.Key || StreamOf(o) != StreamOf(e) || !ChallengeOf(e).Newer(ChallengeOf(o)) {
			continue
		}
		if !Supersedable(o) {
			if supersededBy(o, e) {
				n++
			}
			continue
		}
		// A lost write is tried again on the fresh entry while it is still
		// supersedable: its own dispatch may only have deferred it to a
		// send slot (a hold), and it still holds its count.
		last := o
		err := s.core.OnConflict(ctx, o, func(o Entry) error {
			res, err := s.supersede(ctx, o, w, e.Identity.ChallengeID)
			if err == nil {
				last = res.Entry
			}
			return err
		}, func(fresh Entry) bool { last = fresh; return Supersedable(fresh) })
		if errors.Is(err, ErrConflict) && !Supersedable(last) {
			err = nil // moved on meanwhile: to its send, or superseded at its wake-up
		}
		if err != nil {
			return n, err
		}
		if supersededBy(last, e) {
			n++
		}
	}
	return n, nil
}

// supersededBy reports whether o ended suppressed in favour of e's challenge.
func supersededBy(o, e Entry) bool {
	return o.State == Suppressed && o.Reason == supersededPrefix+e.Identity.ChallengeID
}

// limit ends the claimed entry e limited by rule.
func (s *Dispatcher) limit(ctx context.Context, e Entry, w Worker, rule Rule, reason string) (DispatchResult, error) {
	c, err := s.core.Transition(e, Limited, w, reason, func(n *Entry) {
		s.core.ClearDeferral(n)
		n.Reason = reason
		n.NotSentCode = LimitCode + string(rule)
	})
	if err != nil {
		return DispatchResult{}, err
	}
	c.Event.Code = c.Next.NotSentCode
	c.Event = Chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	return s.core.Apply(ctx, c, OutcomeLimited)
}

// WindowStart is the start of c's window containing now.
func WindowStart(c Cap, now time.Time) time.Time { return now.Truncate(c.Window) }

// CounterID names the counter of c named by its window containing now:
// "<rule>#<key>#<window start, Unix seconds>". The counter counts the
// admissions of that window and the one before it (Cap). The in-memory
// store keys its counters by it; the DynamoDB store keeps them as
// attributes, named by the window start, of one item per rule and key.
func CounterID(c Count, now time.Time) string {
	return fmt.Sprintf("%s#%s#%d", c.Rule, c.Key, WindowStart(c.Cap, now).Unix())
}

// Counter is one counter an admission counts in.
type Counter struct {
	// ID is the item's name (CounterID).
	ID string
	// From and To bound the admissions it counts: two windows.
	From, To time.Time
}

// Counters returns the counters an admission of c at now counts in, each
// of which must hold less than c's Max: the counter of now's window
// (covering it and the window before) and the counter of the next window
// (covering now's window and that one). See Cap.
func Counters(c Count, now time.Time) []Counter {
	w := WindowStart(c.Cap, now)
	next := w.Add(c.Cap.Window)
	return []Counter{
		{ID: CounterID(c, w), From: w.Add(-c.Cap.Window), To: next},
		{ID: CounterID(c, next), From: w, To: next.Add(c.Cap.Window)},
	}
}

// kindText is a number kind for a reason: its name with spaces, or
// "unknown-kind" for a name outside the metadata's (never other text).
func kindText(kind string) string {
	for _, r := range kind {
		if (r < 'a' || r > 'z') && r != '_' {
			return "unknown-kind"
		}
	}
	if kind == "" {
		return "unknown-kind"
	}
	return strings.ReplaceAll(kind, "_", "-")
}
