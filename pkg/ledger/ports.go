package ledger

import (
	"context"
	"time"
)

// Store persists ledger rows. Implementations must make Create and Apply
// atomic compare-and-set operations in the database itself: no in-process
// lock decides who wins.
type Store interface {
	// Create writes e if no row with e.Key exists. If one exists it returns
	// that row and an error wrapping ErrConflict, in one round trip where the
	// database allows. A repeated create of the same entry (its first event
	// already stored, as after a retry whose first attempt landed) succeeds.
	Create(ctx context.Context, e Entry) (Entry, error)
	// Get returns the row for key with a strongly consistent read, or an
	// error wrapping ErrNotFound.
	Get(ctx context.Context, key string) (Entry, error)
	// Apply writes c.Next over the row if the stored row still has state
	// c.From and version c.Version (and, if c.NotExpiredBy is set, an expiry
	// after it), appending c.Event to the history. It returns the stored row,
	// or, when the condition fails, the row as it is stored (in the same
	// round trip) and an error wrapping ErrConflict. A change whose event the
	// row already holds (a retry whose first attempt landed) returns the
	// row, unchanged.
	Apply(ctx context.Context, c Change) (Entry, error)
	// ListOpen returns rows in the open state s whose OpenDue is not after
	// dueBy (all open rows in s if dueBy is zero), oldest due first, at most
	// limit rows. Its cost follows the open rows, never the table.
	ListOpen(ctx context.Context, s State, dueBy time.Time, limit int) ([]Entry, error)
	// DueTimes returns the OpenDue of every row in the open state s due by
	// dueBy, soonest first, from the open-row index: it reads a row only
	// where an index entry it found due cannot say which state its row is
	// in, and costs what is due, never what is open.
	DueTimes(ctx context.Context, s State, dueBy time.Time) ([]time.Time, error)
	// ListExpired returns rows in the open state s (Held or Claimed) whose
	// ExpiresAt is not after by, soonest expiring first, at most limit rows
	// (all if limit is 0). A claimed row's OpenDue is never after its
	// expiry, so its cost follows the rows due by by, and it reads only the
	// rows it returns.
	ListExpired(ctx context.Context, s State, by time.Time, limit int) ([]Entry, error)
	// Expiries returns the ExpiresAt of every row in the open state s
	// (Held or Claimed) that expires by by, soonest first, from the
	// open-row index, like DueTimes.
	Expiries(ctx context.Context, s State, by time.Time) ([]time.Time, error)
}

// Change is one compare-and-set write.
type Change struct {
	From    State
	Version int64
	// NotExpiredBy, if set, also requires the stored expiry to be after it.
	NotExpiredBy time.Time
	// Next is the whole new row; its History already ends with Event.
	Next  Entry
	Event Event
}

// ContentStore keeps sealed, secret-bearing content for the short time a
// message is in flight. Implementations hold it outside the ledger table:
// no stream, no backups, expiring at the challenge's expiry.
type ContentStore interface {
	// Put stores sealed content under key unless some is already stored;
	// it reports whether it wrote.
	Put(ctx context.Context, key string, sealed []byte, expiresAt time.Time) (bool, error)
	// Get returns the sealed content, or an error wrapping ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Delete purges the content; deleting nothing is not an error.
	Delete(ctx context.Context, key string) error
}

// Opener decrypts sealed content. Only the dispatch path holds one.
type Opener interface {
	// Open returns the message sealed for key, or an error wrapping
	// ErrContentUnavailable if it cannot be authenticated.
	Open(ctx context.Context, key string, sealed []byte) (Message, error)
}

// Capabilities declares what a transport can do; the reconcile policy for
// unknown outcomes follows from it (docs/design.md, "Transports and the reconcile policy").
type Capabilities struct {
	// IdempotencyWindow is how long the provider deduplicates sends under
	// the same idempotency key; zero means it does not.
	IdempotencyWindow time.Duration
	// Lookup means the transport implements Looker.
	Lookup bool
	// Events means the provider publishes events that carry the idempotency
	// key and reach RecordProviderEvent (SES with a configuration set, SMS
	// with one): reconcile gives an unknown row the settle period for an
	// event to resolve it before quarantining it.
	Events bool
}

// Send is one transport attempt.
type Send struct {
	// IdempotencyKey is the dedupe key, identical for every attempt.
	IdempotencyKey string
	ContentHash    string
	Channel        Channel
	Attempt        int
	ExpiresAt      time.Time
	Message        Message
	// Deadline is when the call must be over, by the worker's clock: the
	// challenge's expiry minus Policy.SendGuard. The call's context ends
	// then at the latest (a reconcile retry's ends earlier, at its lease);
	// a transport that cannot finish by it must not reach the provider
	// after it.
	Deadline time.Time
	// Proof is the attempt's proof (Proofs.Sign), "" when the transport
	// reports no events. The transport carries it to the provider beside the
	// idempotency key, so the events the provider publishes carry it back.
	Proof string
}

// AttemptRef names one transport attempt: the row's dedupe key, its channel
// and the attempt's number (1 for the first).
type AttemptRef struct {
	Key     string
	Channel Channel
	Attempt int
}

// Proofs makes and checks attempt proofs: a MAC over an AttemptRef under a
// key only the senders may sign with. Every send through a transport that
// reports provider events (Capabilities.Events) carries the proof of its
// attempt to the provider (an SES message tag, an SMS context entry), which
// copies it into the events it publishes; RecordProviderEvent counts an
// event as evidence only if its proof verifies.
type Proofs interface {
	// Sign returns the proof of attempt a: short, and made of letters,
	// digits, '-' and '_' only (it travels as an SES tag value).
	Sign(ctx context.Context, a AttemptRef) (string, error)
	// Verify returns nil if proof is a's, an error wrapping ErrUnproven if
	// it is not, and any other error when it could not tell (the caller
	// retries).
	Verify(ctx context.Context, a AttemptRef, proof string) error
}

// Ack is a transport acknowledgement.
type Ack struct {
	// ID is the provider's request or message id.
	ID string
}

// Transport sends a message. Send returns an Ack when the provider accepted
// the message, an error wrapping *Rejection when it definitely refused, and
// any other error when the outcome is unknown (timeout, lost connection).
// Implementations must not retry internally: every attempt is one the ledger
// records. Errors must not contain the message, address or token.
type Transport interface {
	Capabilities() Capabilities
	Send(ctx context.Context, s Send) (Ack, error)
}

// Looker finds a message a provider recorded under an idempotency key.
type Looker interface {
	// Lookup returns the provider's ack and true if it recorded a message
	// for key, false if it has no record.
	Lookup(ctx context.Context, key string) (Ack, bool, error)
}

// Clock returns the current time. The worker's clock is the authority on
// expiry; Policy.ExpiryMargin covers skew.
type Clock func() time.Time

// Budget books send times per channel so that sends from every dispatch
// instance together stay within a send rate (the provider's quota).
// Implementations keep the booking in shared storage with conditional
// writes: no in-process state decides.
type Budget interface {
	// Reserve books one send on ch at the earliest free time not before
	// now and returns it. If that time would be after notAfter it books
	// nothing and returns an error wrapping ErrNoBudget. A channel without
	// a budget always gets now.
	Reserve(ctx context.Context, ch Channel, now, notAfter time.Time) (time.Time, error)
}

// Scheduler hands a row back to dispatch at a time: the wake-up of a
// deferred row, or reconcile's re-drive of a due row that no dispatch
// picked up. Delivery may be late or repeated, never early by more than
// the wait dispatch absorbs in-process (Policy.BudgetWait): the dispatch
// decision is the conditional write, as for stream records.
type Scheduler interface {
	Schedule(ctx context.Context, key string, at time.Time) error
}

// Interval is the spacing of sends at rate sends per second, at least one
// microsecond (the resolution budgets store).
func Interval(rate float64) time.Duration {
	return max(time.Duration(float64(time.Second)/rate), time.Microsecond)
}
