package digest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Finding kinds: what a finding is about.
const (
	// FindDigest: a digest is missing, forged, altered, out of chain,
	// hidden, stale; or an object under digests/ is not a digest.
	FindDigest = "digest"
	// FindGap: the digests show stream records that were never digested.
	FindGap = "gap"
	// FindRow: a row disagrees with what a digest recorded, is missing, or
	// is not a ledger row.
	FindRow = "row"
	// FindPending: a row changed after the last digest that covers it, or
	// a removal the digests record as lawful (neither is a failure unless
	// the code says so).
	FindPending = "pending"
)

// Finding codes: what a finding says, for machines (docs/digests.md §7
// lists them). Every code but CodePending and CodeRemoved is a failure.
const (
	// §3: the digests themselves.
	CodeMissing      = "missing"       // a digest number has no digest
	CodeSignature    = "signature"     // the signature does not verify
	CodeFormat       = "format"        // another format or signing algorithm
	CodeMalformed    = "malformed"     // not a digest object, numbered otherwise than stored, or a row record that cannot be
	CodeDuplicate    = "duplicate"     // a key recorded twice in one digest
	CodePrev         = "prev"          // prev is not the previous digest's hash
	CodeAtDecreased  = "at-decreased"  // at is earlier than the previous digest's
	CodeAtFuture     = "at-future"     // at is later than the verifier's clock plus the skew
	CodeStale        = "stale"         // the newest digest is older than the bound
	CodeOverwritten  = "overwritten"   // a later object version was written over a digest
	CodeDeleteMarker = "delete-marker" // a delete marker was put over a digest
	CodeForeign      = "foreign"       // an object under digests/ that is not a digest name
	CodeGap          = "gap"           // the digest records a gap
	CodeLost         = "lost"          // a row's records between two digests were never digested
	CodeShortened    = "shortened"     // a digest records a retention earlier than the highest before it
	// §4: the rows against the digests.
	CodeReappeared     = "reappeared"       // the row exists though a digest recorded it removed
	CodeTruncated      = "truncated"        // the row holds fewer entries than a digest recorded
	CodeRewritten      = "rewritten"        // the entry at a digested count has another hash
	CodeDeleted        = "deleted"          // the row is gone before its retention ended
	CodeMalformedRow   = "malformed-row"    // a table item under the row key that is not a ledger row
	CodePendingTooLong = "pending-too-long" // entries not digested for longer than the bound
	CodePending        = "pending"          // entries not yet digested (not a failure)
	CodeRemoved        = "removed"          // removed at or after its retention (not a failure)
)

// Codes lists every finding code, failures first.
var Codes = []string{
	CodeMissing, CodeSignature, CodeFormat, CodeMalformed, CodeDuplicate, CodePrev, CodeAtDecreased, CodeAtFuture,
	CodeStale, CodeOverwritten, CodeDeleteMarker, CodeForeign, CodeGap, CodeLost, CodeShortened,
	CodeReappeared, CodeTruncated, CodeRewritten, CodeDeleted, CodeMalformedRow, CodePendingTooLong,
	CodePending, CodeRemoved,
}

// Finding is one result of a check. Fail is false only for CodePending and
// CodeRemoved.
type Finding struct {
	Code   string
	Kind   string
	Seq    uint64 // the digest concerned, 0 if none
	Key    string // the row concerned, "" if none
	Object string // the object concerned (CodeForeign), "" if none
	Detail string
	Fail   bool
	// Age is how long a pending row has waited since its last write.
	Age time.Duration
}

// String is the finding's line, for people and machines alike: its code
// first, then what it names, then why (docs/digests.md §7):
//
//	<code> ROW <key> digest <n>: <detail>
//	<code> ROW <key>: <detail>
//	<code> DIGEST <n>: <detail>
//	<code> OBJECT <name>: <detail>
func (f Finding) String() string {
	s := f.Code
	switch {
	case f.Key != "":
		s += " ROW " + f.Key
		if f.Seq != 0 {
			s += fmt.Sprintf(" digest %d", f.Seq)
		}
	case f.Object != "":
		s += " OBJECT " + f.Object
	default:
		s += fmt.Sprintf(" DIGEST %d", f.Seq)
	}
	return s + ": " + oneLine.ReplaceAllString(f.Detail, " ")
}

var oneLine = regexp.MustCompile(`[\r\n]+`)

// The verifier's bounds (docs/digests.md §3).
const (
	// DefaultInterval is DIGEST_INTERVAL's default.
	DefaultInterval = 5 * time.Minute
	// TickFloor is the shortest schedule EventBridge runs (rate(1 minute)):
	// the heartbeat's period is the interval, but not less.
	TickFloor = time.Minute
	// StaleAllowance is what the stale bound allows beyond two heartbeat
	// periods: a cold start, a retried invocation, the clocks' skew.
	StaleAllowance = 5 * time.Minute
	// DefaultSkew is how far in the future a digest's at may lie by the
	// verifier's clock.
	DefaultSkew = 5 * time.Minute
)

// TickPeriod is the heartbeat schedule's period for a digest interval:
// the interval rounded up to whole minutes (EventBridge's rate unit), at
// least TickFloor. 5 minutes for the default interval.
func TickPeriod(interval time.Duration) time.Duration {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return max(TickFloor, (interval+time.Minute-1)/time.Minute*time.Minute)
}

// StaleAfter is the stale bound for a digest interval: two tick periods
// and StaleAllowance. A verifier reports the newest digest stale, and a
// row pending too long, past it. 15 minutes for the default interval.
func StaleAfter(interval time.Duration) time.Duration {
	return 2*TickPeriod(interval) + StaleAllowance
}

// Options are the verifier's settings for the checks that need a clock.
type Options struct {
	// Now is the verifier's clock. Zero skips the checks that need it
	// (stale, at-future); CheckRow takes its own.
	Now time.Time
	// StaleAfter bounds the newest digest's age (else stale) and a row's
	// pending age (else pending-too-long); 0 is StaleAfter(DefaultInterval).
	StaleAfter time.Duration
	// Skew is how far after Now a digest's at may lie (else at-future); 0
	// is DefaultSkew.
	Skew time.Duration
}

type ref struct {
	seq uint64
	at  time.Time
	row Row
}

// life is the records of one key from its insertion to its removal (the
// key may be written again after a removal: a new life).
type life struct {
	refs []ref
	// removal is the earliest removal record of the life (nil while the
	// row exists): the one its removal is judged by.
	removal *ref
	// retain is the highest retain_until any record of the life holds
	// (0: kept forever; -1: none yet).
	retain int64
}

// Chain is the verified digest chain, indexed by row.
type Chain struct {
	// Digests is how many digests verified; Last the highest number seen.
	Digests int
	Last    uint64
	// Newest is the number and at of the newest digest that verified (0
	// and zero if none).
	Newest   uint64
	NewestAt time.Time
	// Findings are the chain's own: digests missing, forged, altered,
	// out of order, hidden or stale, objects that are not digests, gaps
	// they record, rows whose records were lost between two digests, and
	// retentions moved earlier.
	Findings []Finding
	opts     Options
	refs     map[string][]ref
	lives    map[string][]*life
	seen     map[string]bool
}

// Overwrites is a Store that can tell which digests had later versions
// written over them (S3 keeps versions; Object Lock locks each one).
type Overwrites interface {
	// Overwritten returns, after List, how many versions were written
	// after the first of each digest that has any.
	Overwritten() map[uint64]int
}

// Anomalies is a Store that can tell, after List, what else it found
// under digests/.
type Anomalies interface {
	// Foreign returns the names under digests/ that are not digest names
	// (another suffix, a number not padded to 20 digits, another object).
	Foreign() []string
	// DeleteMarked returns, for each digest with delete markers among its
	// versions, how many.
	DeleteMarked() map[uint64]int
}

// Load is LoadWith without a clock: the stale and at-future checks are
// skipped.
func Load(ctx context.Context, s Store, v Verifier) (*Chain, error) {
	return LoadWith(ctx, s, v, Options{})
}

// LoadWith reads every digest in s, checks each signature with v, the
// numbering (1, 2, ... with no hole), each Prev and at, what else the
// store holds under digests/, and indexes the rows the valid digests
// record. Only a failure to read s is an error; what is wrong with the
// digests is in Findings. It is long because it is digests.md §4's steps
// in their order, one finding per step.
func LoadWith(ctx context.Context, s Store, v Verifier, o Options) (*Chain, error) {
	if o.StaleAfter <= 0 {
		o.StaleAfter = StaleAfter(DefaultInterval)
	}
	if o.Skew <= 0 {
		o.Skew = DefaultSkew
	}
	seqs, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("digest: list: %w", err)
	}
	c := &Chain{opts: o, refs: map[string][]ref{}, lives: map[string][]*life{}, seen: map[string]bool{}}
	fail := func(seq uint64, code, format string, a ...any) {
		c.Findings = append(c.Findings, Finding{Code: code, Kind: FindDigest, Seq: seq, Fail: true, Detail: fmt.Sprintf(format, a...)})
	}
	want := uint64(1)
	prevHash, prevOK := "", true // digest 0 "exists" with hash ""
	var prevAt time.Time
	var prevAtSeq uint64
	for _, seq := range seqs {
		if seq > want {
			if seq-1 == want {
				fail(want, CodeMissing, "the chain has a hole (digest %d exists)", seq)
			} else {
				fail(want, CodeMissing, "digests %d to %d are missing: the chain has a hole (digest %d exists)", want, seq-1, seq)
			}
			prevOK = false
		}
		want = seq + 1
		c.Last = seq
		raw, err := s.Get(ctx, seq)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				fail(seq, CodeMissing, "listed but unreadable")
				prevOK = false
				continue
			}
			return nil, fmt.Errorf("digest %d: %w", seq, err)
		}
		d, body, err := v.Open(raw)
		switch {
		case errors.Is(err, ErrFormat):
			fail(seq, CodeFormat, "%v", err)
		case errors.Is(err, ErrSignature):
			fail(seq, CodeSignature, "signature does not verify under the digest key (forged or altered)")
		case err != nil:
			fail(seq, CodeMalformed, "%v", err)
		case d.Seq != seq:
			fail(seq, CodeMalformed, "stored as digest %d but its body says %d", seq, d.Seq)
		default:
			if code, why := rowsWellFormed(d.Rows); code != "" {
				fail(seq, code, "%s", why)
				err = ErrMalformed
			}
		}
		if err != nil || d.Seq != seq {
			prevOK = false
			continue
		}
		if prevOK && d.Prev != prevHash {
			fail(seq, CodePrev, "its prev hash does not match digest %d (the chain was cut and spliced)", seq-1)
		}
		prevHash, prevOK = Hash(body), true
		if !prevAt.IsZero() && d.At.Before(prevAt) {
			fail(seq, CodeAtDecreased, "made at %s, before digest %d (%s): its time was set back", stamp(d.At), prevAtSeq, stamp(prevAt))
		}
		if !o.Now.IsZero() && d.At.After(o.Now.Add(o.Skew)) {
			fail(seq, CodeAtFuture, "made at %s, later than now (%s) by more than %s: its time was set ahead", stamp(d.At), stamp(o.Now), o.Skew)
		}
		if d.At.After(prevAt) {
			prevAt, prevAtSeq = d.At, seq
		}
		c.Digests++
		c.Newest, c.NewestAt = seq, d.At
		for _, g := range d.Gaps {
			c.Findings = append(c.Findings, Finding{Code: CodeGap, Kind: FindGap, Seq: seq, Key: g.Key, Fail: true,
				Detail: fmt.Sprintf("the digest records a gap (%s): %s", g.Kind, g.Detail)})
		}
		for _, r := range d.Rows {
			c.refs[r.Key] = append(c.refs[r.Key], ref{seq: seq, at: d.At, row: r})
		}
	}
	if !o.Now.IsZero() && c.Newest != 0 && o.Now.Sub(c.NewestAt) > o.StaleAfter {
		fail(c.Newest, CodeStale, "the newest digest was made at %s, %s ago, more than the bound of %s: the digests stopped",
			stamp(c.NewestAt), o.Now.Sub(c.NewestAt).Truncate(time.Second), o.StaleAfter)
	}
	if ow, ok := s.(Overwrites); ok {
		for _, seq := range seqs {
			if n := ow.Overwritten()[seq]; n > 0 {
				fail(seq, CodeOverwritten, "%d later versions were written over it (its first version, the one checked, is the digest)", n)
			}
		}
	}
	if an, ok := s.(Anomalies); ok {
		marked := an.DeleteMarked()
		for _, seq := range sortedKeys(marked) {
			if marked[seq] == 0 {
				continue
			}
			fail(seq, CodeDeleteMarker, "%d delete markers were put over it: a copy of current versions lacks it, and its name takes new versions (its first version, the one checked, is the digest)", marked[seq])
		}
		for _, name := range an.Foreign() {
			c.Findings = append(c.Findings, Finding{Code: CodeForeign, Kind: FindDigest, Object: name, Fail: true,
				Detail: "an object under digests/ that is not a digest name (digests/ and the number padded to 20 digits, .json)"})
		}
	}
	c.checkRows()
	return c, nil
}

// rowsWellFormed checks a digest's row records: sorted by key, each key
// once, 0 <= from <= count, count >= 1, removed
// empty, "ttl" or "delete". It returns the code and why for the first
// that is not.
func rowsWellFormed(rows []Row) (code, why string) {
	for i, r := range rows {
		switch {
		case i > 0 && r.Key == rows[i-1].Key:
			return CodeDuplicate, fmt.Sprintf("row %s is recorded twice", r.Key)
		case i > 0 && r.Key < rows[i-1].Key:
			return CodeMalformed, fmt.Sprintf("rows are not sorted by key (row %d)", i)
		case r.Key == "":
			return CodeMalformed, fmt.Sprintf("row %d has no key", i)
		case r.Count < 1:
			return CodeMalformed, fmt.Sprintf("row %s records %d entries: a row holds at least one", r.Key, r.Count)
		case r.From < 0 || r.From > r.Count:
			return CodeMalformed, fmt.Sprintf("row %s records from %d beyond count %d", r.Key, r.From, r.Count)
		case r.Removed != "" && r.Removed != RemovedTTL && r.Removed != RemovedDelete:
			return CodeMalformed, fmt.Sprintf("row %s's removed is %q", r.Key, clip(r.Removed))
		case r.RetainUntil < 0:
			return CodeMalformed, fmt.Sprintf("row %s's retain_until is negative", r.Key)
		}
	}
	return "", ""
}

// checkRows splits each key's records into lives and compares successive
// records of a life: entries no digest covered between two of them
// (lost), a retention lower than the highest before it (shortened), a
// record after a removal that does not start a new row (lost).
func (c *Chain) checkRows() {
	for _, k := range sortedKeys(c.refs) {
		var cur *life
		for _, r := range c.refs[k] {
			switch {
			case cur != nil && cur.removal != nil && r.row.From == 0:
				cur = nil // written again after its removal: a new life
			case cur != nil && cur.removal != nil:
				c.Findings = append(c.Findings, Finding{Code: CodeLost, Kind: FindGap, Seq: r.seq, Key: k, Fail: true,
					Detail: fmt.Sprintf("digest %d recorded the row removed; this one starts from %d entries, not 0: the records between were never digested", cur.removal.seq, r.row.From)})
			case cur != nil:
				if p := cur.refs[len(cur.refs)-1]; r.row.From != p.row.Count {
					c.Findings = append(c.Findings, Finding{Code: CodeLost, Kind: FindGap, Seq: r.seq, Key: k, Fail: true,
						Detail: fmt.Sprintf("digest %d recorded %d entries, this one starts from %d: stream records were never digested", p.seq, p.row.Count, r.row.From)})
				}
			}
			if cur == nil {
				cur = &life{retain: -1}
				c.lives[k] = append(c.lives[k], cur)
			}
			if cur.retain != -1 && earlier(r.row.RetainUntil, cur.retain) {
				c.Findings = append(c.Findings, Finding{Code: CodeShortened, Kind: FindRow, Seq: r.seq, Key: k, Fail: true,
					Detail: fmt.Sprintf("the row's retention was moved earlier, to %s, than an earlier digest recorded (%s)", unix(r.row.RetainUntil), unix(cur.retain))})
			}
			cur.retain = latest(cur.retain, r.row.RetainUntil)
			cur.refs = append(cur.refs, r)
			if r.row.Removed != "" && cur.removal == nil {
				rr := r
				cur.removal = &rr
			}
		}
	}
	c.refs = nil // the lives hold every record now
}

// Covers reports whether some digest recorded key.
func (c *Chain) Covers(key string) bool { return len(c.lives[key]) > 0 }

// CheckRow checks e against the digests (CheckHashes with its entries'
// hashes and the time of its last write).
func (c *Chain) CheckRow(e ledger.Entry, now time.Time) []Finding {
	hashes := make([]string, len(e.History))
	for i, ev := range e.History {
		hashes[i] = ev.Hash
	}
	last := e.UpdatedAt
	if len(e.History) > 0 && !e.Last().At.IsZero() {
		last = e.Last().At
	}
	return append(c.CheckHashes(e.Key, hashes, last, now), c.checkRetention(e)...)
}

// checkRetention compares the retention the table holds for e with the
// highest its current life's digests recorded: a retention moved earlier
// in steps, each within the slack of the batch that recorded it (a
// digest records its batch's highest, so the last step's value reaches no
// digest), is shortened all the same once the steps add up.
func (c *Chain) checkRetention(e ledger.Entry) []Finding {
	lives := c.lives[e.Key]
	if len(lives) == 0 || lives[len(lives)-1].removal != nil || lives[len(lives)-1].retain == -1 {
		return nil
	}
	held, highest := int64(0), lives[len(lives)-1].retain
	if !e.RetainUntil.IsZero() {
		held = e.RetainUntil.Unix()
	}
	if !earlier(held, highest) {
		return nil
	}
	l := lives[len(lives)-1]
	return []Finding{{Code: CodeShortened, Kind: FindRow, Seq: l.refs[len(l.refs)-1].seq, Key: e.Key, Fail: true,
		Detail: fmt.Sprintf("the table holds a retention of %s, earlier than the digests recorded (%s)", unix(held), unix(highest))}}
}

// CheckHashes checks the row key, holding entries whose hashes are hashes
// and last written at last (zero if unknown), against every (count, head)
// the digests recorded for its current life: the entry at that count must
// have that hash (else it was rewritten, even with the chain recomputed),
// and the row must hold at least that many entries (else entries were
// removed). A row the digests record removed, and that holds the removed
// row's entries, reappeared; one that does not is a new row written
// after the removal. Entries no digest covers yet are pending, with their
// age at now, and pending-too-long past the stale bound. The removals of
// the key's earlier lives are judged as CheckAbsent judges them.
func (c *Chain) CheckHashes(key string, hashes []string, last, now time.Time) []Finding {
	c.seen[key] = true
	var out []Finding
	n := int64(len(hashes))
	lives := c.lives[key]
	var covered int64
	for i, l := range lives {
		if l.removal == nil {
			continue
		}
		if i == len(lives)-1 {
			r := l.removal
			if r.row.Count <= n && hashes[r.row.Count-1] == r.row.Head {
				out = append(out, Finding{Code: CodeReappeared, Kind: FindRow, Seq: r.seq, Key: key, Fail: true,
					Detail: fmt.Sprintf("the digest records the row removed (%s), yet the table holds it, entry %d unchanged", r.row.Removed, r.row.Count-1)})
				covered = r.row.Count
			}
		}
		if f, ok := c.judgeRemoval(key, l); ok && f.Fail {
			out = append(out, f)
		}
	}
	if len(lives) > 0 && lives[len(lives)-1].removal == nil {
		for _, r := range lives[len(lives)-1].refs {
			switch {
			case r.row.Count > n:
				out = append(out, Finding{Code: CodeTruncated, Kind: FindRow, Seq: r.seq, Key: key, Fail: true,
					Detail: fmt.Sprintf("the digest recorded %d entries, the table holds %d: entries were removed", r.row.Count, n)})
			case hashes[r.row.Count-1] != r.row.Head:
				out = append(out, Finding{Code: CodeRewritten, Kind: FindRow, Seq: r.seq, Key: key, Fail: true,
					Detail: fmt.Sprintf("entry %d does not match the head the digest recorded: the history was rewritten", r.row.Count-1)})
			}
			covered = max(covered, r.row.Count)
		}
	}
	if covered < n {
		f := Finding{Code: CodePending, Kind: FindPending, Key: key}
		what := fmt.Sprintf("entries %d to %d not yet digested", covered, n-1)
		switch {
		case last.IsZero():
			f.Detail = what + " (last write unknown)"
		default:
			f.Age = now.Sub(last)
			f.Detail = fmt.Sprintf("%s (last write %s ago)", what, f.Age.Truncate(time.Second))
			if f.Age > c.opts.StaleAfter {
				f.Code, f.Kind, f.Fail = CodePendingTooLong, FindRow, true
				f.Detail += fmt.Sprintf(", more than the bound of %s: the digests are behind or stopped", c.opts.StaleAfter)
			}
		}
		out = append(out, f)
	}
	return out
}

// judgeRemoval judges a life that ended in a removal by its earliest
// removal record: deleted if the digest recording it was made before the
// life's retention (less RetentionSlack) ended; else a lawful removal.
func (c *Chain) judgeRemoval(key string, l *life) (Finding, bool) {
	r := l.removal
	if r == nil {
		return Finding{}, false
	}
	until := unix(l.retain)
	switch {
	case kept(l.retain, r.at) && r.row.Removed == RemovedTTL:
		return Finding{Code: CodeDeleted, Kind: FindRow, Seq: r.seq, Key: key, Fail: true,
			Detail: fmt.Sprintf("removed by the TTL before the retention a digest recorded (%s): its TTL was moved earlier", until)}, true
	case kept(l.retain, r.at):
		return Finding{Code: CodeDeleted, Kind: FindRow, Seq: r.seq, Key: key, Fail: true,
			Detail: fmt.Sprintf("deleted (DeleteItem) before its retention ended (%s)", until)}, true
	}
	return Finding{Code: CodeRemoved, Kind: FindPending, Seq: r.seq, Key: key,
		Detail: fmt.Sprintf("removed (%s) after its retention ended (%s)", r.row.Removed, until)}, true
}

// CheckAbsent judges key, which the table does not hold, against the
// digests at now: every removal the digests record for it by the earliest
// removal record of its life (deleted if before the retention ended), and,
// if the digests last recorded the row existing, its absence (deleted if
// now is before the retention ends). It returns nil if no digest records
// key; a lawful removal is a CodeRemoved finding that does not fail.
func (c *Chain) CheckAbsent(key string, now time.Time) []Finding {
	c.seen[key] = true
	lives := c.lives[key]
	var out []Finding
	for i, l := range lives {
		f, ok := c.judgeRemoval(key, l)
		switch {
		case ok && (f.Fail || i == len(lives)-1):
			out = append(out, f)
		case !ok && i == len(lives)-1:
			last := l.refs[len(l.refs)-1]
			if kept(l.retain, now) {
				out = append(out, Finding{Code: CodeDeleted, Kind: FindRow, Seq: last.seq, Key: key, Fail: true,
					Detail: fmt.Sprintf("missing from the table before its retention ends (%s): deleted", unix(l.retain))})
			} else {
				out = append(out, Finding{Code: CodeRemoved, Kind: FindPending, Seq: last.seq, Key: key,
					Detail: fmt.Sprintf("gone after its retention ended (%s): the TTL's removal, not yet digested", unix(l.retain))})
			}
		}
	}
	return out
}

// Missing judges, with CheckAbsent, every key a digest recorded that
// CheckRow, CheckHashes or CheckAbsent never saw, and returns the
// failures. Call it after every row of the table was checked.
func (c *Chain) Missing(now time.Time) []Finding {
	var out []Finding
	for _, k := range sortedKeys(c.lives) {
		if c.seen[k] {
			continue
		}
		for _, f := range c.CheckAbsent(k, now) {
			if f.Fail {
				out = append(out, f)
			}
		}
	}
	return out
}

// kept reports whether, at t, a row whose highest retention is retain
// (Unix seconds, 0 forever) must still be kept: t is before the retention
// less RetentionSlack.
func kept(retain int64, t time.Time) bool {
	return retain == 0 || t.Before(time.Unix(retain, 0).Add(-RetentionSlack))
}

// earlier reports whether retention deadline a (Unix seconds, 0 for none:
// kept forever) ends more than RetentionSlack before b.
func earlier(a, b int64) bool { return a != 0 && (b == 0 || a < b-int64(RetentionSlack/time.Second)) }

// latest is the later of two retention deadlines (0 is forever; -1 is
// none yet).
func latest(a, b int64) int64 {
	switch {
	case a == -1:
		return b
	case a == 0 || b == 0:
		return 0
	}
	return max(a, b)
}

func unix(s int64) string {
	if s == 0 {
		return "never"
	}
	return time.Unix(s, 0).UTC().Format(time.RFC3339)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func sortedKeys[V any, K ~string | ~uint64](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Skip records that the table holds key though it cannot be checked (an
// item that is not a ledger row, reported as such): Missing does not
// report it.
func (c *Chain) Skip(key string) { c.seen[key] = true }

// Opts returns the options the chain was loaded with, defaults filled in.
func (c *Chain) Opts() Options { return c.opts }
