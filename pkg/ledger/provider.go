package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Provider events: what a provider reported about a sent message, as the
// ledger keeps it (docs/design.md, "Provider events"); internal/usecase/evidence
// records them.

// Errors of RecordProviderEvent besides ErrNotFound (no entry for the key).
var (
	// ErrInvalidProviderEvent reports a provider event that fails
	// validation. Its message never quotes the rejected value.
	ErrInvalidProviderEvent = errors.New("ledger: invalid provider event")
	// ErrEventChannel reports a provider event for an entry of another
	// channel (an SES event carrying the key of an SMS entry).
	ErrEventChannel = errors.New("ledger: provider event for a row of another channel")
	// ErrUnproven reports a provider event that carries no valid proof that
	// this system made the attempt it names: a missing or wrong attempt
	// proof, or an attempt the entry never made. Such an event is evidence of
	// nothing and is recorded nowhere.
	ErrUnproven = errors.New("ledger: provider event without a valid attempt proof")
)

// ProviderEvent is what a provider reported about a sent message, reduced at
// the boundary to what the ledger keeps: the correlation key the send
// carried, the kind of entry it becomes, the provider's own event type and
// detail, its message id and time. Never a recipient, header, body or
// diagnostic text: those stay out of the ledger like every address.
type ProviderEvent struct {
	// Key is the dedupe key the send carried (SES message tag, SMS context).
	Key     string
	Channel Channel
	// Kind is one of ProviderKinds.
	Kind EventKind
	// Type is the provider's event type as published ("Bounce",
	// "TEXT_DELIVERED"); Detail its detail ("Permanent/General", a carrier
	// status), or "".
	Type, Detail string
	// MessageID is the provider's message id, the one its send answer gave.
	MessageID string
	// At is when the provider says the event happened.
	At time.Time
	// Permanent marks a permanent delivery failure: a hard bounce, a reject
	// after acceptance, a final SMS failure. It releases a held fallback
	// channel, as a rejection does.
	Permanent bool
	// Attempt is the transport attempt the event answers, as the send's tags
	// or context carried it back (0 if the event carried none), and Proof
	// the attempt proof that send carried (see Proofs). Neither is stored:
	// they decide whether the event is evidence at all.
	Attempt int
	Proof   string
}

// AttemptRef names the AttemptRef p claims to answer.
func (p ProviderEvent) AttemptRef() AttemptRef {
	return AttemptRef{Key: p.Key, Channel: p.Channel, Attempt: p.Attempt}
}

// ID is the history entry id of the event: the same for every delivery of
// one provider event, so a duplicate is recognised by Entry.Holds.
func (p ProviderEvent) ID() string {
	h := sha256.New()
	for _, f := range []string{
		"provider-event-v1", p.Key, string(p.Channel), string(p.Kind), p.Type, p.Detail, p.MessageID,
		p.At.UTC().Format(time.RFC3339Nano), strconv.FormatBool(p.Permanent),
	} {
		field(h, f)
	}
	return "pe-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// Validate checks the event before it is recorded: a dedupe key, a channel,
// a provider kind, a time, and type, detail and message id that are short,
// printable and hold no address or phone number.
func (p ProviderEvent) Validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidProviderEvent, field, reason)
	}
	if !IsDedupeKey(p.Key) {
		return bad("key", "want the 64 hex digits of a dedupe key")
	}
	if !p.Channel.valid() {
		return bad("channel", "want email or sms")
	}
	if !p.Kind.Provider() {
		return bad("kind", "not a provider-event kind")
	}
	if p.At.IsZero() {
		return bad("at", "missing")
	}
	if p.Type == "" {
		return bad("type", "missing")
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{{"type", p.Type, 64}, {"detail", p.Detail, 200}} {
		if len(f.v) > f.max {
			return bad(f.name, fmt.Sprintf("too long (%d bytes at most)", f.max))
		}
		if err := CheckFreeText(f.name, f.v, true); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return bad(f.name, fe.Reason)
			}
			return bad(f.name, "refused")
		}
	}
	if !validMessageID(p.MessageID) {
		return bad("message_id", "want 1-256 letters, digits and '._:-' (an SES Message-ID may end in @...amazonses.com)")
	}
	return nil
}

// validMessageID accepts a provider message id: 1 to 256 of opaqueChars.
// SES message ids in the Message-ID form ("<id>@email.amazonses.com", what
// the local emulator answers) keep that one domain; any other '@' could
// carry an address and is refused.
func validMessageID(v string) bool {
	if id, domain, ok := strings.Cut(v, "@"); ok {
		if domain != "amazonses.com" && !strings.HasSuffix(domain, ".amazonses.com") {
			return false
		}
		v = id
	}
	return opaqueChars.Fits(v, 256)
}

// EventResult is the entry after RecordProviderEvent and what it did.
type EventResult struct {
	Outcome Outcome
	Entry   Entry
}

// Amend makes the change's event the entry of provider event p (its id,
// kind, message id and provider fields) and chains it again.
func (c *Change) Amend(key string, p ProviderEvent) {
	ev := c.Event
	ev.ID, ev.Kind, ev.AckID = p.ID(), p.Kind, p.MessageID
	ev.ProviderType, ev.Detail, ev.ProviderAt, ev.Permanent = p.Type, p.Detail, p.At.UTC(), p.Permanent
	ev = Chain(key, ev.Prev, ev)
	c.Event = ev
	c.Next.History[len(c.Next.History)-1] = ev
}

// ProviderEvidence returns the first provider-event entry of the entry: the
// provider's own record that it took the request.
func (e Entry) ProviderEvidence() (Event, bool) {
	return e.first(func(ev Event) bool { return ev.Kind.Provider() })
}

// DeliveryFailure returns the first entry reporting a permanent delivery
// failure (a hard bounce, a reject after acceptance, a final SMS failure).
func (e Entry) DeliveryFailure() (Event, bool) {
	return e.first(func(ev Event) bool { return ev.Kind.Provider() && ev.Permanent })
}

// Delivered reports whether the provider reported the message delivered.
func (e Entry) Delivered() bool {
	_, ok := e.first(func(ev Event) bool { return ev.Kind == KindDelivered })
	return ok
}

// first returns the oldest history entry that match accepts.
func (e Entry) first(match func(Event) bool) (Event, bool) {
	for _, ev := range e.History {
		if match(ev) {
			return ev, true
		}
	}
	return Event{}, false
}

// enteredAt returns when the entry entered its current state: the newest
// entry that moved it there (UpdatedAt if the history shows none).
func (e Entry) enteredAt() time.Time {
	for i := len(e.History) - 1; i >= 0; i-- {
		if ev := e.History[i]; ev.To == e.State && ev.From != e.State {
			return ev.At
		}
	}
	return e.UpdatedAt
}

// LastAttemptAt returns when the newest transport attempt began.
func (e Entry) LastAttemptAt() time.Time {
	for i := len(e.History) - 1; i >= 0; i-- {
		if ev := e.History[i]; ev.To == Dispatching && ev.From != Dispatching || ev.Kind == KindRetry && ev.Attempt == e.Attempts {
			return ev.At
		}
	}
	return e.FirstAttemptAt
}

// Unsent reports whether nothing of the entry can have reached the provider:
// no attempt began, or every attempt that began was answered with a
// definite not sent (it went back to deferred, never through unknown,
// accepted or rejected), and the provider reported nothing of it. An entry
// that is dispatching now is judged by its past attempts only: its caller
// knows whether the current one was sent.
func (e Entry) Unsent() bool {
	_, reached := e.first(func(ev Event) bool {
		return ev.Kind.Provider() || ev.To == Unknown || ev.To == Accepted || ev.To == Rejected || ev.To == Abandoned
	})
	return !reached
}

// WasClaimed reports whether the entry was ever claimed: only a claimed entry
// is admitted through the send limits.
func (e Entry) WasClaimed() bool {
	_, ok := e.first(func(ev Event) bool { return ev.To == Claimed })
	return ok
}
