// Package dispatch sends claimed and due deferred entries
// (functions/dispatch): its decision is the list of stages in
// Dispatcher.dispatchRow.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/resetledger/resetledger/internal/usecase/admission"
	"github.com/resetledger/resetledger/internal/usecase/pacing"
	"github.com/resetledger/resetledger/internal/usecase/sending"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Dispatch sends the entry key's message at most once per attempt: only the
// caller that wins the conditional move to dispatching sends, and a lost
// race before the send is decided afresh on the row read again.
func (d *Dispatcher) Dispatch(ctx context.Context, key string, w ledger.Worker) (ledger.DispatchResult, error) {
	e, err := d.core.Store().Get(ctx, key)
	if err != nil {
		return ledger.DispatchResult{}, fmt.Errorf("dispatch %s: %w", key, err)
	}
	return d.dispatch(ctx, e, w, false)
}

// DispatchRow is Dispatch for the stream record that announced the claim,
// whose new image is image. The decision is made from the row as a
// consistent read returns it, never from the image (docs/design.md, "A
// function acts only on what its own source delivered"): an image at the
// row's version that differs from it, or at a version the row never had,
// was not written by the table. It causes no write and is answered
// OutcomeContradicted, with the fields that differ.
//
// The row, the newest challenge and the content are read together
// (FirstReads), keyed by the image: a contradicted image uses neither of
// the other two.
func (d *Dispatcher) DispatchRow(ctx context.Context, image ledger.Entry, w ledger.Worker) (ledger.DispatchResult, error) {
	q := d.firstQuery(image)
	r, err := d.firstReads.ReadFirst(ctx, q)
	if err != nil {
		return ledger.DispatchResult{}, fmt.Errorf("dispatch %s: %w", image.Key, err)
	}
	e := r.Entry
	if diff := ledger.Contradiction(image, e); diff != nil {
		return ledger.DispatchResult{Outcome: ledger.OutcomeContradicted, Entry: e, Contradicted: diff}, nil
	}
	return d.primed(q, r).dispatch(ctx, e, w, true)
}

// dispatch decides for the entry e as just read; streamed says the delivery
// is the ledger stream's.
func (d *Dispatcher) dispatch(ctx context.Context, e ledger.Entry, w ledger.Worker, streamed bool) (ledger.DispatchResult, error) {
	var res ledger.DispatchResult
	var sent, raced bool
	err := d.core.OnConflict(ctx, e, func(e ledger.Entry) (err error) {
		res, sent, err = d.dispatchRow(ctx, e, w, streamed)
		return err
	}, func(ledger.Entry) bool { raced = true; return !sent }) // a lost race before the send is decided afresh
	if err == nil && raced && e.State == ledger.Claimed && res.Outcome == ledger.OutcomeSkipped {
		// The claim this dispatch admitted had ended meanwhile (another
		// worker limited, superseded or expired it): a count taken for it
		// is given back.
		err = d.gate.ReleaseUnsent(ctx, res.Entry)
	}
	return res, err
}

// open returns the entry's opened content. Content that cannot be read or
// authenticated quarantines the entry: it returns nil and the result of that.
func (d *Dispatcher) open(ctx context.Context, e ledger.Entry, w ledger.Worker) (*ledger.Message, ledger.DispatchResult, error) {
	msg, err := d.sender.OpenContent(ctx, e)
	if errors.Is(err, ledger.ErrContentUnavailable) || errors.Is(err, ledger.ErrNotFound) {
		const reason = "sealed content unavailable or failed verification; nothing sent"
		c, terr := d.core.Transition(e, ledger.Quarantined, w, reason, func(n *ledger.Entry) { n.ClearDeferral(); n.Reason = reason })
		if terr != nil {
			return nil, ledger.DispatchResult{}, terr
		}
		res, err := d.core.Apply(ctx, c, ledger.OutcomeQuarantined)
		return nil, res, err
	}
	if err != nil {
		return nil, ledger.DispatchResult{}, fmt.Errorf("dispatch %s: %w", e.Key, err)
	}
	return &msg, ledger.DispatchResult{}, nil
}

// admitClaimed admits a claimed entry through the send limits, before it
// books a slot: a limited entry costs no send capacity. A deferred entry was
// admitted before it was deferred. It returns the opened content if the
// limits needed it, when they counted it, and the result of ending the entry
// if they stopped it.
func (d *Dispatcher) admitClaimed(ctx context.Context, e ledger.Entry, w ledger.Worker) (_ *ledger.Message, admittedAt time.Time, _ ledger.DispatchResult, _ error) {
	if e.State != ledger.Claimed || !d.gate.Limits().Covers(e.Identity.Channel) {
		return nil, time.Time{}, ledger.DispatchResult{}, nil
	}
	var msg ledger.Message
	if d.gate.Limits().NeedsAddress(e.Identity.Channel) {
		m, res, err := d.open(ctx, e, w)
		if m == nil {
			return nil, time.Time{}, res, err
		}
		msg = *m
	}
	at, res, err := d.gate.Admit(ctx, e, w, msg)
	if res.Outcome != "" || err != nil || msg.To == "" {
		return nil, at, res, err
	}
	return &msg, at, ledger.DispatchResult{}, nil
}

// begin writes the move of e to dispatching that starts one attempt. The
// content read, decryption and budget booking before it took time: the
// write is conditioned on the clock as it reads now, not as it read before
// them.
func (d *Dispatcher) begin(ctx context.Context, e ledger.Entry, w ledger.Worker) (ledger.Entry, error) {
	now := d.core.Now()
	c, err := d.core.Transition(e, ledger.Dispatching, w, dispatchReason(e), func(n *ledger.Entry) {
		n.Attempts++
		if n.FirstAttemptAt.IsZero() {
			n.FirstAttemptAt = now
		}
		n.LeaseUntil = now.Add(d.core.Policy().Lease)
		n.ClearDeferral()
		n.Reason = ""
	})
	if err != nil {
		return e, err
	}
	c.NotExpiredBy = now.Add(d.core.Policy().ExpiryMargin)
	e, err = d.core.Write(ctx, c)
	if err != nil {
		return e, fmt.Errorf("dispatch %s: begin: %w", c.Next.Key, err)
	}
	return e, nil
}

func dispatchReason(e ledger.Entry) string {
	if e.State == ledger.Deferred {
		return "retry after not sent: " + e.NotSentCode
	}
	return "dispatch started"
}

// send makes one transport attempt for the dispatching entry e and records
// its outcome.
func (d *Dispatcher) send(ctx context.Context, e ledger.Entry, tr ledger.Transport, msg ledger.Message, w ledger.Worker) (ledger.DispatchResult, error) {
	ack, err := d.sender.Attempt(ctx, e, tr, msg)
	var ns *ledger.NotSent
	if errors.As(err, &ns) {
		return d.notSent(ctx, e, ns, w)
	}
	to, out, reason, ackID := sending.OutcomeOf(ack, err)
	return d.sender.RecordOutcome(ctx, e, to, out, reason, ackID, w)
}

// Dispatcher sends claimed and due deferred entries (functions/dispatch).
type Dispatcher struct {
	core       ledger.Core
	sender     sending.Sender
	gate       admission.Gate // the send limits and supersession
	marks      pacing.Marks   // how far it has read, for reconcile
	budget     ledger.Budget
	scheduler  ledger.Scheduler
	firstReads ledger.FirstReads
	sleep      func(ctx context.Context, d time.Duration) error
	jitter     func() float64
}

// bind points the Sender and the Gate at d's own Core: they write through
// it, so they see its primed content and its give-back hook.
func (d *Dispatcher) bind() {
	d.sender = d.sender.For(&d.core)
	d.gate = d.gate.For(&d.core)
}

// Read records what dispatch took from src (pacing.Marks.Read).
func (d *Dispatcher) Read(ctx context.Context, src ledger.Source, t time.Time) error {
	return d.marks.Read(ctx, src, t)
}

// Deps are what dispatch needs beyond the Core. A control a stage turns
// off is its explicit off value (ledger.NoBudget, NoScheduler, NoProgress,
// NoTimeline, ReadRowAlone), never a nil.
type Deps struct {
	// Send is what it sends with: a transport per channel, the opener, and
	// the proofs when a transport reports events.
	Send sending.Ports
	// Admission is the send-limit policy and what its rules read.
	Admission admission.Ports
	// Budget paces sends per channel; Scheduler hands deferred entries back;
	// Progress keeps how far dispatch has read, for reconcile.
	Budget    ledger.Budget
	Scheduler ledger.Scheduler
	Progress  ledger.Progress
	// FirstReads reads a stream record's row, newest challenge and content
	// in one round trip.
	FirstReads ledger.FirstReads
	// Sleep waits for d or until ctx ends (a timer if nil); Jitter returns
	// a number in [0, 1) for backoff jitter (math/rand if nil).
	Sleep  func(ctx context.Context, d time.Duration) error
	Jitter func() float64
}

// New builds the dispatch use case, refusing a dependency its settings
// need that is missing, by name.
func New(c ledger.Core, p Deps) (*Dispatcher, error) {
	snd, err := sending.New("dispatch", p.Send, func(ledger.Capabilities) bool { return true })
	if err != nil {
		return nil, err
	}
	need := ledger.PortCheck{UseCase: "dispatch"}
	need.Port(p.Budget != nil, "Budget (NoBudget: unpaced)")
	need.Port(p.Scheduler != nil, "Scheduler (NoScheduler: nothing handed back)")
	need.Port(p.Progress != nil, "Progress (NoProgress: no marks)")
	a := p.Admission
	l := a.Limits
	need.Port(!l.Counting() || a.Limiter != nil, "Limiter (the send limits count)")
	need.Port(!l.Destination.On() || a.Fingerprints != nil, "Fingerprints (the destination cap is on)")
	need.Port(!l.NeedsNumber() || a.NumberOf != nil, "NumberOf (an SMS region or number-kind rule is on)")
	need.Port(!l.Supersede || a.Challenges != nil, "Challenges (the limits supersede older challenges)")
	need.Port(!l.Supersede || a.Timeline != nil, "Timeline (the limits supersede older challenges; NoTimeline: their counts wait)")
	need.Port(p.FirstReads != nil, "FirstReads (ReadRowAlone: the row alone)")
	if err := need.Err(); err != nil {
		return nil, err
	}
	d := &Dispatcher{core: c, sender: snd, budget: p.Budget, scheduler: p.Scheduler,
		gate:       admission.New(a),
		firstReads: p.FirstReads, sleep: p.Sleep, jitter: p.Jitter}
	d.bind()
	d.marks = pacing.NewMarks(p.Progress, pacing.RuleFor(c.Policy()), d.core.Now)
	d.core = d.core.WithGiveBack(d.gate.ReleaseUnsent) // the only use case that gives a count back
	if d.firstReads == ledger.ReadRowAlone {
		d.firstReads = rowFirst{store: c.Store()}
	}
	if d.sleep == nil {
		d.sleep = sleepTimer
	}
	if d.jitter == nil {
		d.jitter = rand.Float64
	}
	return d, nil
}
