package ledger

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// One type per use case, each holding only the ports it uses. Each is
// built by its constructor from Ports, which refuses a missing port with a
// *MissingPortError naming it; a control a stage turns off is an explicit
// off value below, so a wiring slip is an error at start, never a control
// silently off.

// sender is what dispatch and reconcile's same-key retry share: the
// transports, the opener of sealed content and the attempt proofs.
type sender struct {
	core       *Core // its owner's
	transports map[Channel]Transport
	opener     Opener
	proofs     Proofs
}

// newSender checks the sending ports: at least one transport, none nil, and,
// for the transports whose sends this use case makes (sends), the opener
// of their content and, where they report provider events, Proofs (those
// sends carry a proof).
func newSender(role string, p Ports, sends func(Capabilities) bool) (sender, error) {
	need := portCheck{useCase: role}
	need.port(len(p.Transports) > 0, "Transports")
	opens, events := false, false
	for _, ch := range Channels {
		tr, ok := p.Transports[ch]
		if !ok {
			continue
		}
		need.port(tr != nil, "Transports["+string(ch)+"]")
		if tr == nil {
			continue
		}
		if caps := tr.Capabilities(); sends(caps) {
			opens, events = true, events || caps.Events
		}
	}
	need.port(!opens || p.Opener != nil, "Opener")
	need.port(!events || p.Proofs != nil, "Proofs (a transport reports provider events: its sends carry a proof)")
	if err := need.err(); err != nil {
		return sender{}, err
	}
	return sender{transports: p.Transports, opener: p.Opener, proofs: p.Proofs}, nil
}

// Dispatcher sends claimed and due deferred entries (functions/dispatch).
type Dispatcher struct {
	core        Core
	sender      sender
	admission   // the send limits and supersession (limits.go)
	streamMarks // how far it has read, for reconcile (progress.go)
	budget      Budget
	scheduler   Scheduler
	firstReads  FirstReads
	sleep       func(ctx context.Context, d time.Duration) error
	jitter      func() float64
}

// NewDispatcher builds the dispatch use case. Beyond every use case's
// ports it needs Opener, Transports, Budget (or NoBudget), Scheduler (or
// NoScheduler), Progress (or NoProgress), Proofs when a transport reports
// events, and the ports the limits' rules need: Limiter when any rule
// counts, Fingerprints for the destination cap, NumberOf for
// the SMS region and kind rules, Challenges and Timeline (or NoTimeline)
// when older challenges are superseded, and FirstReads (or ReadRowAlone).
func NewDispatcher(p Ports) (*Dispatcher, error) {
	c, err := newCore("dispatch", p)
	if err != nil {
		return nil, err
	}
	snd, err := newSender("dispatch", p, func(Capabilities) bool { return true })
	if err != nil {
		return nil, err
	}
	need := portCheck{useCase: "dispatch"}
	need.port(p.Budget != nil, "Budget (NoBudget: unpaced)")
	need.port(p.Scheduler != nil, "Scheduler (NoScheduler: nothing handed back)")
	need.port(p.Progress != nil, "Progress (NoProgress: no marks)")
	l := p.Limits
	need.port(!l.counting() || p.Limiter != nil, "Limiter (the send limits count)")
	need.port(!l.Destination.On() || p.Fingerprints != nil, "Fingerprints (the destination cap is on)")
	need.port(!l.needsNumber() || p.NumberOf != nil, "NumberOf (an SMS region or number-kind rule is on)")
	need.port(!l.Supersede || p.Challenges != nil, "Challenges (the limits supersede older challenges)")
	need.port(!l.Supersede || p.Timeline != nil, "Timeline (the limits supersede older challenges; NoTimeline: their counts wait)")
	need.port(p.FirstReads != nil, "FirstReads (ReadRowAlone: the row alone)")
	if err := need.err(); err != nil {
		return nil, err
	}
	d := &Dispatcher{core: c, sender: snd, budget: p.Budget, scheduler: p.Scheduler,
		admission: admission{limits: l, limiter: p.Limiter, challenges: p.Challenges, fingerprints: p.Fingerprints,
			numberOf: p.NumberOf, timeline: p.Timeline},
		streamMarks: streamMarks{progress: p.Progress, rule: c.HandBack()},
		firstReads:  p.FirstReads, sleep: p.Sleep, jitter: p.Jitter}
	d.sender.core = &d.core
	d.streamMarks.clock = d.core.Now
	d.core = d.core.WithGiveBack(d.releaseUnsent) // the only use case that gives a count back
	if d.firstReads == ReadRowAlone {
		d.firstReads = rowFirst{store: c.store}
	}
	if d.sleep == nil {
		d.sleep = sleepTimer
	}
	if d.jitter == nil {
		d.jitter = rand.Float64
	}
	return d, nil
}

// Reconciler sweeps dispatching and unknown entries and hands back what no
// dispatch picked up (functions/reconcile).
type Reconciler struct {
	core      Core
	sender    sender
	scheduler Scheduler
	progress  Progress
}

// NewReconciler builds the reconcile use case: every use case's ports,
// Transports, Opener and (where it reports events) Proofs for a transport
// that allows a same-key retry, Scheduler and Progress (or NoProgress).
func NewReconciler(p Ports) (*Reconciler, error) {
	c, err := newCore("reconcile", p)
	if err != nil {
		return nil, err
	}
	// Reconcile sends only a same-key retry, through a transport that
	// honours an idempotency key.
	snd, err := newSender("reconcile", p, func(caps Capabilities) bool { return caps.IdempotencyWindow > 0 })
	if err != nil {
		return nil, err
	}
	need := portCheck{useCase: "reconcile"}
	need.port(p.Scheduler != nil && p.Scheduler != NoScheduler, "Scheduler (re-drive hands entries back through it)")
	need.port(p.Progress != nil, "Progress (NoProgress: every due entry is handed back)")
	if err := need.err(); err != nil {
		return nil, err
	}
	r := &Reconciler{core: c, sender: snd, scheduler: p.Scheduler, progress: p.Progress}
	r.sender.core = &r.core
	return r, nil
}

// The explicit off values.
var (
	// NoBudget paces nothing: every send gets its slot at once.
	NoBudget Budget = noBudget{}
	// NoScheduler hands nothing back: a deferred entry waits for reconcile's
	// re-drive, which needs a real Scheduler.
	NoScheduler Scheduler = noScheduler{}
	// NoProgress keeps no marks: re-drive hands back every due entry, and
	// dispatch holds its send slot on the entry.
	NoProgress Progress = noProgress{}
	// NoTimeline finds no older challenge to supersede when an admission
	// is refused: their counts wait until they wake.
	NoTimeline Timeline = noTimeline{}
)

// errOff is what an off value answers where it cannot stand in.
var errOff = errors.New("ledger: this port is switched off")

type noBudget struct{}

func (noBudget) Reserve(_ context.Context, _ Channel, now, _ time.Time) (time.Time, error) {
	return now, nil
}

type noScheduler struct{}

func (noScheduler) Schedule(context.Context, string, time.Time) error { return errOff }

type noProgress struct{}

func (noProgress) Lagging(context.Context, time.Duration, time.Time, time.Time) (Lag, error) {
	return Lag{}, nil
}
func (noProgress) Advance(context.Context, time.Time, time.Time) error { return nil }
func (noProgress) Redriven(context.Context, time.Time) error           { return nil }
func (noProgress) Marks(context.Context) (Marks, error)                { return Marks{}, nil }
func (noProgress) Seen() Marks                                         { return Marks{} }

type noTimeline struct{}

func (noTimeline) ListByRef(context.Context, RefKind, string, time.Time, int) ([]Entry, error) {
	return nil, nil
}
