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

// Dispatcher sends claimed and due deferred entries (functions/dispatch).
type Dispatcher struct {
	core        Core
	sender      Sender
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
	snd, err := NewSender("dispatch", SenderPorts{Transports: p.Transports, Opener: p.Opener, Proofs: p.Proofs}, func(Capabilities) bool { return true })
	if err != nil {
		return nil, err
	}
	need := PortCheck{UseCase: "dispatch"}
	need.Port(p.Budget != nil, "Budget (NoBudget: unpaced)")
	need.Port(p.Scheduler != nil, "Scheduler (NoScheduler: nothing handed back)")
	need.Port(p.Progress != nil, "Progress (NoProgress: no marks)")
	l := p.Limits
	need.Port(!l.counting() || p.Limiter != nil, "Limiter (the send limits count)")
	need.Port(!l.Destination.On() || p.Fingerprints != nil, "Fingerprints (the destination cap is on)")
	need.Port(!l.needsNumber() || p.NumberOf != nil, "NumberOf (an SMS region or number-kind rule is on)")
	need.Port(!l.Supersede || p.Challenges != nil, "Challenges (the limits supersede older challenges)")
	need.Port(!l.Supersede || p.Timeline != nil, "Timeline (the limits supersede older challenges; NoTimeline: their counts wait)")
	need.Port(p.FirstReads != nil, "FirstReads (ReadRowAlone: the row alone)")
	if err := need.Err(); err != nil {
		return nil, err
	}
	d := &Dispatcher{core: c, sender: snd, budget: p.Budget, scheduler: p.Scheduler,
		admission: admission{limits: l, limiter: p.Limiter, challenges: p.Challenges, fingerprints: p.Fingerprints,
			numberOf: p.NumberOf, timeline: p.Timeline},
		streamMarks: streamMarks{progress: p.Progress, rule: c.HandBack()},
		firstReads:  p.FirstReads, sleep: p.Sleep, jitter: p.Jitter}
	d.sender = d.sender.For(&d.core)
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
