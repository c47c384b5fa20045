package dynamostore

import (
	"strings"
	"time"

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
