// Package ledgertest holds test fixtures for the ledger (a manual clock, a
// plain-text opener, a scriptable recording transport, intent builders) and
// the store contract suite that every ledger.Store implementation runs.
package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Epoch is the fixed start time of test clocks.
var Epoch = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// Clock is a manual, goroutine-safe clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return NewClockAt(Epoch) }

// NewClockAt returns a clock at t.
func NewClockAt(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Canary is a token that must never reach storage, logs or errors.
const Canary = "CANARY-token-7f3a9c"

// Message returns a secret-bearing message for challenge i.
func Message(i int, ch ledger.Channel) ledger.Message {
	to := fmt.Sprintf("player%d@example.test", i)
	if ch == ledger.SMS {
		to = fmt.Sprintf("+1555000%04d", i%10000)
	}
	return ledger.Message{
		To:      to,
		Subject: "Reset your password",
		Body:    "Use https://game.example.test/reset?token=" + Canary + strconv.Itoa(i) + " within 10 minutes.",
	}
}

// Intent returns a valid single-channel intent for challenge i issued at
// now and expiring ttl after it, and its sealed content as PlainOpener
// understands it.
func Intent(i int, ch ledger.Channel, now time.Time, ttl time.Duration) (ledger.Intent, []byte) {
	m := Message(i, ch)
	issued := now
	if ttl <= 0 {
		issued = now.Add(ttl - time.Minute) // issued before it expired
	}
	in := ledger.Intent{
		Identity:        ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: fmt.Sprintf("chal-%06d", i), Channel: ch},
		Workflow:        ledger.Workflow{Kind: ledger.Single},
		DestinationRef:  fmt.Sprintf("acct-%06d:%s", i, ch),
		IssuedAt:        issued,
		ExpiresAt:       now.Add(ttl),
		TemplateID:      "reset-" + string(ch),
		TemplateVersion: "3",
		PolicyVersion:   "policy-1",
	}
	in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	return in, Seal(m)
}

// Seal encodes m for PlainOpener. It is not encryption: tests only.
func Seal(m ledger.Message) []byte {
	b, _ := json.Marshal(m)
	return b
}

// PlainOpener opens what Seal produced.
type PlainOpener struct{}

// Open implements ledger.Opener.
func (PlainOpener) Open(_ context.Context, key string, sealed []byte) (ledger.Message, error) {
	var m ledger.Message
	if err := json.Unmarshal(sealed, &m); err != nil {
		return m, fmt.Errorf("open %s: %w", key, ledger.ErrContentUnavailable)
	}
	return m, nil
}

// Behavior scripts one transport call.
type Behavior int

// Behaviors of Transport.
const (
	Accept          Behavior = iota // provider records and acknowledges
	Reject                          // provider refuses
	AcceptThenDrop                  // provider records, acknowledgement lost
	FailBeforeReach                 // request never reaches the provider
	Throttle                        // provider proves it did not take the message (*ledger.NotSent)
)

// ThrottleCode is the code of Throttle's *ledger.NotSent.
const ThrottleCode = "TooManyRequestsException"

// Transport is a scriptable transport that counts what the provider
// recorded per idempotency key. It honors idempotency keys for Window when
// Window > 0 (a repeated key is acknowledged without recording again).
type Transport struct {
	Window    time.Duration
	CanLookup bool
	// Events declares that the provider publishes events (Capabilities.Events).
	Events bool
	// RetryAfter is what a Throttle answer asks the caller to wait.
	RetryAfter time.Duration
	// Script returns the behavior of each call; Accept if nil.
	Script func(s ledger.Send) Behavior

	mu       sync.Mutex
	recorded map[string]int
	acks     map[string]string
	calls    atomic.Int64
	Sent     []ledger.Send
}

// Capabilities implements ledger.Transport.
func (t *Transport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{IdempotencyWindow: t.Window, Lookup: t.CanLookup, Events: t.Events}
}

// Send implements ledger.Transport.
func (t *Transport) Send(_ context.Context, s ledger.Send) (ledger.Ack, error) {
	n := t.calls.Add(1)
	b := Accept
	if t.Script != nil {
		b = t.Script(s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.recorded == nil {
		t.recorded, t.acks = map[string]int{}, map[string]string{}
	}
	t.Sent = append(t.Sent, s)
	switch b {
	case Reject:
		return ledger.Ack{}, &ledger.Rejection{Reason: "destination suppressed"}
	case FailBeforeReach:
		return ledger.Ack{}, fmt.Errorf("dial provider: connection refused")
	case Throttle:
		return ledger.Ack{}, fmt.Errorf("send: %w", &ledger.NotSent{Code: ThrottleCode, RetryAfter: t.RetryAfter})
	}
	if id, ok := t.acks[s.IdempotencyKey]; ok && t.Window > 0 {
		if b == AcceptThenDrop {
			return ledger.Ack{}, fmt.Errorf("read response: connection reset")
		}
		return ledger.Ack{ID: id}, nil
	}
	t.recorded[s.IdempotencyKey]++
	id := fmt.Sprintf("msg-%d", n)
	t.acks[s.IdempotencyKey] = id
	if b == AcceptThenDrop {
		return ledger.Ack{}, fmt.Errorf("read response: connection reset")
	}
	return ledger.Ack{ID: id}, nil
}

// Lookup implements ledger.Looker when CanLookup is set.
func (t *Transport) Lookup(_ context.Context, key string) (ledger.Ack, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.acks[key]
	return ledger.Ack{ID: id}, ok, nil
}

// Recorded returns how many messages the provider recorded for key.
func (t *Transport) Recorded(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recorded[key]
}

// Carried returns the attempt number and attempt proof the newest send for
// key carried to the provider: what the provider copies into the events it
// publishes about that message. ok is false if nothing was sent for key.
func (t *Transport) Carried(key string) (attempt int, proof string, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := len(t.Sent) - 1; i >= 0; i-- {
		if s := t.Sent[i]; s.IdempotencyKey == key {
			return s.Attempt, s.Proof, true
		}
	}
	return 0, "", false
}

// Calls returns the number of Send calls.
func (t *Transport) Calls() int { return int(t.calls.Load()) }
