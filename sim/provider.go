package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// behavior is how the provider answers one send; the scheduler draws it.
type behavior int

const (
	accept behavior = iota
	reject
	acceptDropAck   // records the message, the acknowledgement is lost
	failBeforeReach // the request never reaches the provider
	throttle        // proves it did not take the message (ledger.NotSent)
	acceptLate      // records the message, answers after a delay
	numBehaviors
)

var behaviorNames = [numBehaviors]string{"accept", "reject", "accept, ack lost", "never reached", "throttle", "accept, answer late"}

func (b behavior) String() string { return behaviorNames[b] }

// flakyAnswers are the answers of a flaky provider's lost sends; the answer
// that comes late may still arrive in time.
var flakyAnswers = []behavior{acceptDropAck, failBeforeReach, acceptLate}

// lateAnswers are the delays of acceptLate: one inside the dispatch
// timeout, one past it (the invocation dies before it reads the answer).
var lateAnswers = []time.Duration{5 * time.Second, 70 * time.Second}

// record is one message a provider took.
type record struct {
	at      time.Time
	ack     string
	attempt int
	proof   string
}

// provider is the far side of one channel's transport: the provider's own
// truth about what it took, which the ledger can only learn through acks,
// refusals and lookups.
type provider struct {
	ch   ledger.Channel
	spec transportSpec
	n    int
	msgs map[string][]record
	// acks holds every ack id the provider issued per key (evidence).
	acks     map[string]map[string]bool
	rejected map[string]int
	notSent  map[string]int
	// refused holds, per key, the attempts the provider refused (a
	// rejection): the evidence a rejected row must have.
	refused map[string]map[int]bool
}

func newProvider(ch ledger.Channel, spec transportSpec) *provider {
	return &provider{ch: ch, spec: spec, msgs: map[string][]record{}, acks: map[string]map[string]bool{},
		rejected: map[string]int{}, notSent: map[string]int{}, refused: map[string]map[int]bool{}}
}

// sendResult is what one send did at the provider.
type sendResult struct {
	ack      ledger.Ack
	err      error
	reached  bool // the request reached the provider
	recorded bool // the provider took a new message
	deduped  bool // a same-key send inside the window: answered with the first ack
}

var errReset = errors.New("read response: connection reset by peer")

// send answers one attempt at the provider's clock now.
func (p *provider) send(m ledger.Send, b behavior, now time.Time) sendResult {
	key := m.IdempotencyKey
	if b == failBeforeReach {
		return sendResult{err: errors.New("dial provider: connection refused")}
	}
	if p.spec.cap == capKey {
		if rs := p.msgs[key]; len(rs) > 0 && now.Before(rs[0].at.Add(p.spec.window)) {
			r := sendResult{reached: true, deduped: true, ack: ledger.Ack{ID: rs[0].ack}}
			if b == acceptDropAck {
				r.ack, r.err = ledger.Ack{}, errReset
			}
			return r
		}
	}
	switch b {
	case reject:
		p.rejected[key]++
		if p.refused[key] == nil {
			p.refused[key] = map[int]bool{}
		}
		p.refused[key][m.Attempt] = true
		return sendResult{reached: true, err: &ledger.Rejection{Reason: "destination suppressed"}}
	case throttle:
		p.notSent[key]++
		return sendResult{reached: true, err: fmt.Errorf("send: %w", &ledger.NotSent{Code: ledgertest.ThrottleCode})}
	}
	p.n++
	id := fmt.Sprintf("%s-msg-%d", p.ch, p.n)
	p.msgs[key] = append(p.msgs[key], record{at: now, ack: id, attempt: m.Attempt, proof: m.Proof})
	if p.acks[key] == nil {
		p.acks[key] = map[string]bool{}
	}
	p.acks[key][id] = true
	r := sendResult{reached: true, recorded: true, ack: ledger.Ack{ID: id}}
	if b == acceptDropAck {
		r.ack, r.err = ledger.Ack{}, errReset
	}
	return r
}

// lookup returns the first message recorded under key that is old enough
// to show in the provider's events.
func (p *provider) lookup(key string, now time.Time) (ledger.Ack, bool) {
	for _, r := range p.msgs[key] {
		if !now.Before(r.at.Add(p.spec.lookupLag)) {
			return ledger.Ack{ID: r.ack}, true
		}
	}
	return ledger.Ack{}, false
}
