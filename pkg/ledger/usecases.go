package ledger

import (
	"context"
	"errors"
	"time"
)

// One type per use case, each holding only the ports it uses. Each is
// built by its constructor from Ports, which refuses a missing port with a
// *MissingPortError naming it; a control a stage turns off is an explicit
// off value below, so a wiring slip is an error at start, never a control
// silently off.

// Claimer claims intents (functions/claim).
type Claimer struct {
	core
	challenges Challenges
}

// NewClaimer builds the claim use case: Store, Content, Clock, Policy, and
// Challenges when the limits supersede older challenges.
func NewClaimer(p Ports) (*Claimer, error) {
	c, err := newCore("claim", p)
	if err != nil {
		return nil, err
	}
	if p.Limits.Supersede && p.Challenges == nil {
		return nil, &MissingPortError{UseCase: "claim", Ports: []string{"Challenges (the limits supersede older challenges)"}}
	}
	return &Claimer{core: c, challenges: p.Challenges}, nil
}

// sender is what dispatch and reconcile's same-key retry share: the
// transports, the opener of sealed content and the attempt proofs.
type sender struct {
	core
	transports map[Channel]Transport
	opener     Opener
	proofs     Proofs
}

// newSender checks the sending ports: a transport per channel given, and,
// for the transports whose sends this use case makes (sends), the opener
// of their content and, where they report provider events, Proofs (those
// sends carry a proof).
func newSender(role string, c core, p Ports, sends func(Capabilities) bool) (sender, error) {
	var missing []string
	if len(p.Transports) == 0 {
		missing = append(missing, "Transports")
	}
	opens, events := false, false
	for _, ch := range Channels {
		tr, ok := p.Transports[ch]
		if !ok {
			continue
		}
		if tr == nil {
			missing = append(missing, "Transports["+string(ch)+"]")
			continue
		}
		if caps := tr.Capabilities(); sends(caps) {
			opens, events = true, events || caps.Events
		}
	}
	if opens && p.Opener == nil {
		missing = append(missing, "Opener")
	}
	if events && p.Proofs == nil {
		missing = append(missing, "Proofs (a transport reports provider events: its sends carry a proof)")
	}
	if len(missing) > 0 {
		return sender{}, &MissingPortError{UseCase: role, Ports: missing}
	}
	return sender{core: c, transports: p.Transports, opener: p.Opener, proofs: p.Proofs}, nil
}

// Dispatcher sends claimed and due deferred entries (functions/dispatch).
type Dispatcher struct {
	sender
	budget       Budget
	scheduler    Scheduler
	progress     Progress
	challenges   Challenges
	fingerprints Fingerprinter
	numberOf     NumberOf
	timeline     Timeline
	sleepFn      func(ctx context.Context, d time.Duration) error
	jitter       func() float64
}

// NewDispatcher builds the dispatch use case. Beyond every use case's
// ports it needs Opener, Transports, Budget (or NoBudget), Scheduler (or
// NoScheduler), Progress (or NoProgress), Proofs when a transport reports
// events, and the ports the limits' rules need: Limiter (never KeepCounts)
// when any rule counts, Fingerprints for the destination cap, NumberOf for
// the SMS region and kind rules, Challenges and Timeline (or NoTimeline)
// when older challenges are superseded.
func NewDispatcher(p Ports) (*Dispatcher, error) {
	c, err := newCore("dispatch", p)
	if err != nil {
		return nil, err
	}
	snd, err := newSender("dispatch", c, p, func(Capabilities) bool { return true })
	if err != nil {
		return nil, err
	}
	var missing []string
	need := func(ok bool, port string) {
		if !ok {
			missing = append(missing, port)
		}
	}
	need(p.Budget != nil, "Budget (NoBudget: unpaced)")
	need(p.Scheduler != nil, "Scheduler (NoScheduler: nothing handed back)")
	need(p.Progress != nil, "Progress (NoProgress: no marks)")
	l := p.Limits
	need(!l.counting() || p.Limiter != KeepCounts, "Limiter (the send limits are on; KeepCounts counts nothing)")
	need(!l.Destination.On() || p.Fingerprints != nil, "Fingerprints (the destination cap is on)")
	need(!l.needsNumber() || p.NumberOf != nil, "NumberOf (an SMS region or number-kind rule is on)")
	need(!l.Supersede || p.Challenges != nil, "Challenges (the limits supersede older challenges)")
	need(!l.Supersede || p.Timeline != nil, "Timeline (the limits supersede older challenges; NoTimeline: their counts wait)")
	if len(missing) > 0 {
		return nil, &MissingPortError{UseCase: "dispatch", Ports: missing}
	}
	return &Dispatcher{sender: snd, budget: p.Budget, scheduler: p.Scheduler, progress: p.Progress,
		challenges: p.Challenges, fingerprints: p.Fingerprints, numberOf: p.NumberOf, timeline: p.Timeline,
		sleepFn: p.Sleep, jitter: p.Jitter}, nil
}

// Reconciler sweeps dispatching and unknown entries and hands back what no
// dispatch picked up (functions/reconcile).
type Reconciler struct {
	sender
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
	snd, err := newSender("reconcile", c, p, func(caps Capabilities) bool { return caps.IdempotencyWindow > 0 })
	if err != nil {
		return nil, err
	}
	var missing []string
	if p.Scheduler == nil || p.Scheduler == NoScheduler {
		missing = append(missing, "Scheduler (re-drive hands rows back through it)")
	}
	if p.Progress == nil {
		missing = append(missing, "Progress (NoProgress: every due row is handed back)")
	}
	if len(missing) > 0 {
		return nil, &MissingPortError{UseCase: "reconcile", Ports: missing}
	}
	return &Reconciler{sender: snd, scheduler: p.Scheduler, progress: p.Progress}, nil
}

// Expirer ends held and claimed entries whose challenge expired
// (functions/expire).
type Expirer struct{ core }

// NewExpirer builds the expire use case from every use case's ports.
func NewExpirer(p Ports) (*Expirer, error) {
	c, err := newCore("expire", p)
	return &Expirer{c}, err
}

// EventRecorder records provider events (functions/events).
type EventRecorder struct {
	core
	proofs Proofs
}

// NewEventRecorder builds the provider-events use case: every use case's
// ports and Proofs, which every event's proof must verify under.
func NewEventRecorder(p Ports) (*EventRecorder, error) {
	c, err := newCore("events", p)
	if err != nil {
		return nil, err
	}
	if p.Proofs == nil {
		return nil, &MissingPortError{UseCase: "events", Ports: []string{"Proofs"}}
	}
	return &EventRecorder{core: c, proofs: p.Proofs}, nil
}

// Resolver records operators' decisions on quarantined entries
// (functions/operate).
type Resolver struct{ core }

// NewResolver builds the operator use case from every use case's ports.
func NewResolver(p Ports) (*Resolver, error) {
	c, err := newCore("operate", p)
	return &Resolver{c}, err
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
	// KeepCounts is the Limiter of a use case that never gives a send-limit
	// count back (the deployed expire, reconcile, events and operator
	// functions: "too high, never too low", docs/design.md). It admits
	// nothing: dispatch refuses it while the limits count.
	KeepCounts Limiter = keepCounts{}
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

type keepCounts struct{}

func (keepCounts) Admit(context.Context, string, []Count, time.Time, time.Time) (Admission, error) {
	return Admission{}, errOff
}
func (keepCounts) Release(context.Context, string) error { return nil }
