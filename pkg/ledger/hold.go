package ledger

import "time"

// holdsSlot reports whether a dispatch that booked the send slot at for the
// entry e must hold the slot on the entry (a deferral to it) before waiting for
// it: whether another delivery of the entry can arrive during the wait and
// book a slot of its own, which one of the two would then leave unused.
//
//   - A deferred entry is the dispatch queue's, whose messages may be repeated
//     and whose entry reconcile re-drives once its wake-up is late: it holds
//     the slot unless it already holds this one.
//   - A claim is the stream's until its re-drive time (RedriveAt): no
//     re-drive hands it back before then (Redrive), so a wait that ends
//     before it needs no hold. That saves the deferral write, a whole-item
//     write with an index move and a history entry that every later write
//     of the entry pays for again. A claim written without a re-drive time,
//     or whose slot is at or past it, holds the slot here; the stream's
//     delivery of it can still do without (Dispatcher.streamKeepsClaimUntil: in a
//     surge the stream delivers most claims past their re-drive time, and
//     its lateness mark keeps reconcile from handing them back).
//
// A duplicate of the stream record arriving during an unheld wait can still
// book a second slot: send capacity lost, never a second send, since the
// conditional move to dispatching decides.
func holdsSlot(e Entry, at time.Time) bool {
	switch e.State {
	case Deferred:
		return !e.SlotAt.Equal(at)
	case Claimed:
		return e.RedriveAt.IsZero() || !at.Before(e.RedriveAt)
	}
	return true
}
