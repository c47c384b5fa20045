package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Send limits and superseded challenges: the policy, the counters' port and
// what the rules read (docs/design.md, "Send limits and superseded
// challenges"); internal/usecase/admission applies them.

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

// NeedsAddress reports whether admitting an entry of channel ch needs its
// opened content.
func (l Limits) NeedsAddress(ch Channel) bool {
	return l.Destination.On() || ch == SMS && l.NeedsNumber()
}

// NeedsNumber reports whether an SMS is admitted by its number's region or
// kind.
func (l Limits) NeedsNumber() bool {
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
	case e.State == Suppressed && strings.HasPrefix(e.Reason, SupersededPrefix):
		return RuleSuperseded, true
	}
	return "", false
}

const SupersededPrefix = "superseded by challenge "

// Covers reports whether a rule limits entries of channel ch.
func (l Limits) Covers(ch Channel) bool {
	return l.Destination.On() || l.Subject.On() || ch == SMS && (l.NeedsNumber() || l.SMSGlobal.On())
}

// Counting reports whether a rule limits entries of any channel.
func (l Limits) Counting() bool { return l.Covers(SMS) || l.Covers(Email) }

// Supersedable reports whether a newer challenge may still end e: it is
// claimed or deferred, and nothing of it can have reached the provider
// (Unsent: no attempt, or only attempts answered with a definite not
// sent). An entry with an unknown, accepted or in-flight attempt never is.
func Supersedable(e Entry) bool {
	return (e.State == Claimed || e.State == Deferred) && e.Unsent()
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
