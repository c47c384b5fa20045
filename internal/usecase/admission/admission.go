// Package admission is dispatch's send limits and supersession behind one
// port, Gate: whether an entry may be sent, counted in the limits' counters,
// ended limited or superseded, and its count given back when nothing of
// it was sent.
package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Ports are the send-limit policy and the ports its rules need:
// Limiter when any rule counts, Fingerprints for the destination cap,
// NumberOf for the SMS region and kind rules, and Challenges and Timeline
// when older challenges are superseded.
type Ports struct {
	Limits       ledger.Limits
	Limiter      ledger.Limiter
	Challenges   ledger.Challenges
	Fingerprints ledger.Fingerprinter
	NumberOf     ledger.NumberOf
	Timeline     ledger.Timeline
}

// New keeps the send-limit policy and its ports; the dispatch that holds
// the Gate binds its Core with For.
func New(p Ports) Gate {
	return Gate{limits: p.Limits, limiter: p.Limiter, challenges: p.Challenges, fingerprints: p.Fingerprints,
		numberOf: p.NumberOf, timeline: p.Timeline}
}

// For returns g writing through core, its owner's.
func (g Gate) For(core *ledger.Core) Gate {
	g.core = core
	return g
}

// Limits is the send-limit policy.
func (g *Gate) Limits() ledger.Limits { return g.limits }

// Challenges is where the newest challenge per subject is read.
func (g *Gate) Challenges() ledger.Challenges { return g.challenges }

// WithNewest returns g reading the newest challenges through c (dispatch's
// first reads, primed).
func (g Gate) WithNewest(c ledger.Challenges) Gate {
	g.challenges = c
	return g
}

// Gate is dispatch's send limits and supersession: the policy, the
// counters, and what the rules read (the newest challenge per subject, the
// destination's fingerprint, the number's region, the subject's timeline).
// It writes through its owner's Core: an entry it ends limited or
// superseded, and a count it gives back.
type Gate struct {
	core         *ledger.Core // its owner's
	limits       ledger.Limits
	limiter      ledger.Limiter
	challenges   ledger.Challenges
	fingerprints ledger.Fingerprinter
	numberOf     ledger.NumberOf
	timeline     ledger.Timeline
}

// Superseded returns the newer challenge that supersedes e, if any. Only a
// entry nothing of which reached the provider is Superseded.
func (g *Gate) Superseded(ctx context.Context, e ledger.Entry) (string, bool, error) {
	if !g.limits.Supersede || e.SubjectRef == "" || !ledger.Supersedable(e) {
		return "", false, nil
	}
	newest, ok, err := g.challenges.Newest(ctx, ledger.StreamOf(e))
	if err != nil {
		return "", false, fmt.Errorf("dispatch %s: newest challenge: %w", e.Key, err)
	}
	if !ok || newest.ID == e.Identity.ChallengeID || !newest.Newer(ledger.ChallengeOf(e)) {
		return "", false, nil
	}
	return newest.ID, true, nil
}

// SupersedeIfNewer ends e superseded if a newer challenge of its stream
// exists; done reports that it did.
func (g *Gate) SupersedeIfNewer(ctx context.Context, e ledger.Entry, w ledger.Worker) (_ ledger.DispatchResult, done bool, _ error) {
	newer, ok, err := g.Superseded(ctx, e)
	if !ok || err != nil {
		return ledger.DispatchResult{}, false, err
	}
	res, err := g.supersede(ctx, e, w, newer)
	return res, true, err
}

// supersede ends the unsent entry e suppressed in favour of challenge newer.
// An entry the limits counted gives its count back with that write (apply):
// superseded entries must not fill the counters the newest challenge is
// counted in.
func (g *Gate) supersede(ctx context.Context, e ledger.Entry, w ledger.Worker, newer string) (ledger.DispatchResult, error) {
	reason := ledger.SupersededPrefix + newer
	c, err := g.core.Transition(e, ledger.Suppressed, w, reason, func(n *ledger.Entry) {
		n.ClearDeferral()
		n.Reason = reason
	})
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	return g.core.Apply(ctx, c, ledger.OutcomeSuppressed)
}

// errRefused is a limit decision made without a counter: the region is
// outside the allow-list, or the address cannot be read as a number.
type errRefused struct {
	rule   ledger.Rule
	reason string
}

func (e *errRefused) Error() string { return e.reason }

// counts returns the counters the message msg of entry e counts in.
func (g *Gate) counts(ctx context.Context, e ledger.Entry, msg ledger.Message) ([]ledger.Count, error) {
	l, ch := g.limits, e.Identity.Channel
	var cs []ledger.Count
	var region string
	if ch == ledger.SMS && l.NeedsNumber() {
		n, err := g.numberOf(msg.To)
		if err != nil {
			return nil, &errRefused{ledger.RuleSMSCountry, "destination number has no recognizable region"}
		}
		if l.SMSCountries != nil && !l.SMSCountries(n.Region) {
			return nil, &errRefused{ledger.RuleSMSCountry, fmt.Sprintf("region %s is not in the SMS allow-list", n.Region)}
		}
		if l.SMSNumberKinds != nil && !l.SMSNumberKinds(n.Kind) {
			return nil, &errRefused{ledger.RuleSMSNumberKind, fmt.Sprintf("a %s number (region %s) is not in the SMS number-kind allow-list", kindText(n.Kind), n.Region)}
		}
		region = n.Region
	}
	if l.Destination.On() {
		fp, err := g.fingerprints.Fingerprint(ctx, ch, msg.To)
		if err != nil {
			return nil, fmt.Errorf("fingerprint destination: %w", err)
		}
		cs = append(cs, ledger.Count{Rule: ledger.RuleDestination, Key: string(ch) + "#" + fp, Cap: l.Destination})
	}
	if l.Subject.On() && e.SubjectRef != "" {
		cs = append(cs, ledger.Count{Rule: ledger.RuleSubject, Key: e.SubjectRef, Cap: l.Subject})
	}
	if ch == ledger.SMS && l.SMSCountryCap.On() {
		cs = append(cs, ledger.Count{Rule: ledger.RuleSMSCountryCap, Key: region, Cap: l.SMSCountryCap})
	}
	if ch == ledger.SMS && l.SMSGlobal.On() {
		cs = append(cs, ledger.Count{Rule: ledger.RuleSMSGlobal, Key: string(ledger.SMS), Cap: l.SMSGlobal})
	}
	return cs, nil
}

// Admit decides whether the claimed entry e may be sent under the limits.
// It returns the result of ending e limited, or a zero result and when the
// counters counted it (zero if none applied) if admitted.
func (g *Gate) Admit(ctx context.Context, e ledger.Entry, w ledger.Worker, msg ledger.Message) (time.Time, ledger.DispatchResult, error) {
	cs, err := g.counts(ctx, e, msg)
	var ref *errRefused
	if errors.As(err, &ref) {
		res, err := g.limit(ctx, e, w, ref.rule, ref.reason+"; nothing sent")
		return time.Time{}, res, err
	}
	if err != nil {
		return time.Time{}, ledger.DispatchResult{}, fmt.Errorf("dispatch %s: limits: %w", e.Key, err)
	}
	if len(cs) == 0 {
		return time.Time{}, ledger.DispatchResult{}, nil
	}
	a, err := g.admitReclaiming(ctx, e, w, cs, g.core.Now())
	if err != nil {
		return time.Time{}, ledger.DispatchResult{}, fmt.Errorf("dispatch %s: limits: %w", e.Key, err)
	}
	if a.Limited < 0 {
		return a.CountedAt, ledger.DispatchResult{}, nil
	}
	c := cs[a.Limited]
	what := map[ledger.Rule]string{
		ledger.RuleDestination: "sends to this destination on " + string(e.Identity.Channel), ledger.RuleSubject: "sends for subject " + e.SubjectRef,
		ledger.RuleSMSCountryCap: "SMS to region " + c.Key, ledger.RuleSMSGlobal: "SMS in all",
	}[c.Rule]
	reason := fmt.Sprintf("limit %s: %d of %d %s per %s reached (window from %s); nothing sent",
		c.Rule, a.Count, c.Cap.Max, what, c.Cap.Window, a.Window.UTC().Format(time.RFC3339))
	res, err := g.limit(ctx, e, w, c.Rule, reason)
	return time.Time{}, res, err
}

// admitReclaiming counts e in the counters cs. If one is full and e's
// subject has older challenges in e's stream that the limits counted while
// they waited for their send-rate slots, those are superseded by e (the
// newest: superseded checked it just before), their counts given back,
// and e is admitted again, once. Without this the newest challenge, reaching
// dispatch before its older siblings wake, would find the counter full of
// them: it would end limited, they superseded, and the player get nothing.
func (g *Gate) admitReclaiming(ctx context.Context, e ledger.Entry, w ledger.Worker, cs []ledger.Count, now time.Time) (ledger.Admission, error) {
	until := e.ExpiresAt.Add(g.core.Policy().Lease)
	a, err := g.limiter.Admit(ctx, e.Key, cs, now, until)
	if err != nil || a.Limited < 0 {
		return a, err
	}
	n, err := g.reclaim(ctx, e, w)
	if err != nil || n == 0 {
		return a, err
	}
	return g.limiter.Admit(ctx, e.Key, cs, now, until)
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
func (g *Gate) reclaim(ctx context.Context, e ledger.Entry, w ledger.Worker) (int, error) {
	if !g.limits.Supersede || g.timeline == ledger.NoTimeline || e.SubjectRef == "" {
		return 0, nil
	}
	rows, err := g.timeline.ListByRef(ctx, ledger.BySubject, e.SubjectRef, time.Time{}, ReclaimLookback)
	if err != nil {
		return 0, fmt.Errorf("older challenges of its subject: %w", err)
	}
	n := 0
	for _, o := range rows {
		if o.Key == e.Key || ledger.StreamOf(o) != ledger.StreamOf(e) || !ledger.ChallengeOf(e).Newer(ledger.ChallengeOf(o)) {
			continue
		}
		if !ledger.Supersedable(o) {
			if supersededBy(o, e) {
				n++
			}
			continue
		}
		// A lost write is tried again on the fresh entry while it is still
		// supersedable: its own dispatch may only have deferred it to a
		// send slot (a hold), and it still holds its count.
		last := o
		err := g.core.OnConflict(ctx, o, func(o ledger.Entry) error {
			res, err := g.supersede(ctx, o, w, e.Identity.ChallengeID)
			if err == nil {
				last = res.Entry
			}
			return err
		}, func(fresh ledger.Entry) bool { last = fresh; return ledger.Supersedable(fresh) })
		if errors.Is(err, ledger.ErrConflict) && !ledger.Supersedable(last) {
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
func supersededBy(o, e ledger.Entry) bool {
	return o.State == ledger.Suppressed && o.Reason == ledger.SupersededPrefix+e.Identity.ChallengeID
}

// limit ends the claimed entry e limited by rule.
func (g *Gate) limit(ctx context.Context, e ledger.Entry, w ledger.Worker, rule ledger.Rule, reason string) (ledger.DispatchResult, error) {
	c, err := g.core.Transition(e, ledger.Limited, w, reason, func(n *ledger.Entry) {
		n.ClearDeferral()
		n.Reason = reason
		n.NotSentCode = ledger.LimitCode + string(rule)
	})
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	c.Event.Code = c.Next.NotSentCode
	c.Event = ledger.Chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	return g.core.Apply(ctx, c, ledger.OutcomeLimited)
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

// ReleaseUnsent gives back the send-limit count of the ended entry e if the
// limits may have counted it and nothing of it can have reached the
// provider. An entry never claimed was never admitted.
func (g *Gate) ReleaseUnsent(ctx context.Context, e ledger.Entry) error {
	if !e.State.Terminal() && e.State != ledger.Quarantined || !e.Unsent() ||
		!g.limits.Covers(e.Identity.Channel) || !e.WasClaimed() {
		return nil
	}
	if err := g.limiter.Release(ctx, e.Key); err != nil {
		return fmt.Errorf("%s ended %s, but its send-limit count stays: %w", e.Key, e.State, err)
	}
	return nil
}
