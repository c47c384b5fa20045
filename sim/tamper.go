package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// An adversary who can write the table (ClassTamper): once a run is over,
// it moves one row's retention (its TTL) earlier in one to three steps of
// 20 h or 12 h, each within the verifier's slack (digest.RetentionSlack,
// 24 h) of the step before it. Each step is an UpdateItem that adds no
// history entry, so it is a stream record the digest function digests,
// like any write. The verifier must name the row (shortened, or a gap when
// the steps fall in one digest's batch) once the steps
// together move it earlier by more than the slack (a verifier that judged
// each step against the one before, not the highest retention recorded,
// would pass them all), and nothing on that row while they do not.

// invTamperNamed is the name of a violation: a tamper beyond the slack that
// the verifier did not name, or one within it that it failed.
const invTamperNamed = "tamper-named"

// tamperSteps are the sizes of the adversary's steps: each within the
// slack.
var tamperSteps = []time.Duration{20 * time.Hour, 12 * time.Hour}

// tamper is what the adversary did to one row.
type tamper struct {
	key   string
	steps int
	step  time.Duration
	// highest is the highest retention any stream image of the row held;
	// final the retention after the last step.
	highest, final time.Time
}

// total is how much earlier the row's retention ends after every step.
func (t tamper) total() time.Duration { return time.Duration(t.steps) * t.step }

// named says whether the verifier must name it: the last step leaves the
// row's retention more than the slack earlier than the highest any of its
// images held, in whole seconds as the digests record it (the workers'
// clocks differ by a second, so that may be more than the steps' sum).
func (t tamper) named() bool {
	return t.final.Unix() < t.highest.Unix()-int64(digest.RetentionSlack/time.Second)
}

// drawTamper draws what the adversary does once the run is over: nothing
// in one run in two, else one of tamperKinds.
func (s *sim) drawTamper() string {
	if !s.on(ClassTamper) || !s.c.coin(1, "tamper") {
		return ""
	}
	return tamperKinds[s.c.pick(len(tamperKinds), "tamper kind")]
}

// tamperTable draws the adversary's steps on one stored row and adds their
// stream records to the run's.
func (s *sim) tamperTable() (tamper, bool) {
	var rows []ledger.Entry
	for _, k := range s.w.keys {
		if e, ok := s.peek(k); ok {
			rows = append(rows, e)
		}
	}
	if len(rows) == 0 {
		return tamper{}, false
	}
	e := rows[s.c.pick(len(rows), "tampered row")]
	t := tamper{key: e.Key, steps: 1 + s.c.pick(3, "tamper steps"), step: tamperSteps[s.c.pick(len(tamperSteps), "tamper step")]}
	s.note(nil, "table tampered", e.Key, fmt.Sprintf("retention moved earlier in %d steps of %s, stream records %d to %d (digests of %d records)",
		t.steps, t.step, len(s.digestRecs)+1, len(s.digestRecs)+t.steps, digestBatch))
	for _, r := range s.digestRecs {
		for _, img := range []*digest.Image{r.Old, r.New} {
			if r.Key == e.Key && img != nil && img.RetainUntil.After(t.highest) {
				t.highest = img.RetainUntil
			}
		}
	}
	prev := e
	for range t.steps {
		next := prev
		next.RetainUntil = prev.RetainUntil.Add(-t.step)
		s.digestRecs = append(s.digestRecs, digest.Record{Shard: "sim", Seq: fmt.Sprintf("%021d", len(s.digestRecs)+1), Key: e.Key,
			Event: digest.Modify, Old: digest.ImageOf(prev), New: digest.ImageOf(next)})
		prev = next
	}
	t.final = prev.RetainUntil
	return t, true
}

// judgeTamper judges the verifier's findings on the tampered row; it
// returns the findings left to judge as an honest run's.
func (s *sim) judgeTamper(t tamper, findings []digest.Finding) []digest.Finding {
	var rest []digest.Finding
	var onRow []string
	shortened := false
	for _, f := range findings {
		if f.Key != t.key {
			rest = append(rest, f)
			continue
		}
		if f.Fail {
			onRow = append(onRow, f.String())
		}
		if (f.Code == digest.CodeShortened || f.Code == digest.CodeGap) && f.Fail {
			// Across digests it is shortened; within one digest's batch,
			// the digest records it as a gap (digest.Collect).
			shortened = true
			continue
		}
		rest = append(rest, f)
	}
	switch {
	case t.named() && !shortened:
		s.fail(invTamperNamed, fmt.Sprintf("an adversary moved row %s's retention %s earlier in %d steps of %s (each within the verifier's slack of %s, together beyond it), and the verifier did not name it (shortened, or a retention gap); its failing findings on the row: %q",
			s.label(t.key), t.total(), t.steps, t.step, digest.RetentionSlack, onRow), t.key)
	case t.named():
		s.stats.Paths[pathTamperNamed]++
	case shortened:
		s.fail(invTamperNamed, fmt.Sprintf("an adversary moved row %s's retention %s earlier, %s below the highest it held, within the verifier's slack of %s, and the verifier failed it: %q",
			s.label(t.key), t.total(), t.highest.Sub(t.final), digest.RetentionSlack, onRow), t.key)
	}
	return rest
}

// The adversary's other tampers, one per tampered run (tamperKinds): a
// row's history entry rewritten in the table, its chain recomputed so the
// row verifies by itself, with no stream record (a write the digest
// function never saw: the stream disabled, or the record filtered); and,
// with the digests, one digest object removed, two swapped, or one whose
// body was rewritten (a row's count changed) under its old signature (the
// adversary holds no signing key). The verifier must name each: the row
// (rewritten) or the digest (missing, malformed, signature), and on a run
// nobody tampered with, nothing (checkDigests).
const (
	tamperRetention = "retention moved earlier in steps"
	tamperRewrite   = "history entry rewritten, no stream record"
	tamperRemove    = "digest object removed"
	tamperSwap      = "two digest objects swapped"
	tamperCount     = "digest body rewritten under its signature"
)

// tamperKinds are what the adversary may do, index 0 first (where
// shrinking goes).
var tamperKinds = []string{tamperRetention, tamperRewrite, tamperRemove, tamperSwap, tamperCount}

// tamperNames are, per kind, the finding codes that name it; rows says the
// finding must name the tampered row, not a digest.
var tamperNames = map[string][]string{
	tamperRewrite: {digest.CodeRewritten},
	tamperRemove:  {digest.CodeMissing},
	tamperSwap:    {digest.CodeMalformed},
	tamperCount:   {digest.CodeSignature},
}

// otherTamper is one of the tampers after tamperRetention.
type otherTamper struct {
	kind string
	key  string // tamperRewrite: the row
	seq  uint64 // the digest removed, rewritten, or the first of the two swapped
	what string
}

// rewriteRow is row e as the adversary leaves it: entry i's reason
// rewritten and every hash from it on recomputed.
func rewriteRow(e ledger.Entry, i int) ledger.Entry {
	h := slices.Clone(e.History)
	h[i].Reason += " (edited)"
	for j := i; j < len(h); j++ {
		if j > 0 {
			h[j].Prev = h[j-1].Hash
		}
		h[j].Hash = ledger.EventHash(e.Key, h[j])
	}
	e.History = h
	return e
}

// tamperDigests draws one of the tampers after tamperRetention, once the
// run's digests are written, and makes it (on the table row, returned as
// rows holds it, or on store).
func (s *sim) tamperDigests(kind string, store *digest.MemStore, rows map[string]ledger.Entry) (otherTamper, bool) {
	ctx := context.Background()
	seqs, _ := store.List(ctx)
	t := otherTamper{kind: kind}
	switch kind {
	case tamperRewrite:
		var keys []string
		for _, k := range s.w.keys {
			if e, ok := rows[k]; ok && len(e.History) > 0 {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return t, false
		}
		t.key = keys[s.c.pick(len(keys), "rewritten row")]
		i := s.c.pick(len(rows[t.key].History), "rewritten entry")
		rows[t.key] = rewriteRow(rows[t.key], i)
		t.what = fmt.Sprintf("row %s's entry %d rewritten, its chain recomputed, no stream record", s.label(t.key), i+1)
	case tamperRemove, tamperCount:
		// Not the newest: a newest digest removed is one not yet written,
		// which only the heartbeat tells (Chain.Missing's stale bound).
		if len(seqs) < 2 {
			return t, false
		}
		t.seq = seqs[s.c.pick(len(seqs)-1, "tampered digest")]
		if kind == tamperRemove {
			store.Delete(t.seq)
			t.what = fmt.Sprintf("digest %d removed", t.seq)
			break
		}
		raw, _ := store.Get(ctx, t.seq)
		store.Replace(t.seq, recount(raw))
		t.what = fmt.Sprintf("digest %d: a row's count changed, the signature kept", t.seq)
	case tamperSwap:
		if len(seqs) < 2 {
			return t, false
		}
		i := s.c.pick(len(seqs)-1, "swapped digests")
		t.seq = seqs[i]
		a, _ := store.Get(ctx, seqs[i])
		b, _ := store.Get(ctx, seqs[i+1])
		store.Replace(seqs[i], b)
		store.Replace(seqs[i+1], a)
		t.what = fmt.Sprintf("digests %d and %d swapped", seqs[i], seqs[i+1])
	}
	s.note(nil, "digests tampered", t.key, t.what)
	return t, true
}

// recount is a stored digest object with its first row's count raised by
// one in the signed body, the signature left as it was.
func recount(raw []byte) []byte {
	var o digest.Object
	if json.Unmarshal(raw, &o) != nil {
		return raw
	}
	var d digest.Digest
	if json.Unmarshal([]byte(o.Body), &d) != nil || len(d.Rows) == 0 {
		o.Body += " "
	} else {
		d.Rows[0].Count++
		body, _ := json.Marshal(d)
		o.Body = string(body)
	}
	out, _ := json.Marshal(o)
	return out
}

// judgeOther judges the verifier's findings on a run with one of the
// tampers after tamperRetention: one finding must name it (its row, or its
// digest); the findings it brings beside are its own. An unnamed tamper is
// a violation.
func (s *sim) judgeOther(t otherTamper, findings []digest.Finding) {
	if s.mutant == VerifyCountsOnly || s.mutant == VerifyNoHoles || s.mutant == VerifySkipsSignature {
		findings = weakened(s.mutant, findings)
	}
	var fails []string
	for _, f := range findings {
		if !f.Fail {
			continue
		}
		fails = append(fails, f.String())
		if !slices.Contains(tamperNames[t.kind], f.Code) {
			continue
		}
		if t.key != "" && f.Key == t.key || t.key == "" && f.Seq == t.seq {
			s.stats.Paths[pathTamperNamed]++
			return
		}
	}
	var keys []string
	if t.key != "" {
		keys = append(keys, t.key)
	}
	s.fail(invTamperNamed, fmt.Sprintf("an adversary tampered (%s), and the verifier did not name it (%v on %s); its failing findings: %q",
		t.what, tamperNames[t.kind], t.named(s), fails), keys...)
}

func (t otherTamper) named(s *sim) string {
	if t.key != "" {
		return "row " + s.label(t.key)
	}
	return fmt.Sprintf("digest %d", t.seq)
}

// weakened is the verifier's findings as a weakened verifier (mutants
// VerifyCountsOnly, VerifyNoHoles, VerifySkipsSignature) would report
// them: without the check the mutant leaves out.
func weakened(m Mutant, findings []digest.Finding) []digest.Finding {
	drop := map[Mutant]string{VerifyCountsOnly: digest.CodeRewritten, VerifyNoHoles: digest.CodeMissing, VerifySkipsSignature: digest.CodeSignature}[m]
	return slices.DeleteFunc(slices.Clone(findings), func(f digest.Finding) bool { return f.Code == drop })
}
