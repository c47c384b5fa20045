package dispatch

import (
	"context"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// dispatchRow makes the dispatch decision for the entry e as read; streamed
// says the delivery is the ledger stream's. sent reports whether the
// transport was called; a conflict before that is safe to retry.
//
// The decision is the list of stages below, in order: each answers go on
// or stop (with the result), and none decides what comes after it.
func (d *Dispatcher) dispatchRow(ctx context.Context, e ledger.Entry, w ledger.Worker, streamed bool) (_ ledger.DispatchResult, sent bool, _ error) {
	dec := &decision{s: d, e: e, w: w, now: d.core.Now(), streamed: streamed}
	for _, stage := range []func(context.Context) (step, error){
		dec.due,            // claimed, or deferred and due
		dec.evidence,       // a deferred attempt the provider reports it took is not sent again
		dec.unexpired,      // an expired challenge ends expired
		dec.transport,      // the channel's transport
		dec.newest,         // a newer challenge supersedes this one
		dec.admission,      // the send limits count it, or stop it
		dec.slot,           // a send slot: now, soon, or deferred to a later one
		dec.open,           // the sealed content, opened and checked
		dec.wait,           // wait for the slot, then supersession again
		dec.begin,          // the move to dispatching
		dec.stillUnexpired, // still unexpired once begun (its answer can come late)
		dec.send,           // the transport call and its outcome
	} {
		st, err := stage(ctx)
		if st.stop || err != nil {
			return st.res, dec.begun, err
		}
	}
	panic("dispatch: the decision ended without a result") // d.send always stops
}

// decision is one dispatch decision in progress: the entry as it stands
// and what the stages before have learned.
type decision struct {
	s        *Dispatcher
	e        ledger.Entry
	w        ledger.Worker
	now      time.Time // when the decision started
	streamed bool
	tr       ledger.Transport
	msg      *ledger.Message // the opened content, once a stage opened it
	at       time.Time       // the send slot
	waited   time.Duration   // how long it waited for the slot
	begun    bool            // the entry moved to dispatching: the transport is called next
}

// step is a stage's answer: stop, with res as the decision's result, or go
// on to the next stage.
type step struct {
	res  ledger.DispatchResult
	stop bool
}

var next = step{}

func stop(res ledger.DispatchResult) step { return step{res: res, stop: true} }

func (d *decision) due(context.Context) (step, error) {
	switch e := d.e; {
	case e.State == ledger.Claimed:
	case e.State == ledger.Deferred && d.now.Add(d.s.core.Policy().BudgetWait).Before(e.NextAttemptAt):
		return stop(ledger.DispatchResult{Outcome: ledger.OutcomeNotDue, Entry: e}), nil
	case e.State == ledger.Deferred:
	default:
		return stop(ledger.DispatchResult{Outcome: ledger.OutcomeSkipped, Entry: e}), nil
	}
	return next, nil
}

func (d *decision) evidence(ctx context.Context) (step, error) {
	ev, ok := d.e.ProviderEvidence()
	if !ok || d.e.State != ledger.Deferred {
		return next, nil
	}
	// A deferred entry whose earlier attempt the provider reports it took
	// (and perhaps bounced): another attempt would send twice.
	res, err := d.s.core.AcceptOnEvidence(ctx, d.e, d.w, ev, "dispatch: not sent again")
	return stop(ledger.DispatchResult{Outcome: ledger.OutcomeSkipped, Entry: res}), err
}

func (d *decision) unexpired(ctx context.Context) (step, error) {
	if !d.s.core.ExpiredAt(d.e.ExpiresAt, d.now) {
		return next, nil
	}
	res, err := d.s.core.Expire(ctx, d.e, d.w, ledger.ExpiryReason(d.e), ledger.OutcomeExpired)
	return stop(res), err
}

func (d *decision) transport(context.Context) (step, error) {
	tr, ok := d.s.sender.Transport(d.e.Identity.Channel)
	if !ok {
		return next, fmt.Errorf("dispatch %s: %s: %w", d.e.Key, d.e.Identity.Channel, ledger.ErrNoTransport)
	}
	d.tr = tr
	return next, nil
}

func (d *decision) newest(ctx context.Context) (step, error) {
	res, done, err := d.s.gate.SupersedeIfNewer(ctx, d.e, d.w)
	return step{res: res, stop: done}, err
}

func (d *decision) admission(ctx context.Context) (step, error) {
	msg, admitted, res, err := d.s.admitClaimed(ctx, d.e, d.w)
	if res.Outcome != "" || err != nil {
		return stop(res), err
	}
	if !admitted.IsZero() {
		d.e.AdmittedAt = admitted // recorded by the next write: the hold, or the begin
	}
	d.msg = msg
	return next, nil
}

func (d *decision) slot(ctx context.Context) (step, error) {
	at, deferred, err := d.s.slot(ctx, d.e, d.w, d.now)
	if deferred.Outcome != "" || err != nil {
		return stop(deferred), err
	}
	d.at = at
	return next, nil
}

// open opens the content for a send this dispatch makes: an entry deferred
// to a later slot is decrypted once, by the dispatch that sends it (and once
// more before, when the limits need its address).
func (d *decision) open(ctx context.Context) (step, error) {
	if d.msg != nil {
		return next, nil
	}
	m, res, err := d.s.open(ctx, d.e, d.w)
	if m == nil {
		return stop(res), err
	}
	d.msg = m
	return next, nil
}

func (d *decision) wait(ctx context.Context) (step, error) {
	e, waited, err := d.s.waitForSlot(ctx, d.e, d.w, d.now, d.at, d.streamed)
	if err != nil {
		return next, err
	}
	d.e, d.waited = e, waited
	if waited == 0 {
		return next, nil
	}
	// A newer challenge claimed while this one waited for its slot
	// supersedes it still: it has not reached dispatching.
	return d.newest(ctx)
}

func (d *decision) begin(ctx context.Context) (step, error) {
	e, err := d.s.begin(ctx, d.e, d.w)
	if err != nil {
		return next, err
	}
	d.e, d.begun = e, true
	return next, nil
}

// stillUnexpired: the begin's answer can come back late (a slow or retried
// request, a paused worker): the send starts only if the challenge still
// counts as unexpired now. Nothing was sent; the entry says so.
func (d *decision) stillUnexpired(ctx context.Context) (step, error) {
	if !d.s.core.ExpiredAt(d.e.ExpiresAt, d.s.core.Now()) {
		return next, nil
	}
	res, err := d.s.core.Expire(ctx, d.e, d.w, "challenge expired before the send started; nothing sent", ledger.OutcomeExpired)
	return stop(res), err
}

func (d *decision) send(ctx context.Context) (step, error) {
	res, err := d.s.send(ctx, d.e, d.tr, *d.msg, d.w)
	res.BudgetWait = d.waited
	return stop(res), err
}
