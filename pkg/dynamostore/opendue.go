package dynamostore

import (
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// openDue is a row's sort key in the open-row index: its OpenDue, and for a
// row due before its expiry (a claim due for a re-drive) the expiry after a
// '|', so the expire sweep and the figures read expiries from the index
// alone (parseOpenDue). The fixed-width time first keeps the index in
// OpenDue order.
func openDue(e ledger.Entry) string {
	due := fmtTime(e.OpenDue())
	if e.State == ledger.Claimed && e.OpenDue().Before(e.ExpiresAt) {
		due += dueSep + fmtTime(e.ExpiresAt)
	}
	return due
}

// dueSep separates the due time from the expiry in an open_due value;
// dueUpTo is the key bound that takes every value whose due time is t.
const (
	dueSep  = "|"
	dueUpTo = "|~"
)

// parseOpenDue reads an open_due value: the due time, and the expiry (the
// due time when the value carries none: only claims carry one).
func parseOpenDue(v string) (due, expires time.Time, err error) {
	d, x, found := strings.Cut(v, dueSep)
	if due, err = time.Parse(timeLayout, d); err != nil {
		return due, expires, err
	}
	expires = due
	if found {
		expires, err = time.Parse(timeLayout, x)
	}
	return due.UTC(), expires.UTC(), err
}

// keepsClaimEntry reports whether Apply leaves the row's open-row index
// entry as it is for c: a claim's move to dispatching. The claim's entry
// (in a claimed#<shard> partition, at the claim's re-drive time or its
// expiry if sooner) then stays until the row's end, whose write removes
// it: a GSI key change is a delete and a put, so keeping it saves the two
// index writes of the move (per message on the happy path, the index costs
// the claim's put and the end's delete). Every other change writes the
// row's own entry: a dispatching row coming from deferred or unknown is
// indexed in the dispatching partitions at its lease.
//
// A kept entry must not be due after the row's lease, or a sweep would
// find a stuck row late: the write is conditioned on it (keptEntryDue),
// which holds whenever Policy.Lease exceeds Policy.RedriveAfter by more
// than the workers' clock skew (2 min and 20 s by default); otherwise
// Apply writes again with the entry moved. The listings read the rows
// behind the claimed partitions' due entries to tell claims from
// dispatching rows (ListOpen, DueTimes, Expiries; sharedBy).
func keepsClaimEntry(c ledger.Change) bool {
	return c.From == ledger.Claimed && c.Next.State == ledger.Dispatching && !c.Next.LeaseUntil.IsZero()
}

// keptEntryDue is the largest open_due a dispatching row's kept entry may
// have: every value whose due time is not after the row's lease.
func keptEntryDue(e ledger.Entry) string { return fmtTime(e.LeaseUntil) + dueUpTo }

// onlyEntryLate reports whether a write of c that kept the claim's entry
// failed only because of keptEntryDue: the stored row is still in c.From
// at c.Version and, with c.NotExpiredBy, expires after it.
func onlyEntryLate(c ledger.Change, stored map[string]types.AttributeValue) bool {
	cur, err := decode(stored)
	return err == nil && cur.State == c.From && cur.Version == c.Version &&
		(c.NotExpiredBy.IsZero() || ms(cur.ExpiresAt) > ms(c.NotExpiredBy))
}

// families lists the states whose index partitions may hold the entry of
// a row in state: a dispatching row's entry may be its claim's
// (keepsClaimEntry).
func families(state ledger.State) []ledger.State {
	if state == ledger.Dispatching {
		return []ledger.State{ledger.Dispatching, ledger.Claimed}
	}
	return []ledger.State{state}
}

// sharedBy reports whether entries in family's partitions may belong to
// rows in another state, so the index alone cannot say whose they are:
// the claimed partitions hold claims and the kept entries of dispatching
// rows.
func sharedBy(family ledger.State) bool { return family == ledger.Claimed }
