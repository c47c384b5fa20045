package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"time"
)

// Entry is one ledger entry: the current state of one logical message and its
// append-only history. It holds no secret: no token, body or address.
type Entry struct {
	Key            string
	Identity       Identity
	Workflow       Workflow
	State          State
	Version        int64 // incremented by every write; the compare-and-set token
	ContentHash    string
	DestinationRef string
	// SubjectRef is the intent's opaque account reference, "" if none.
	SubjectRef      string
	TemplateID      string
	TemplateVersion string
	PolicyVersion   string
	// IssuedAt is when the account service issued the challenge, as the
	// intent sealed it (the claim's time for a wire version without it):
	// supersession orders a subject's challenges by it.
	IssuedAt  time.Time
	ExpiresAt time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
	// RedriveAt is when a claimed entry is due for a re-drive: the stream has
	// had until then to deliver it (its claim time plus
	// Policy.RedriveAfter). Zero in every other state, and on a claim
	// written before claims carried it.
	RedriveAt time.Time
	// LeaseUntil is when a dispatching entry counts as stuck: reconcile then
	// marks it unknown. Zero in every other state. (A store may keep it and
	// RedriveAt in one attribute: one of them is zero in every state.)
	LeaseUntil time.Time
	// NextCheckAt is when reconcile next looks at an unknown entry.
	NextCheckAt time.Time
	// NextAttemptAt is when the next attempt of a deferred entry is due.
	NextAttemptAt time.Time
	// SlotAt is the send time a deferred entry holds in the send-rate budget,
	// or zero if it holds none (a provider deferral books a new one).
	SlotAt time.Time
	// NotSentCode is the provider code of the latest answer that proved the
	// message was not taken ("TooManyRequestsException", "HTTP 429"), or
	// BudgetCode while the entry waits for the send-rate budget.
	NotSentCode string
	// AdmittedAt is when the send limits counted the entry, as recorded by
	// the write after its admission (zero if they did not, or if that
	// write never landed): evidence only. A release does not need it: the
	// limiter records which counters counted the message.
	AdmittedAt time.Time
	// FirstAttemptAt is when the first transport attempt began; the
	// idempotency window of a transport is measured from it.
	FirstAttemptAt time.Time
	Attempts       int
	AckID          string
	Reason         string
	Mismatches     int
	// RetainUntil is the retention deadline (the table's TTL).
	RetainUntil time.Time
	History     []Event
}

// Event is one append-only history entry.
type Event struct {
	ID            string
	Kind          EventKind
	From, To      State
	At            time.Time
	Worker        string
	Reason        string
	PolicyVersion string
	Attempt       int
	AckID         string
	ContentHash   string // the content hash this event concerns
	// Code is the provider code of a not-sent answer ("" otherwise).
	Code string
	// NextAttemptAt is when the next attempt is due after a deferral.
	NextAttemptAt time.Time
	// ProviderType, Detail and ProviderAt are set on the entries of provider
	// events (see ProviderEvent): the provider's own event type ("Bounce",
	// "TEXT_DELIVERED"), its detail (bounce type and subtype, complaint
	// feedback type, carrier status) and when the provider says it happened.
	// AckID then holds the provider's message id. Permanent marks a
	// permanent delivery failure.
	ProviderType string
	Detail       string
	ProviderAt   time.Time
	Permanent    bool
	// Prev is the Hash of the previous entry ("" for the first); Hash chains
	// this entry to Prev and to the entry's key. See Verify.
	Prev string
	Hash string
}

// EventKind classifies history entries.
type EventKind string

// Event kinds.
const (
	KindTransition      EventKind = "transition"
	KindContentMismatch EventKind = "content_mismatch"
	KindRetry           EventKind = "retry"
	KindRecheck         EventKind = "recheck"
	// KindDeferral moves a deferred entry's next attempt without a state
	// change (the budget or the provider asked it to wait longer).
	KindDeferral EventKind = "deferral"

	// Provider events (ProviderEvent): what the provider reported after the
	// send. Each is evidence that the provider took the request.
	KindProviderSent     EventKind = "provider_sent"     // SES Send; SMS pending, queued or accepted by the carrier
	KindDelivered        EventKind = "delivered"         // SES Delivery; SMS delivered to the handset
	KindBounced          EventKind = "bounced"           // SES Bounce, with bounce type and subtype
	KindComplained       EventKind = "complained"        // SES Complaint, with the feedback type
	KindDeliveryDelayed  EventKind = "delivery_delayed"  // SES DeliveryDelay, with the delay type
	KindProviderRejected EventKind = "provider_rejected" // SES Reject or Rendering Failure after accepting the request
	KindDeliveryFailed   EventKind = "delivery_failed"   // SMS failed, with the carrier status
)

// ProviderKinds lists the kinds of provider-event entries.
var ProviderKinds = []EventKind{
	KindProviderSent, KindDelivered, KindBounced, KindComplained, KindDeliveryDelayed, KindProviderRejected, KindDeliveryFailed,
}

// Provider reports whether k is the kind of a provider-event entry.
func (k EventKind) Provider() bool { return slices.Contains(ProviderKinds, k) }

// OpenDue is the sort key of the entry in the open-row index: when a sweep
// should look at it. The zero time means the entry is not open. A claimed entry
// is due at the earlier of its re-drive time (RedriveAt) and its expiry,
// so a re-drive lists only the claims it may hand back; the expire sweep
// finds expired claims by their expiry (Store.ListExpired), which is never
// before OpenDue.
func (e Entry) OpenDue() time.Time {
	switch e.State {
	case Claimed:
		if !e.RedriveAt.IsZero() && e.RedriveAt.Before(e.ExpiresAt) {
			return e.RedriveAt
		}
		return e.ExpiresAt
	case Held:
		return e.ExpiresAt
	case Dispatching:
		return e.LeaseUntil
	case Deferred:
		return e.NextAttemptAt
	case Unknown:
		return e.NextCheckAt
	case Quarantined:
		return e.UpdatedAt
	}
	return time.Time{}
}

// Last returns the newest history entry, or the zero Event.
func (e Entry) Last() Event {
	if len(e.History) == 0 {
		return Event{}
	}
	return e.History[len(e.History)-1]
}

// Holds reports whether the history contains the event id. A write whose
// event the entry already holds has landed (a retried request whose first
// attempt succeeded).
func (e Entry) Holds(id string) bool {
	for i := len(e.History) - 1; i >= 0; i-- {
		if e.History[i].ID == id {
			return true
		}
	}
	return false
}

// Chain fills ev.Prev and ev.Hash so that ev follows prev in the history of key.
func Chain(key string, prev string, ev Event) Event {
	ev.Prev = prev
	ev.Hash = EventHash(key, ev)
	return ev
}

// EventHash is the hash that chains history entry ev into the history of
// the entry with dedupe key key (docs/intent-v2.md specifies its bytes). ev.Hash
// itself takes no part; ev.Prev does.
func EventHash(key string, ev Event) string {
	h := sha256.New()
	for _, f := range []string{
		"ledger-event-v1", key, ev.Prev, ev.ID, string(ev.Kind), string(ev.From), string(ev.To),
		ev.At.UTC().Format(time.RFC3339Nano), ev.Worker, ev.Reason, ev.PolicyVersion,
		strconv.Itoa(ev.Attempt), ev.AckID, ev.ContentHash,
	} {
		field(h, f)
	}
	// Fields added after the first version are hashed only when set, so
	// entries written before them keep their hashes.
	if ev.Code != "" || !ev.NextAttemptAt.IsZero() {
		field(h, ev.Code)
		field(h, ev.NextAttemptAt.UTC().Format(time.RFC3339Nano))
	}
	if ev.ProviderType != "" || ev.Detail != "" || !ev.ProviderAt.IsZero() || ev.Permanent {
		field(h, "provider-event")
		field(h, ev.ProviderType)
		field(h, ev.Detail)
		field(h, ev.ProviderAt.UTC().Format(time.RFC3339Nano))
		field(h, strconv.FormatBool(ev.Permanent))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// field writes f length-prefixed, so no two field lists hash alike.
func field(h hash.Hash, f string) {
	h.Write([]byte(strconv.Itoa(len(f))))
	h.Write([]byte{':'})
	h.Write([]byte(f))
}

// Verify checks the history of e: every entry's hash, every link to its
// predecessor, that the chain is bound to e.Key, and that it holds one entry
// per write (every write appends one entry and increments Version by one),
// so trailing entries cannot be cut off unnoticed. It returns an error
// naming the first entry that was edited, reordered or removed.
func (e Entry) Verify() error {
	broken := func(i int64, format string, a ...any) error {
		return &ChainError{Key: e.Key, Index: int(i), Detail: fmt.Sprintf(format, a...)}
	}
	prev := ""
	for i, ev := range e.History {
		if ev.Prev != prev {
			return broken(int64(i), "link does not match previous entry (removed or reordered)")
		}
		if EventHash(e.Key, ev) != ev.Hash {
			return broken(int64(i), "content does not match its hash (edited)")
		}
		prev = ev.Hash
	}
	if n := int64(len(e.History)); n != e.Version {
		return broken(min(n, e.Version), "%d entries but the row is at version %d (entry removed or added)", n, e.Version)
	}
	if n := len(e.History); n > 0 && e.History[n-1].To != e.State {
		return broken(int64(n-1), "it ends in %s but the row is %s (entry removed or row edited)", e.History[n-1].To, e.State)
	}
	return nil
}

// ChainError is Verify's report: the first history entry whose chain is
// broken, and how.
type ChainError struct {
	Key    string
	Index  int
	Detail string
}

func (c *ChainError) Error() string {
	return fmt.Sprintf("ledger: history of %s broken at entry %d: %s", c.Key, c.Index, c.Detail)
}
