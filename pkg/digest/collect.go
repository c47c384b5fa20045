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
// older entries changed between two records, a record older than the
// stream's retention when read at now, an unreadable record.
func Collect(records []Record, now time.Time) Batch {
	var b Batch
	rows := map[string]*Row{}
	var order []string
	shards := map[string]int{}
	aged := map[string]bool{}
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
		if seen && row.Count != from {
			gap(Gap{Kind: GapCount, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s starts at %d entries; the previous record left %d", r.Seq, from, row.Count)})
		}
		if r.Event == Modify && r.Old != nil && r.New != nil {
			if was, is := r.Old.RetainUntil, r.New.RetainUntil; !was.IsZero() && !is.IsZero() && is.Before(was.Add(-RetentionSlack)) {
				gap(Gap{Kind: GapRetention, Key: r.Key, Shard: r.Shard, Detail: fmt.Sprintf("record %s: the row's retention was shortened from %s to %s", r.Seq, was.UTC().Format(time.RFC3339), is.UTC().Format(time.RFC3339))})
			}
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
		next := Row{Key: r.Key, From: from, Count: int64(len(img.Hashes)), Head: img.Hashes[len(img.Hashes)-1], RetainUntil: img.RetainUntil.Unix()}
		if img.RetainUntil.IsZero() {
			next.RetainUntil = 0
		}
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
			order = append(order, r.Key)
		}
	}
	for _, k := range order {
		b.Rows = append(b.Rows, *rows[k])
	}
	return b
}
