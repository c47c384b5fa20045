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
	panic("ledger: dispatch decision ended without a result") // d.send always stops
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
	if e.State != ledger.Claimed || !d.gate.LimitsOn(e.Identity.Channel) {
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

// waitForSlot waits until the send slot at booked at now, if it is later.
// It returns the entry as it then stands and how long it waited.
func (d *Dispatcher) waitForSlot(ctx context.Context, e ledger.Entry, w ledger.Worker, now, at time.Time, streamed bool) (ledger.Entry, time.Duration, error) {
	wait := at.Sub(now)
	if wait <= 0 {
		return e, 0, nil
	}
	// Hold a booked slot on the entry before waiting for it. The booking
	// is made before any conditional write and is not undone when one
	// loses; while this dispatch waits, another delivery of the same
	// entry (a re-drive, a duplicate wake-up, the stream record) would
	// otherwise find it still claimed and book a slot of its own, and
	// one of the two slots would go unused. Held, the entry is deferred
	// to this slot: the other delivery waits for the same slot and
	// loses the move to dispatching, booking nothing. (A provider's
	// wait without a budget books nothing and needs no hold; nor does a
	// wait no other delivery can interrupt: holdsSlot, streamKeepsClaimUntil.)
	if d.budget != ledger.NoBudget && pacing.HoldsSlot(e, at) && !(streamed && d.marks.StreamKeepsClaimUntil(ctx, e, at)) {
		reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
		var err error
		if e, err = d.deferral(ctx, e, w, reason, ledger.BudgetCode, at, true); err != nil {
			return e, 0, err
		}
	}
	if err := d.sleep(ctx, wait); err != nil {
		return e, 0, fmt.Errorf("dispatch %s: waiting for the send-rate budget: %w", e.Key, err)
	}
	return e, wait, nil
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

// slotGrace is how late a deferred entry may wake and still use the send time
// it booked; later than that it books a new one, so a late wake-up can
// never bunch sends above the budget.
const slotGrace = time.Second

// SendReserve is the time an invocation must have left to start a send: a
// transport call that the function's timeout cuts off would leave the entry
// dispatching, then unknown. With less left, the entry is handed to the
// dispatch queue instead.
const SendReserve = 10 * time.Second

// slot returns the send time of the attempt about to start from entry e: the
// one a deferred entry holds, or a new booking in the budget. When the send
// time is further away than this dispatch may wait (Policy.BudgetWait, and
// never past the invocation's deadline minus SendReserve) the entry is
// deferred to it instead (deferred.Outcome is set); when no send time is
// left before the challenge's deadline the entry ends expired.
func (d *Dispatcher) slot(ctx context.Context, e ledger.Entry, w ledger.Worker, now time.Time) (at time.Time, deferred ledger.DispatchResult, err error) {
	booked, code := true, ledger.BudgetCode
	switch {
	case e.State == ledger.Deferred && !e.SlotAt.IsZero() && !now.After(e.SlotAt.Add(slotGrace)):
		at = e.SlotAt
	case d.budget == ledger.NoBudget:
		at, booked, code = now, false, ledger.HandOffCode
		if e.State == ledger.Deferred && e.NextAttemptAt.After(now) {
			at, code = e.NextAttemptAt, e.NotSentCode // the provider's wait
		}
	default:
		earliest := now
		if e.State == ledger.Deferred && e.NextAttemptAt.After(now) {
			earliest = e.NextAttemptAt // the provider's wait, not shortened by BudgetWait
		}
		// The last send time the move to dispatching still accepts.
		deadline := e.ExpiresAt.Add(-d.core.Policy().ExpiryMargin - ledger.Precision)
		at, err = d.budget.Reserve(ctx, e.Identity.Channel, earliest, deadline)
		if errors.Is(err, ledger.ErrNoBudget) {
			res, err := d.core.Expire(ctx, e, w, ledger.NotSentReason(ledger.BudgetCode), ledger.OutcomeExpired)
			return time.Time{}, res, err
		}
		if err != nil {
			return time.Time{}, ledger.DispatchResult{}, fmt.Errorf("dispatch %s: send-rate budget: %w", e.Key, err)
		}
	}
	if at.Sub(now) <= d.maxWait(ctx) {
		return at, ledger.DispatchResult{}, nil
	}
	reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
	if code == ledger.HandOffCode {
		reason = "no time left in this invocation to send; handed to the dispatch queue"
	} else if !booked {
		reason = fmt.Sprintf("waiting until %s as the provider asked (%s)", at.UTC().Format(time.RFC3339Nano), code)
	}
	res, err := d.deferTo(ctx, e, w, reason, code, at, booked)
	return time.Time{}, res, err
}

// maxWait is how long this dispatch may wait in-process before a send:
// Policy.BudgetWait, less if the invocation would not have SendReserve
// left after it (negative when it has not even that).
func (d *Dispatcher) maxWait(ctx context.Context) time.Duration {
	wait := d.core.Policy().BudgetWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)-SendReserve)
	}
	return wait
}

// deferTo records that the entry waits until at (holding that budget slot
// if booked) and schedules its wake-up. From claimed, dispatching or
// unknown it is a transition; a deferred entry records a deferral event.
func (d *Dispatcher) deferTo(ctx context.Context, e ledger.Entry, w ledger.Worker, reason, code string, at time.Time, booked bool) (ledger.DispatchResult, error) {
	got, err := d.deferral(ctx, e, w, reason, code, at, booked)
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	return ledger.DispatchResult{Outcome: ledger.OutcomeDeferred, Entry: got, ScheduleErr: d.schedule(ctx, got)}, nil
}

// deferral writes what deferTo records, without scheduling the wake-up.
func (d *Dispatcher) deferral(ctx context.Context, e ledger.Entry, w ledger.Worker, reason, code string, at time.Time, booked bool) (ledger.Entry, error) {
	at = at.Truncate(ledger.Precision) // as stored
	mut := func(n *ledger.Entry) {
		n.NextAttemptAt = at
		n.SlotAt = time.Time{}
		if booked {
			n.SlotAt = at
		}
		n.NotSentCode = code
		n.LeaseUntil, n.NextCheckAt = time.Time{}, time.Time{}
		n.Reason = reason
	}
	var c ledger.Change
	if e.State == ledger.Deferred {
		c = d.core.Record(e, ledger.KindDeferral, ledger.Deferred, w, reason, mut)
	} else {
		var err error
		if c, err = d.core.Transition(e, ledger.Deferred, w, reason, mut); err != nil {
			return ledger.Entry{}, err
		}
	}
	c.Event.Code, c.Event.NextAttemptAt = code, at
	c.Event = ledger.Chain(e.Key, e.Last().Hash, c.Event)
	c.Next.History[len(c.Next.History)-1] = c.Event
	got, err := d.core.Write(ctx, c)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("%s -> deferred %s: %w", e.State, e.Key, err)
	}
	return got, nil
}

// RescheduleNotDue schedules the wake-up of a deferred entry again after a
// wake-up delivered it before it was due (res.Outcome OutcomeNotDue).
func (d *Dispatcher) RescheduleNotDue(ctx context.Context, res ledger.DispatchResult) error {
	if res.Outcome != ledger.OutcomeNotDue {
		return nil
	}
	return d.schedule(ctx, res.Entry)
}

// schedule asks for the deferred entry e to be dispatched at its next
// attempt time.
func (d *Dispatcher) schedule(ctx context.Context, e ledger.Entry) error {
	if d.scheduler == ledger.NoScheduler {
		return nil
	}
	if err := d.scheduler.Schedule(ctx, e.Key, e.NextAttemptAt); err != nil {
		return fmt.Errorf("schedule %s: %w", e.Key, err)
	}
	return nil
}

// sleepTimer waits for d or until ctx ends: the default Ports.Sleep.
func sleepTimer(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before attempt n+1 after attempt n was not sent:
// RetryBase * 2^(n-1) capped at RetryMax, the upper half of it random, or
// the provider's Retry-After if that is longer.
func (d *Dispatcher) backoff(n int, retryAfter time.Duration) time.Duration {
	delay := d.core.Policy().RetryBase
	for i := 1; i < n && delay < d.core.Policy().RetryMax; i++ {
		delay *= 2
	}
	delay = min(delay, d.core.Policy().RetryMax)
	delay = delay/2 + time.Duration(d.jitter()*float64(delay/2))
	return max(delay, retryAfter).Truncate(ledger.Precision)
}

// notSent records a provider's proof that attempt e.Attempts was not taken:
// the entry is deferred to its next attempt, or ends expired when that would
// start after the deadline (expiry minus the margin).
func (d *Dispatcher) notSent(ctx context.Context, e ledger.Entry, ns *ledger.NotSent, w ledger.Worker) (ledger.DispatchResult, error) {
	code := ns.Code
	if code == "" {
		code = "unspecified"
	}
	from := e
	var res ledger.DispatchResult
	err := d.core.OnConflict(ctx, e, func(e ledger.Entry) (err error) {
		next := d.core.Now().Add(d.backoff(e.Attempts, ns.RetryAfter))
		if d.core.ExpiredAt(e.ExpiresAt, next) && e.State == ledger.Dispatching {
			// Unknown (reconcile got there first) cannot end expired
			// directly; it is deferred, and its wake-up expires it.
			res, err = d.core.Expire(ctx, e, w, ledger.NotSentReason(code), ledger.OutcomeExpired)
		} else {
			reason := fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s", code, e.Attempts, next.UTC().Format(time.RFC3339Nano))
			res, err = d.deferTo(ctx, e, w, reason, code, next, false)
		}
		return err
	}, func(fresh ledger.Entry) bool {
		// As in recordOutcome: a concurrent write that kept the attempt (a
		// content-mismatch event, or reconcile marking the entry unknown
		// after its lease) does not lose the answer in hand.
		return fresh.Attempts == from.Attempts && (fresh.State == from.State || fresh.State == ledger.Unknown)
	})
	res.NotSent = ns
	return res, err
}

// rowFirst is what New makes of ReadRowAlone.
type rowFirst struct{ store ledger.Store }

func (r rowFirst) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	e, err := r.store.Get(ctx, q.Key)
	return ledger.FirstRead{Entry: e}, err
}

// firstQuery is what a dispatch of the record whose image is image reads
// first: the newest challenge only if supersession may end it, the
// content only for a row a dispatch may send.
func (d *Dispatcher) firstQuery(image ledger.Entry) ledger.FirstQuery {
	q := ledger.FirstQuery{Key: image.Key}
	if d.gate.Limits().Supersede && image.SubjectRef != "" && ledger.Supersedable(image) {
		st := ledger.StreamOf(image)
		q.Stream = &st
	}
	if image.State == ledger.Claimed || image.State == ledger.Deferred {
		q.ContentKey = ledger.ContentKey(image)
	}
	return q
}

// primed returns a copy of s for one dispatch whose first reads r answered:
// the first Newest of q's stream and the first Get of q's content come from
// r; every later call (after a lost race, or a wait for a slot) reads
// afresh.
func (d *Dispatcher) primed(q ledger.FirstQuery, r ledger.FirstRead) *Dispatcher {
	cp := *d
	if q.Stream != nil && r.Newest != nil {
		cp.gate = cp.gate.WithNewest(&primedNewest{Challenges: d.gate.Challenges(), stream: *q.Stream, read: *r.Newest})
	}
	if q.ContentKey != "" && r.Content != nil {
		cp.core = cp.core.WithContent(&primedContent{ContentStore: d.core.Content(), key: q.ContentKey, read: *r.Content})
	}
	cp.sender = cp.sender.For(&cp.core)
	cp.gate = cp.gate.For(&cp.core)
	return &cp
}

// primedNewest answers the first Newest of its stream from a read already
// made.
type primedNewest struct {
	ledger.Challenges
	stream ledger.SubjectStream
	read   ledger.Found[ledger.Challenge]
	used   bool
}

func (p *primedNewest) Newest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	if p.used || ref != p.stream {
		return p.Challenges.Newest(ctx, ref)
	}
	p.used = true
	return p.read.Value, p.read.OK, nil
}

// primedContent answers the first Get of its key from a read already made.
type primedContent struct {
	ledger.ContentStore
	key  string
	read ledger.Found[[]byte]
	used bool
}

func (p *primedContent) Get(ctx context.Context, key string) ([]byte, error) {
	if p.used || key != p.key {
		return p.ContentStore.Get(ctx, key)
	}
	p.used = true
	if !p.read.OK {
		return nil, ledger.ErrNotFound
	}
	return p.read.Value, nil
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
	d.sender = d.sender.For(&d.core)
	d.gate = d.gate.For(&d.core)
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
