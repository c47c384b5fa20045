package digest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Finding kinds.
const (
	// FindDigest: a digest is missing, forged, altered or out of chain.
	FindDigest = "digest"
	// FindGap: the digests show stream records that were never digested.
	FindGap = "gap"
	// FindRow: a row disagrees with what a digest recorded, or is missing.
	FindRow = "row"
	// FindPending: a row changed after the last digest that covers it (not
	// a failure).
	FindPending = "pending"
)

// Finding codes: what a finding says, for machines (docs/digests.md §4).
const (
	CodeMissing     = "missing"     // a digest number has no digest
	CodeSignature   = "signature"   // the signature does not verify
	CodeMalformed   = "malformed"   // not a digest of this format, or numbered otherwise than stored
	CodePrev        = "prev"        // prev is not the previous digest's hash
	CodeGap         = "gap"         // the digest records a gap
	CodeLost        = "lost"        // a row's records between two digests were never digested
	CodeRewritten   = "rewritten"   // the entry at a digested count has another hash
	CodeTruncated   = "truncated"   // the row holds fewer entries than a digest recorded
	CodeReappeared  = "reappeared"  // the row exists though a digest recorded it removed
	CodeDeleted     = "deleted"     // the row is gone before its retention ended
	CodeShortened   = "shortened"   // a later digest records an earlier retention deadline
	CodeOverwritten = "overwritten" // a later object version was written over a digest
	CodePending     = "pending"     // entries not yet digested (not a failure)
)

// Finding is one result of a check. Fail is false only for FindPending.
type Finding struct {
	Code   string
	Kind   string
	Seq    uint64 // the digest concerned, 0 if none
	Key    string // the row concerned, "" if none
	Detail string
	Fail   bool
	// Age is how long a pending row has waited since its last write.
	Age time.Duration
}

func (f Finding) String() string {
	s := f.Kind
	if f.Seq != 0 {
		s += fmt.Sprintf(" digest %d", f.Seq)
	}
	if f.Key != "" {
		s += " row " + f.Key
	}
	return s + ": " + f.Detail
}

type ref struct {
	seq uint64
	at  time.Time
	row Row
}

// Chain is the verified digest chain, indexed by row.
type Chain struct {
	// Digests is how many digests verified; Last the highest number seen.
	Digests int
	Last    uint64
	// Findings are the chain's own: digests missing, forged, altered or
	// out of order, gaps they record, and rows whose records were lost
	// between two digests.
	Findings []Finding
	refs     map[string][]ref
	seen     map[string]bool
}

// Load reads every digest in s, checks each signature with v, the
// numbering (1, 2, ... with no hole) and each Prev, and indexes the rows
// the valid ones record. Only a failure to read s is an error; what is
// wrong with the digests is in Findings.
func Load(ctx context.Context, s Store, v Verifier) (*Chain, error) {
	seqs, err := s.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("digest: list: %w", err)
	}
	c := &Chain{refs: map[string][]ref{}, seen: map[string]bool{}}
	fail := func(seq uint64, code, format string, a ...any) {
		c.Findings = append(c.Findings, Finding{Code: code, Kind: FindDigest, Seq: seq, Fail: true, Detail: fmt.Sprintf(format, a...)})
	}
	want := uint64(1)
	prevHash, prevOK := "", true // digest 0 "exists" with hash ""
	for _, seq := range seqs {
		if seq > want {
			if seq-1 == want {
				fail(want, CodeMissing, "missing: the chain has a hole (digest %d exists)", seq)
			} else {
				fail(want, CodeMissing, "missing up to digest %d: the chain has a hole (digest %d exists)", seq-1, seq)
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
		case errors.Is(err, ErrSignature):
			fail(seq, CodeSignature, "signature does not verify under the digest key (forged or altered)")
			prevOK = false
			continue
		case err != nil:
			fail(seq, CodeMalformed, "%v", err)
			prevOK = false
			continue
		case d.Seq != seq:
			fail(seq, CodeMalformed, "stored as digest %d but its body says %d", seq, d.Seq)
			prevOK = false
			continue
		}
		if prevOK && d.Prev != prevHash {
			fail(seq, CodePrev, "its prev hash does not match digest %d (the chain was cut and spliced)", seq-1)
		}
		prevHash, prevOK = Hash(body), true
		c.Digests++
		for _, g := range d.Gaps {
			c.Findings = append(c.Findings, Finding{Code: CodeGap, Kind: FindGap, Seq: seq, Key: g.Key, Fail: true,
				Detail: fmt.Sprintf("the digest records a gap (%s): %s", g.Kind, g.Detail)})
		}
		for _, r := range d.Rows {
			c.refs[r.Key] = append(c.refs[r.Key], ref{seq: seq, at: d.At, row: r})
		}
	}
	if o, ok := s.(Overwrites); ok {
		for _, seq := range seqs {
			if n := o.Overwritten()[seq]; n > 0 {
				fail(seq, CodeOverwritten, "%d later versions were written over it (its first version, the one checked, is the digest)", n)
			}
		}
	}
	c.checkRows()
	return c, nil
}

// checkRows compares each row's successive digests: a retention moved
// earlier, or entries that no digest covered between two of them.
func (c *Chain) checkRows() {
	keys := make([]string, 0, len(c.refs))
	for k := range c.refs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		rs := c.refs[k]
		longest := rs[0].row.RetainUntil
		for i := 1; i < len(rs); i++ {
			if n := rs[i]; n.row.Removed == "" && earlier(n.row.RetainUntil, longest) {
				c.Findings = append(c.Findings, Finding{Code: CodeShortened, Kind: FindRow, Seq: n.seq, Key: k, Fail: true,
					Detail: fmt.Sprintf("the row's retention was moved earlier, to %s, than an earlier digest recorded (%s)", unix(n.row.RetainUntil), unix(longest))})
			}
			longest = latest(longest, rs[i].row.RetainUntil)
			if p, n := rs[i-1], rs[i]; n.row.From != p.row.Count && p.row.Removed == "" {
				c.Findings = append(c.Findings, Finding{Code: CodeLost, Kind: FindGap, Seq: n.seq, Key: k, Fail: true,
					Detail: fmt.Sprintf("digest %d recorded %d entries, this one starts from %d: stream records were never digested", p.seq, p.row.Count, n.row.From)})
			}
		}
	}
}

// Overwrites is a Store that can tell which digests had later versions
// written over them (S3 keeps versions; Object Lock locks each one).
type Overwrites interface {
	// Overwritten returns, after List, how many versions were written
	// after the first of each digest that has any.
	Overwritten() map[uint64]int
}

// Covers reports whether some digest recorded key.
func (c *Chain) Covers(key string) bool { return len(c.refs[key]) > 0 }

// CheckRow checks e against every (count, head) the digests recorded for
// its key: the entry at that count must have that hash (else it was
// rewritten, even with the chain recomputed), and the row must hold at
// least that many entries (else entries were removed). A row with entries
// no digest covers yet is reported pending, with its age at now.
func (c *Chain) CheckRow(e ledger.Entry, now time.Time) []Finding {
	c.seen[e.Key] = true
	var out []Finding
	n := int64(len(e.History))
	var covered int64
	for _, r := range c.refs[e.Key] {
		switch {
		case r.row.Removed != "":
			out = append(out, Finding{Code: CodeReappeared, Kind: FindRow, Seq: r.seq, Key: e.Key, Fail: true,
				Detail: fmt.Sprintf("the digest records the row removed (%s), yet the table holds it", r.row.Removed)})
		case r.row.Count > n:
			out = append(out, Finding{Code: CodeTruncated, Kind: FindRow, Seq: r.seq, Key: e.Key, Fail: true,
				Detail: fmt.Sprintf("the digest recorded %d entries, the table holds %d: entries were removed", r.row.Count, n)})
		case r.row.Count < 1:
			out = append(out, Finding{Code: CodeMalformed, Kind: FindRow, Seq: r.seq, Key: e.Key, Fail: true, Detail: "the digest records an empty history"})
		case e.History[r.row.Count-1].Hash != r.row.Head:
			out = append(out, Finding{Code: CodeRewritten, Kind: FindRow, Seq: r.seq, Key: e.Key, Fail: true,
				Detail: fmt.Sprintf("entry %d does not match the head the digest recorded: the history was rewritten", r.row.Count-1)})
		}
		covered = max(covered, r.row.Count)
	}
	if covered < n {
		age := now.Sub(e.UpdatedAt)
		if !e.Last().At.IsZero() {
			age = now.Sub(e.Last().At)
		}
		out = append(out, Finding{Code: CodePending, Kind: FindPending, Key: e.Key, Age: age,
			Detail: fmt.Sprintf("entries %d to %d not yet digested (last write %s ago)", covered, n-1, age.Truncate(time.Second))})
	}
	return out
}

// Missing reports every row a digest recorded that CheckRow never saw,
// and that should still be in the table at now: one not removed whose
// retention has not ended, or one removed by a DeleteItem before its
// retention ended. A row the TTL removed, or whose retention ended, is not
// a finding. Call it after CheckRow has seen every row of the table.
func (c *Chain) Missing(now time.Time) []Finding {
	var out []Finding
	keys := make([]string, 0, len(c.refs))
	for k := range c.refs {
		if !c.seen[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		rs := c.refs[k]
		last := rs[len(rs)-1]
		// The longest retention any digest recorded, less RetentionSlack: a
		// write that shortened it (to have the TTL remove the row early)
		// does not count.
		longest := int64(-1)
		for _, r := range rs {
			longest = latest(longest, r.row.RetainUntil)
		}
		until := unix(longest)
		kept := func(at time.Time) bool { return longest == 0 || at.Before(time.Unix(longest, 0).Add(-RetentionSlack)) }
		switch {
		case last.row.Removed == RemovedTTL && kept(last.at):
			out = append(out, Finding{Code: CodeDeleted, Kind: FindRow, Seq: last.seq, Key: k, Fail: true,
				Detail: fmt.Sprintf("removed by the TTL before the retention a digest recorded (%s): its TTL was moved earlier", until)})
		case last.row.Removed == RemovedDelete && kept(last.at):
			out = append(out, Finding{Code: CodeDeleted, Kind: FindRow, Seq: last.seq, Key: k, Fail: true,
				Detail: fmt.Sprintf("deleted (DeleteItem) before its retention ended (%s)", until)})
		case last.row.Removed == "" && kept(now):
			out = append(out, Finding{Code: CodeDeleted, Kind: FindRow, Seq: last.seq, Key: k, Fail: true,
				Detail: fmt.Sprintf("missing from the table before its retention ends (%s): deleted", until)})
		}
	}
	return out
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
