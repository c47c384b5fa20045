package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/usecase/evidence"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Provider events. A provider that publishes events (transportSpec.events,
// as SES with a configuration set and End User Messaging SMS do) reports
// what it did with every message it really took: a Send, then a Delivery,
// a permanent or transient Bounce, a Complaint or a Reject. Each event
// carries the key, the attempt and the attempt's proof that the send
// carried, and reaches the events function, which records it with
// RecordProviderEvent. During the fault phase events are delayed (so
// reordered), duplicated, lost, or arrive before the outcome write of the
// send they report; forged events, whose proofs no sender made, arrive
// beside them and must be refused.

// provEvent is one event on its way to the events function.
type provEvent struct {
	ev ledger.ProviderEvent
	// forged says how the event was forged; "" for a real one.
	forged string
}

// eventDelays are the delays of an event after the send, and of the
// outcome event after the Send event: inside the fallback wait, and past it.
var eventDelays = []time.Duration{0, 3 * time.Second, 40 * time.Second, 3 * time.Minute}

// eventOutcome is what the provider reports after its Send event.
type eventOutcome int

const (
	outDelivered eventOutcome = iota
	outHardBounce
	outSoftBounce
	outComplaint
	outReject
	outNothing
	numOutcomes
)

// eventType is the provider's own event type and detail of one kind of
// report, per channel, as internal/providerevent decodes them.
type eventType struct {
	kind      ledger.EventKind
	typ       string
	detail    string
	permanent bool
}

var eventTypes = map[ledger.Channel]map[eventOutcome]eventType{
	ledger.Email: {
		-1:            {ledger.KindProviderSent, "Send", "", false},
		outDelivered:  {ledger.KindDelivered, "Delivery", "", false},
		outHardBounce: {ledger.KindBounced, "Bounce", "Permanent/General", true},
		outSoftBounce: {ledger.KindBounced, "Bounce", "Transient/MailboxFull", false},
		outComplaint:  {ledger.KindComplained, "Complaint", "abuse", false},
		outReject:     {ledger.KindProviderRejected, "Reject", "Bad content", true},
	},
	ledger.SMS: {
		-1:            {ledger.KindProviderSent, "TEXT_PENDING", "", false},
		outDelivered:  {ledger.KindDelivered, "TEXT_DELIVERED", "", false},
		outHardBounce: {ledger.KindDeliveryFailed, "TEXT_BLOCKED", "", true},
		outSoftBounce: {ledger.KindDeliveryFailed, "TEXT_CARRIER_UNREACHABLE", "", false},
		outComplaint:  {ledger.KindDelivered, "TEXT_DELIVERED", "", false},
		outReject:     {ledger.KindDeliveryFailed, "TEXT_INVALID", "", true},
	},
}

// simProofKey is the simulated senders' HMAC key (attemptproof.Local).
var simProofKey = []byte("sim-attempt-proof-key-0123456789")

func newProofs() *attemptproof.Local { return &attemptproof.Local{Key: simProofKey} }

// planEvents schedules the events the provider publishes for the message it
// took from send m under ack id ack.
func (s *sim) planEvents(ch ledger.Channel, m ledger.Send, ack string) {
	out, d0, d1 := outDelivered, time.Duration(0), 2*time.Second
	if s.faultPhase {
		out = eventOutcome(s.c.pick(int(numOutcomes), "event outcome"))
		if _, fallback := s.successor(m.IdempotencyKey); fallback && s.c.coin(1, "hard bounce") {
			out = outHardBounce // the fallback's hand-over is what a bounce decides
		}
		d0 = eventDelays[s.c.pick(len(eventDelays), "event delay")]
		d1 = eventDelays[s.c.pick(len(eventDelays), "outcome event delay")]
	}
	types := eventTypes[ch]
	mk := func(t eventType, at time.Time) ledger.ProviderEvent {
		return ledger.ProviderEvent{
			Key: m.IdempotencyKey, Channel: ch, Kind: t.kind, Type: t.typ, Detail: t.detail, MessageID: ack,
			At: at.UTC().Truncate(ledger.Precision), Permanent: t.permanent, Attempt: m.Attempt, Proof: m.Proof,
		}
	}
	sendAt := s.now.Add(d0)
	evs := []ledger.ProviderEvent{mk(types[-1], sendAt)}
	outAt := sendAt.Add(d1)
	if out != outNothing {
		evs = append(evs, mk(types[out], outAt))
		if out == outComplaint && ch == ledger.Email {
			evs = append(evs, mk(types[outDelivered], outAt.Add(-time.Second)))
		}
	}
	for _, ev := range evs {
		s.realEvents[eventSig(ev.Key, ev.Type, ev.Detail, ev.MessageID, ev.At)] = ev
		due := ev.At
		if s.faultPhase && s.c.coin(3, "event arrives out of order") {
			due = s.now // published late, arriving before the events it follows
		}
		s.emit(&trigger{fn: fnEvents, source: "provider event", key: ev.Key, due: due, pev: &provEvent{ev: ev}})
	}
	if s.faultPhase && s.c.coin(2, "forged event") {
		s.forge(ch, m, ack)
	}
}

// forgeries are the ways someone who knows a dedupe key (the hash of a
// challenge id) but not the senders' key writes an event.
var forgeries = []string{"random proof", "proof of another attempt", "proof of another channel's row", "key of no row"}

// forge emits one forged event about the send m.
func (s *sim) forge(ch ledger.Channel, m ledger.Send, ack string) {
	how := forgeries[s.c.pick(len(forgeries), "forgery")]
	ev := ledger.ProviderEvent{
		Key: m.IdempotencyKey, Channel: ch, Kind: ledger.KindDelivered, Type: eventTypes[ch][outDelivered].typ,
		MessageID: "forged-" + ack, At: s.now.UTC().Truncate(ledger.Precision), Attempt: m.Attempt, Proof: m.Proof,
	}
	switch how {
	case "random proof":
		ev.Proof = attemptproof.Encode([]byte(fmt.Sprintf("%032d", s.step)))
	case "proof of another attempt":
		ev.Attempt = m.Attempt + 1
	case "proof of another channel's row":
		other := ledger.Email
		if ch == ledger.Email {
			other = ledger.SMS
		}
		info := s.w.rows[m.IdempotencyKey]
		ev.Key = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: info.challenge.id, Channel: other}.Key()
		ev.Channel, ev.Type = other, eventTypes[other][outDelivered].typ
	case "key of no row":
		ev.Key = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-forged", Channel: ch}.Key()
	}
	s.emit(&trigger{fn: fnEvents, source: "forged event", key: ev.Key, due: s.now, pev: &provEvent{ev: ev, forged: how}})
}

// eventFact is what one events invocation did.
type eventFact struct {
	inv *invocation
	pev *provEvent
	res ledger.EventResult
	err error
	// row is the event's row as the delivery found it settled: its state
	// when the event was recorded.
	before ledger.Entry
}

// recordEvent is the body of the events function: the handler decodes the
// event and records it; an event that is refused (unproven, another
// channel's row, no row) is dropped with a log line, any other failure is
// retried by the queue.
func (s *sim) recordEvent(ctx context.Context, inv *invocation, recorder *evidence.Recorder) (string, error) {
	p := inv.trig.pev
	ev := p.ev
	if s.mutant == BounceLosesPermanent && ev.Kind == ledger.KindBounced {
		ev.Permanent = false
	}
	before, _ := s.peek(ev.Key)
	res, err := recorder.RecordProviderEvent(ctx, ev, inv.worker)
	s.facts.events = append(s.facts.events, eventFact{inv: inv, pev: p, res: res, err: err, before: before})
	line := logLine(inv, err, "dedupe_key", ev.Key, "type", ev.Type, "message_id", ev.MessageID, "outcome", string(res.Outcome),
		"state", string(res.Entry.State))
	for _, refused := range []error{ledger.ErrUnproven, ledger.ErrEventChannel, ledger.ErrInvalidProviderEvent, ledger.ErrNotFound} {
		if errors.Is(err, refused) {
			return line, nil
		}
	}
	return line, err
}

// lengthOnly is the verifier of mutant ProofShapeOnly: it accepts any
// proof that decodes to a MAC's length.
type lengthOnly struct{ ledger.Proofs }

func (lengthOnly) Verify(_ context.Context, _ ledger.AttemptRef, proof string) error {
	if len(proof) != 43 {
		return fmt.Errorf("sim: not a proof: %w", ledger.ErrUnproven)
	}
	return nil
}
