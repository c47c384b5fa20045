package sim

import (
	"fmt"
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

// tamperTable draws the adversary's steps on one stored row and adds their
// stream records to the run's (unless mutant DigestSkipsTTLEdits filters
// them out, as a digest function whose stream filter passes only records
// that add history would).
func (s *sim) tamperTable() (tamper, bool) {
	if !s.on(ClassTamper) || !s.c.coin(1, "tamper") {
		return tamper{}, false
	}
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
		if s.mutant != DigestSkipsTTLEdits {
			s.digestRecs = append(s.digestRecs, digest.Record{Shard: "sim", Seq: fmt.Sprintf("%021d", len(s.digestRecs)+1), Key: e.Key,
				Event: digest.Modify, Old: digest.ImageOf(prev), New: digest.ImageOf(next)})
		}
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
