package digest

import (
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Stream event names.
const (
	Insert = "INSERT"
	Modify = "MODIFY"
	Remove = "REMOVE"
)

// StreamRetention is how long DynamoDB Streams keeps a record.
const StreamRetention = 24 * time.Hour

// RetentionSlack is how much earlier than a previous write's a row's
// retention deadline may be set without counting as shortened: each write
// sets it to the writing worker's clock plus the retention, and the
// workers' clocks differ by seconds (the simulator found it). Moving a
// row's TTL earlier by more is how an insider would have the TTL delete
// it early.
const RetentionSlack = 24 * time.Hour

// Image is what a digest needs of one stream image of a row: the hashes of
// its history entries, in order, and its retention deadline.
type Image struct {
	Hashes      []string
	RetainUntil time.Time
}

// ImageOf is the image of entry e: its entries' hashes and its retention.
func ImageOf(e ledger.Entry) *Image {
	img := &Image{RetainUntil: e.RetainUntil, Hashes: make([]string, len(e.History))}
	for i, ev := range e.History {
		img.Hashes[i] = ev.Hash
	}
	return img
}

// Record is one stream record, decoded.
type Record struct {
	Shard string
	Seq   string // the record's sequence number
	Event string // Insert, Modify or Remove
	// At is the record's ApproximateCreationDateTime.
	At  time.Time
	Key string
	// Old and New are the images (nil where the event has none).
	Old, New *Image
	// Removal is RemovedTTL or RemovedDelete for a Remove.
	Removal string
	// Unreadable, if set, says why the record could not be decoded (it is
	// then recorded as a gap, never skipped).
	Unreadable string
}

// Collect turns records (in shard order, as a stream batch delivers them)
// into the Batch one digest covers: one Row per key, the ranges read per
// shard, and a Gap for anything the records show is missing: a row whose
// entry count moved other than one at a time between records, a row whose
// older entries changed between two records, a write that set a row's
// retention earlier than the highest any of its images held in the batch
// (INSERT included), a row written again after its removal in the batch, a
// record older than the stream's retention when read at now, an unreadable
// record. A Row's RetainUntil is the highest retention any image of the key
// held in the batch (0 if one held none: kept forever), so a retention
// shortened within one batch cannot hide in the row's last value.
// Collect is long because it is digests.md §6's gap rules in their order,
// each one case of one pass over the batch.
func Collect(records []Record, now time.Time) Batch {
	var b Batch
	rows := map[string]*Row{}
	var order []string
	listed := map[string]bool{}
	shards := map[string]int{}
	aged := map[string]bool{}
	high := map[string]time.Time{} // the highest retention of each key, zero: forever
	gap := func(g Gap) { b.Gaps = append(b.Gaps, g) }
	for _, r := range records {
		if i, ok := shards[r.Shard]; ok {
			b.Positions[i].Last = r.Seq
		} else {
			shards[r.Shard] = len(b.Positions)
			b.Positions = append(b.Positions, Position{Shard: r.Shard, First: r.Seq, Last: r.Seq})
		}
		if !r.At.IsZero() && now.Sub(r.At) > StreamRetention && !aged[r.Shard] {
			aged[r.Shard] = true
			gap(Gap{Kind: GapAge, Shard: r.Shard, Detail: fmt.Sprintf("record %s was %s old when read: records before it may have been trimmed unread", r.Seq, now.Sub(r.At).Truncate(time.Second))})
		}
		if r.Unreadable != "" {
			gap(Gap{Kind: GapUnreadable, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: %s", r.Seq, r.Unreadable)})
			continue
		}
		img := r.New
		if r.Event == Remove {
			img = r.Old
		}
		if img == nil || len(img.Hashes) == 0 {
			gap(Gap{Kind: GapUnreadable, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: %s without the image it needs", r.Seq, r.Event)})
			continue
		}
		from := int64(0)
		if r.Old != nil {
			from = int64(len(r.Old.Hashes))
		}
		row, seen := rows[r.Key]
		if seen && row.Removed != "" && r.Event != Remove {
			// Written again after a removal in the same batch: the row
			// records the new row, and the removal is said as a gap (a
			// digest records a key once).
			gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s writes the row again after its removal (%s) in this batch", r.Seq, row.Removed)})
			delete(rows, r.Key)
			delete(high, r.Key)
			seen = false
		}
		if seen && row.Count != from {
			gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s starts at %d entries; the previous record left %d", r.Seq, from, row.Count)})
		}
		// The highest retention any image of the key held in this batch,
		// the INSERT's included (0: kept forever): a write that sets it
		// earlier than that is a gap, whatever came between.
		was, had := high[r.Key]
		if r.Old != nil {
			was, had = highest(was, had, r.Old.RetainUntil), true
		}
		if r.Event != Remove && had && earlier(unixOf(r.New.RetainUntil), unixOf(was)) {
			gap(Gap{Kind: GapRetention, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: the row's retention was shortened to %s from %s, the highest it had", r.Seq, unix(unixOf(r.New.RetainUntil)), unix(unixOf(was)))})
		}
		high[r.Key] = highest(was, had, img.RetainUntil)
		if r.Event == Modify && r.Old != nil && r.New != nil {
			switch o, n := r.Old.Hashes, r.New.Hashes; {
			case len(n) < len(o):
				gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: the history shrank from %d to %d entries", r.Seq, len(o), len(n))})
			case len(n) > len(o)+1:
				gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: one write added %d entries", r.Seq, len(n)-len(o))})
			default:
				for i := range o {
					if o[i] != n[i] {
						gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: entry %d changed", r.Seq, i)})
						break
					}
				}
			}
		}
		next := Row{Key: r.Key, From: from, Count: int64(len(img.Hashes)), Head: img.Hashes[len(img.Hashes)-1], RetainUntil: unixOf(high[r.Key])}
		if r.Event == Remove {
			next.Removed = r.Removal
			if next.Removed == "" {
				next.Removed = RemovedDelete
			}
		}
		if seen {
			next.From = row.From
			*row = next
		} else {
			rows[r.Key] = &next
			if !listed[r.Key] {
				listed[r.Key] = true
				order = append(order, r.Key)
			}
		}
	}
	for _, k := range order {
		b.Rows = append(b.Rows, *rows[k])
	}
	return b
}

// unixOf is a retention deadline in Unix seconds, 0 for none.
func unixOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// highest is the later of a retention deadline so far (if had) and t; the
// zero time (none: kept forever) is the latest of all.
func highest(was time.Time, had bool, t time.Time) time.Time {
	switch {
	case !had:
		return t
	case was.IsZero() || t.IsZero():
		return time.Time{}
	case t.After(was):
		return t
	}
	return was
}
