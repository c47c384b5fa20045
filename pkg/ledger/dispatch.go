package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DispatchResult is the entry after Dispatch and what happened.
type DispatchResult struct {
	Outcome Outcome
	Entry   Entry
	// BudgetWait is how long this dispatch waited in-process for its
	// send-rate budget slot.
	BudgetWait time.Duration
	// NotSent is the provider's answer when it did not take the message.
	NotSent *NotSent
	// ScheduleErr is set when the entry was deferred but its wake-up could not
	// be scheduled; reconcile's re-drive finds it instead.
	ScheduleErr error
	// Contradicted names the fields in which the event's image differs from
	// the row (OutcomeContradicted only).
	Contradicted []string
}

// Dispatch sends the message of a claimed, or due deferred, entry at most
// once per attempt. Duplicate calls are harmless: only the caller that wins
// the conditional move to dispatching sends. The move also requires the
// challenge to be unexpired (minus the margin) in the database's condition.
//
// A conditional write before the send that loses (another worker moved the
// entry, or a content-mismatch event bumped its version) is not an error: the
// entry is read again and the decision made afresh, so a lost race is a skip
// and a write that kept the entry due never costs the send.
func (s *Dispatcher) Dispatch(ctx context.Context, key string, w Worker) (DispatchResult, error) {
	e, err := s.core.Store().Get(ctx, key)
	if err != nil {
		return DispatchResult{}, fmt.Errorf("dispatch %s: %w", key, err)
	}
	return s.dispatch(ctx, e, w, false)
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
func (s *Dispatcher) DispatchRow(ctx context.Context, image Entry, w Worker) (DispatchResult, error) {
	q := s.firstQuery(image)
	r, err := s.firstReads.ReadFirst(ctx, q)
	if err != nil {
		return DispatchResult{}, fmt.Errorf("dispatch %s: %w", image.Key, err)
	}
	e := r.Entry
	if diff := Contradiction(image, e); diff != nil {
		return DispatchResult{Outcome: OutcomeContradicted, Entry: e, Contradicted: diff}, nil
	}
	return s.primed(q, r).dispatch(ctx, e, w, true)
}

// dispatch decides for the entry e as just read; streamed says the delivery
// is the ledger stream's.
func (s *Dispatcher) dispatch(ctx context.Context, e Entry, w Worker, streamed bool) (DispatchResult, error) {
	var res DispatchResult
	var sent, raced bool
	err := s.core.OnConflict(ctx, e, func(e Entry) (err error) {
		res, sent, err = s.dispatchRow(ctx, e, w, streamed)
		return err
	}, func(Entry) bool { raced = true; return !sent }) // a lost race before the send is decided afresh
	if err == nil && raced && e.State == Claimed && res.Outcome == OutcomeSkipped {
		// The claim this dispatch admitted had ended meanwhile (another
		// worker limited, superseded or expired it): a count taken for it
		// is given back.
		err = s.releaseUnsent(ctx, res.Entry)
	}
	return res, err
}

// dispatchRow makes the dispatch decision for the entry e as read; streamed
// says the delivery is the ledger stream's. sent reports whether the
// transport was called; a conflict before that is safe to retry.
//
// The decision is the list of stages below, in order: each answers go on
// or stop (with the result), and none decides what comes after it.
func (s *Dispatcher) dispatchRow(ctx context.Context, e Entry, w Worker, streamed bool) (_ DispatchResult, sent bool, _ error) {
	d := &decision{s: s, e: e, w: w, now: s.core.Now(), streamed: streamed}
	for _, stage := range []func(context.Context) (step, error){
		d.due,            // claimed, or deferred and due
		d.evidence,       // a deferred attempt the provider reports it took is not sent again
		d.unexpired,      // an expired challenge ends expired
		d.transport,      // the channel's transport
		d.newest,         // a newer challenge supersedes this one
		d.admission,      // the send limits count it, or stop it
		d.slot,           // a send slot: now, soon, or deferred to a later one
		d.open,           // the sealed content, opened and checked
		d.wait,           // wait for the slot, then supersession again
		d.begin,          // the move to dispatching
		d.stillUnexpired, // still unexpired once begun (its answer can come late)
		d.send,           // the transport call and its outcome
	} {
		st, err := stage(ctx)
		if st.stop || err != nil {
			return st.res, d.begun, err
		}
	}
	panic("ledger: dispatch decision ended without a result") // d.send always stops
}

// decision is one dispatch decision in progress: the entry as it stands
// and what the stages before have learned.
type decision struct {
	s        *Dispatcher
	e        Entry
	w        Worker
	now      time.Time // when the decision started
	streamed bool
	tr       Transport
	msg      *Message      // the opened content, once a stage opened it
	at       time.Time     // the send slot
	waited   time.Duration // how long it waited for the slot
	begun    bool          // the entry moved to dispatching: the transport is called next
}

// step is a stage's answer: stop, with res as the decision's result, or go
// on to the next stage.
type step struct {
	res  DispatchResult
	stop bool
}

var next = step{}

func stop(res DispatchResult) step { return step{res: res, stop: true} }

func (d *decision) due(context.Context) (step, error) {
	switch e := d.e; {
	case e.State == Claimed:
	case e.State == Deferred && d.now.Add(d.s.core.Policy().BudgetWait).Before(e.NextAttemptAt):
		return stop(DispatchResult{Outcome: OutcomeNotDue, Entry: e}), nil
	case e.State == Deferred:
	default:
		return stop(DispatchResult{Outcome: OutcomeSkipped, Entry: e}), nil
	}
	return next, nil
}

func (d *decision) evidence(ctx context.Context) (step, error) {
	ev, ok := d.e.ProviderEvidence()
	if !ok || d.e.State != Deferred {
		return next, nil
	}
	// A deferred entry whose earlier attempt the provider reports it took
	// (and perhaps bounced): another attempt would send twice.
	res, err := d.s.core.AcceptOnEvidence(ctx, d.e, d.w, ev, "dispatch: not sent again")
	return stop(DispatchResult{Outcome: OutcomeSkipped, Entry: res}), err
}

func (d *decision) unexpired(ctx context.Context) (step, error) {
	if !d.s.core.ExpiredAt(d.e.ExpiresAt, d.now) {
		return next, nil
	}
	res, err := d.s.core.Expire(ctx, d.e, d.w, ExpiryReason(d.e), OutcomeExpired)
	return stop(res), err
}

func (d *decision) transport(context.Context) (step, error) {
	tr, ok := d.s.sender.Transport(d.e.Identity.Channel)
	if !ok {
		return next, fmt.Errorf("dispatch %s: %s: %w", d.e.Key, d.e.Identity.Channel, ErrNoTransport)
	}
	d.tr = tr
	return next, nil
}

func (d *decision) newest(ctx context.Context) (step, error) {
	res, done, err := d.s.supersedeIfNewer(ctx, d.e, d.w)
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
	res, err := d.s.core.Expire(ctx, d.e, d.w, "challenge expired before the send started; nothing sent", OutcomeExpired)
	return stop(res), err
}

func (d *decision) send(ctx context.Context) (step, error) {
	res, err := d.s.send(ctx, d.e, d.tr, *d.msg, d.w)
	res.BudgetWait = d.waited
	return stop(res), err
}

// open returns the entry's opened content. Content that cannot be read or
// authenticated quarantines the entry: it returns nil and the result of that.
func (s *Dispatcher) open(ctx context.Context, e Entry, w Worker) (*Message, DispatchResult, error) {
	msg, err := s.sender.OpenContent(ctx, e)
	if errors.Is(err, ErrContentUnavailable) || errors.Is(err, ErrNotFound) {
		const reason = "sealed content unavailable or failed verification; nothing sent"
		c, terr := s.core.Transition(e, Quarantined, w, reason, func(n *Entry) { s.core.ClearDeferral(n); n.Reason = reason })
		if terr != nil {
			return nil, DispatchResult{}, terr
		}
		res, err := s.core.Apply(ctx, c, OutcomeQuarantined)
		return nil, res, err
	}
	if err != nil {
		return nil, DispatchResult{}, fmt.Errorf("dispatch %s: %w", e.Key, err)
	}
	return &msg, DispatchResult{}, nil
}

// admitClaimed admits a claimed entry through the send limits, before it
// books a slot: a limited entry costs no send capacity. A deferred entry was
// admitted before it was deferred. It returns the opened content if the
// limits needed it, when they counted it, and the result of ending the entry
// if they stopped it.
func (s *Dispatcher) admitClaimed(ctx context.Context, e Entry, w Worker) (_ *Message, admittedAt time.Time, _ DispatchResult, _ error) {
	if e.State != Claimed || !s.limitsOn(e.Identity.Channel) {
		return nil, time.Time{}, DispatchResult{}, nil
	}
	var msg Message
	if s.limits.needsAddress(e.Identity.Channel) {
		m, res, err := s.open(ctx, e, w)
		if m == nil {
			return nil, time.Time{}, res, err
		}
		msg = *m
	}
	at, res, err := s.admit(ctx, e, w, msg)
	if res.Outcome != "" || err != nil || msg.To == "" {
		return nil, at, res, err
	}
	return &msg, at, DispatchResult{}, nil
}

// waitForSlot waits until the send slot at booked at now, if it is later.
// It returns the entry as it then stands and how long it waited.
func (s *Dispatcher) waitForSlot(ctx context.Context, e Entry, w Worker, now, at time.Time, streamed bool) (Entry, time.Duration, error) {
	d := at.Sub(now)
	if d <= 0 {
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
	if s.budget != NoBudget && holdsSlot(e, at) && !(streamed && s.streamKeepsClaimUntil(ctx, e, at)) {
		reason := fmt.Sprintf("waiting for the send-rate budget: send booked at %s", at.UTC().Format(time.RFC3339Nano))
		var err error
		if e, err = s.deferral(ctx, e, w, reason, BudgetCode, at, true); err != nil {
			return e, 0, err
		}
	}
	if err := s.sleep(ctx, d); err != nil {
		return e, 0, fmt.Errorf("dispatch %s: waiting for the send-rate budget: %w", e.Key, err)
	}
	return e, d, nil
}

// begin writes the move of e to dispatching that starts one attempt. The
// content read, decryption and budget booking before it took time: the
// write is conditioned on the clock as it reads now, not as it read before
// them.
func (s *Dispatcher) begin(ctx context.Context, e Entry, w Worker) (Entry, error) {
	now := s.core.Now()
	c, err := s.core.Transition(e, Dispatching, w, dispatchReason(e), func(n *Entry) {
		n.Attempts++
		if n.FirstAttemptAt.IsZero() {
			n.FirstAttemptAt = now
		}
		n.LeaseUntil = now.Add(s.core.Policy().Lease)
		s.core.ClearDeferral(n)
		n.Reason = ""
	})
	if err != nil {
		return e, err
	}
	c.NotExpiredBy = now.Add(s.core.Policy().ExpiryMargin)
	e, err = s.core.Write(ctx, c)
	if err != nil {
		return e, fmt.Errorf("dispatch %s: begin: %w", c.Next.Key, err)
	}
	return e, nil
}

func dispatchReason(e Entry) string {
	if e.State == Deferred {
		return "retry after not sent: " + e.NotSentCode
	}
	return "dispatch started"
}

// send makes one transport attempt for the dispatching entry e and records
// its outcome.
func (s *Dispatcher) send(ctx context.Context, e Entry, tr Transport, msg Message, w Worker) (DispatchResult, error) {
	ack, err := s.sender.Attempt(ctx, e, tr, msg)
	var ns *NotSent
	if errors.As(err, &ns) {
		return s.notSent(ctx, e, ns, w)
	}
	to, out, reason, ackID := OutcomeOf(ack, err)
	return s.sender.RecordOutcome(ctx, e, to, out, reason, ackID, w)
}
