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
// A kept entry is due at least keptLead before the row's lease: the write
// is conditioned on it (keptEntryDue), so a sweep that looks for
// dispatching rows due by t finds every kept entry among the claimed
// partitions' entries due by t - keptLead, never late, and never reads a
// claim that has waited less than its re-drive wait plus keptLead
// (families). With the default policy (a lease of 2 min, a re-drive after
// 20 s) the condition holds unless the workers' clocks are 40 s apart;
// where it fails (a lease shorter than REDRIVE_AFTER plus keptLead), Apply
// writes again with the entry moved, whatever the policy.
func keepsClaimEntry(c ledger.Change) bool {
	return c.From == ledger.Claimed && c.Next.State == ledger.Dispatching && !c.Next.LeaseUntil.IsZero()
}

// keptLead is how long before its row's lease a kept claim's entry is due
// at the latest.
const keptLead = time.Minute

// keptEntryDue is the largest open_due a dispatching row's kept entry may
// have: every value whose due time is keptLead or more before its lease.
func keptEntryDue(e ledger.Entry) string { return fmtTime(e.LeaseUntil.Add(-keptLead)) + dueUpTo }

// onlyEntryLate reports whether a write of c that kept the claim's entry
// failed only because of keptEntryDue: the stored row is still in c.From
// at c.Version and, with c.NotExpiredBy, expires after it.
func onlyEntryLate(c ledger.Change, stored map[string]types.AttributeValue) bool {
	cur, err := decode(stored)
	return err == nil && cur.State == c.From && cur.Version == c.Version &&
		(c.NotExpiredBy.IsZero() || ms(cur.ExpiresAt) > ms(c.NotExpiredBy))
}

// family is a state's index partitions, as a listing of rows in another
// state may query them: lead is how long before such a row is due its
// entry there is due at the latest.
type family struct {
	state ledger.State
	lead  time.Duration
}

// families lists the index partitions that may hold the entry of a row in
// state: a dispatching row's entry may be its claim's (keepsClaimEntry),
// due keptLead or more before the row.
func families(state ledger.State) []family {
	if state == ledger.Dispatching {
		return []family{{ledger.Dispatching, 0}, {ledger.Claimed, keptLead}}
	}
	return []family{{state, 0}}
}

// sharedBy reports whether entries in family's partitions may belong to
// rows in another state, so the index alone cannot say whose they are:
// the claimed partitions hold claims and the kept entries of dispatching
// rows.
func sharedBy(family ledger.State) bool { return family == ledger.Claimed }
