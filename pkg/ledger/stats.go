package ledger

import (
	"context"
	"fmt"
	"time"
)

// AgeBuckets are the upper bounds of the overdue buckets of Stats; the last
// bucket is open-ended.
var AgeBuckets = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour}

// BucketName names the bucket that holds overdue.
func BucketName(overdue time.Duration) string {
	lower := "0"
	for _, b := range AgeBuckets {
		if overdue < b {
			return lower + "-" + b.String()
		}
		lower = b.String()
	}
	return ">" + lower
}

// StateStats summarizes the entries of one open state that are due: whose
// sweep time (a held or claimed entry's expiry, a lease's end, a deferred
// entry's next attempt, an unknown entry's next check, a quarantined entry's last
// write: Entry.OpenDue, but for a claim its expiry, not its re-drive time)
// has passed. Entries not yet due are not counted: a surge's backlog of
// claims waiting in the stream shows in the stream's lag, not here.
type StateStats struct {
	// Count is the number of due entries.
	Count int
	// Oldest is how long past due the earliest of them is.
	Oldest time.Duration
	// ByAge counts them by how long past due they are (BucketName).
	ByAge map[string]int
}

// ReadStats reports the due entries of every open state at now, from the
// open-row index (Store.DueTimes): its reads follow the entries that are
// due, never the entries that are open, so a reconcile run costs the same with
// ten thousand claims waiting, not yet due for a re-drive, as with a hundred.
func ReadStats(ctx context.Context, store Store, now time.Time) (map[State]StateStats, error) {
	now = now.UTC().Truncate(Precision)
	out := map[State]StateStats{}
	for _, st := range States {
		if !st.Open() {
			continue
		}
		dueTimes := store.DueTimes
		if st == Claimed {
			// A claim is due for the expire sweep at its expiry (and
			// for a re-drive earlier, which the stream's lag shows).
			dueTimes = store.Expiries
		}
		due, err := dueTimes(ctx, st, now)
		if err != nil {
			return nil, fmt.Errorf("stats %s: %w", st, err)
		}
		ss := StateStats{ByAge: map[string]int{}}
		for _, d := range due {
			late := max(now.Sub(d), 0)
			ss.Count++
			ss.ByAge[BucketName(late)]++
			ss.Oldest = max(ss.Oldest, late)
		}
		out[st] = ss
	}
	return out, nil
}
