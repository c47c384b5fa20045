package ledger

import (
	"context"
	"errors"
	"fmt"
)

// The one write path: every use case builds a compare-and-set change with
// transition or record and stores it with write or apply.

// Transition builds the compare-and-set change that moves e to state to,
// after the mutations in mut, and appends the history event.
func (s *Core) Transition(e Entry, to State, w Worker, reason string, mut func(*Entry)) (Change, error) {
	if err := CanTransition(e.State, to); err != nil {
		return Change{}, err
	}
	return s.Record(e, KindTransition, to, w, reason, mut), nil
}

// Record builds a change that appends an event of kind k and moves the entry to
// state to (which may equal its current state for non-transition events).
func (s *Core) Record(e Entry, k EventKind, to State, w Worker, reason string, mut func(*Entry)) Change {
	now := s.Now()
	next := e
	next.History = append([]Event(nil), e.History...)
	next.State = to
	next.Version = e.Version + 1
	next.UpdatedAt = now
	next.RetainUntil = now.Add(s.policy.Retention)
	switch {
	case to == Claimed && e.State != Claimed:
		// A new claim (or a held entry released) is the stream's to deliver
		// until its re-drive time; the open-row index orders it by that.
		next.RedriveAt = now.Add(s.policy.RedriveAfter)
	case e.State == Claimed && to != Claimed:
		next.RedriveAt = timeZero // the move to dispatching sets its lease
	}
	if mut != nil {
		mut(&next)
	}
	ev := Event{
		ID: s.ids(), Kind: k, From: e.State, To: to, At: now, Worker: string(w), Reason: reason,
		PolicyVersion: s.policy.Version, Attempt: next.Attempts, AckID: next.AckID, ContentHash: next.ContentHash,
	}
	ev = Chain(e.Key, e.Last().Hash, ev)
	next.History = append(next.History, ev)
	return Change{From: e.State, Version: e.Version, Next: next, Event: ev}
}

// Write applies c. When the store reports a failure, the entry is read back:
// if its history holds our event, the Write landed (its response was lost,
// or a retry of it failed its own condition) and counts as done. A conflict
// that came back with the stored entry needs no read: the store looked for
// our event in it, and the entry travels with the error (conflictAt) for the
// caller's fresh decision.
func (s *Core) Write(ctx context.Context, c Change) (Entry, error) {
	e, err := s.store.Apply(ctx, c)
	if err != nil {
		if errors.Is(err, ErrConflict) && e.Key == c.Next.Key {
			return Entry{}, &conflictAt{row: e, err: err}
		}
		fresh, gerr := s.store.Get(ctx, c.Next.Key)
		if gerr != nil || !fresh.Holds(c.Event.ID) {
			return Entry{}, err
		}
		e = fresh
	}
	s.Transitioned(c.From, c.Next)
	return e, nil
}

// Apply writes c and, when the entry ends, purges its sealed content and,
// in dispatch, gives back a send-limit count nothing was sent for
// (giveBack).
func (s *Core) Apply(ctx context.Context, c Change, out Outcome) (DispatchResult, error) {
	e, err := s.Write(ctx, c)
	if err != nil {
		return DispatchResult{}, fmt.Errorf("%s -> %s %s: %w", c.From, c.Next.State, c.Next.Key, err)
	}
	if e.State.Terminal() || e.State == Quarantined {
		if err := s.purge(ctx, e); err != nil {
			return DispatchResult{Outcome: out, Entry: e}, err
		}
		// An entry that ends limited was refused by the counters: nothing to
		// give back (a stale dispatch that counted it gives its own back).
		if e.State != Limited && s.giveBack != nil {
			if err := s.giveBack(ctx, e); err != nil {
				return DispatchResult{Outcome: out, Entry: e}, err
			}
		}
	}
	s.SettleSuccessor(ctx, e, Worker(c.Event.Worker))
	return DispatchResult{Outcome: out, Entry: e}, nil
}

// maxRaces bounds how often a use case re-reads an entry after losing a
// conditional write to a concurrent one.
const maxRaces = 5

// OnConflict runs try on the entry e. When try loses a compare-and-set to a
// concurrent write (an error wrapping ErrConflict), the fresh entry (the one
// the conflict returned, or else read again) goes to again, and if again
// accepts it, try runs on it; at most maxRaces times in all. It returns try's last error. The one read-decide-write loop
// of the use cases.
func (s *Core) OnConflict(ctx context.Context, e Entry, try func(Entry) error, again func(fresh Entry) bool) error {
	for race := 1; ; race++ {
		err := try(e)
		if !errors.Is(err, ErrConflict) || race == maxRaces {
			return err
		}
		var fresh Entry
		var gerr error
		if ca := (*conflictAt)(nil); errors.As(err, &ca) && ca.row.Key == e.Key {
			fresh = ca.row
		} else {
			fresh, gerr = s.store.Get(ctx, e.Key)
		}
		if gerr != nil || !again(fresh) {
			return err
		}
		e = fresh
	}
}

// ContentKey is the content-store key of an entry's sealed content: the dedupe
// key and the content hash, so content offered with another hash can never
// stand in for the entry's own.
func ContentKey(e Entry) string { return ContentKeyFor(e.Key, e.ContentHash) }

func ContentKeyFor(key, hash string) string { return key + ":" + hash }

func (s *Core) purge(ctx context.Context, e Entry) error {
	if err := s.content.Delete(ctx, ContentKey(e)); err != nil {
		return fmt.Errorf("purge content %s: %w", e.Key, err)
	}
	return nil
}

// conflictAt is a lost compare-and-set that carries the entry as the store
// holds it, so that onConflict decides afresh without reading it again.
type conflictAt struct {
	row Entry
	err error
}

func (c *conflictAt) Error() string { return c.err.Error() }
func (c *conflictAt) Unwrap() error { return c.err }

func (s *Core) Quarantine(ctx context.Context, e Entry, w Worker, reason string) error {
	c, err := s.Transition(e, Quarantined, w, reason, func(n *Entry) {
		n.NextCheckAt = timeZero
		n.Reason = reason
	})
	if err != nil {
		return err
	}
	_, err = s.Apply(ctx, c, "")
	return err
}

// AcceptOnEvidence moves the entry e, which already holds the provider-event
// entry ev, to accepted with that event as its evidence; by says who decided.
func (s *Core) AcceptOnEvidence(ctx context.Context, e Entry, w Worker, ev Event, by string) (Entry, error) {
	reason := fmt.Sprintf("%s: provider event %s (message %s) is transport evidence that the message was accepted", by, ev.ProviderType, ev.AckID)
	return s.Decide(ctx, e, Accepted, w, reason, ev.AckID)
}

// Decide moves an unknown, quarantined (or, on provider evidence, deferred)
// entry to a final state.
func (s *Core) Decide(ctx context.Context, e Entry, to State, w Worker, reason, ackID string) (Entry, error) {
	c, err := s.Decision(e, to, w, reason, ackID)
	if err != nil {
		return Entry{}, err
	}
	r, err := s.Apply(ctx, c, "")
	return r.Entry, err
}

// Decision is the change decide writes: the entry in its final state, with
// nothing left to check or attempt.
func (s *Core) Decision(e Entry, to State, w Worker, reason, ackID string) (Change, error) {
	return s.Transition(e, to, w, reason, func(n *Entry) {
		n.ClearDeferral()
		n.NextCheckAt = timeZero
		n.Reason = reason
		if ackID != "" {
			n.AckID = ackID
		}
	})
}

// ClearDeferral clears what a deferral set: the next attempt, the booked
// slot and the not-sent code.
func (e *Entry) ClearDeferral() {
	e.NextAttemptAt, e.SlotAt, e.NotSentCode = timeZero, timeZero, ""
}

func (s *Core) Expire(ctx context.Context, e Entry, w Worker, reason string, out Outcome) (DispatchResult, error) {
	c, err := s.Transition(e, Expired, w, reason, func(n *Entry) {
		n.LeaseUntil, n.NextCheckAt, n.NextAttemptAt, n.SlotAt = timeZero, timeZero, timeZero, timeZero
		n.Reason = reason
	})
	if err != nil {
		return DispatchResult{}, err
	}
	return s.Apply(ctx, c, out)
}
