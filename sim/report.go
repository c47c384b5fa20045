package sim

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// traceStep is one line of a run's schedule: a step (an invocation started
// or resumed at a port call, with its fault), or something that happened
// between steps (a clock jump, a dropped trigger, an invocation's end).
type traceStep struct {
	step   int
	at     time.Time
	inv    *invocation
	what   string
	key    string
	detail string
	fault  string
}

func (s *sim) traceStart(inv *invocation) {
	t := inv.trig
	detail := t.source
	key := t.key
	if t.msg != nil {
		key = t.msg.intent.Key()
		detail = "intent " + t.msg.kind
	}
	if t.tries > 0 {
		detail += fmt.Sprintf(", delivery %d", t.tries+1)
	}
	if inv.skew != 0 {
		detail += ", clock skew " + inv.skew.String()
	}
	s.trace = append(s.trace, traceStep{step: s.step, at: s.now, inv: inv, what: "start", key: key, detail: detail})
}

func (s *sim) traceResume(inv *invocation, c *call, r resumeMsg, slow string) {
	f := r.fault.String()
	if slow != "" {
		f = strings.TrimPrefix(slow+"; "+f, "; ")
		f = strings.TrimSuffix(f, "; ")
	}
	if c.op == opSend && r.fault != crashBefore && r.fault != timedOut {
		if f != "" {
			f += "; "
		}
		f += "provider: " + r.behavior.String()
		if r.behavior == acceptLate {
			f += " in " + r.late.String()
		}
	}
	s.trace = append(s.trace, traceStep{step: s.step, at: s.now, inv: inv, what: c.op.String(), key: c.key, detail: c.detail, fault: f})
}

// note records something that happened between steps (inv may be nil).
func (s *sim) note(inv *invocation, what, key, detail string) {
	s.trace = append(s.trace, traceStep{step: s.step, at: s.now, inv: inv, what: what, key: key, detail: detail})
}

// digest hashes the run's schedule: equal digests, equal runs.
func (s *sim) digest() uint64 {
	h := fnv.New64a()
	var b []byte
	for _, t := range s.trace {
		b = binary.AppendVarint(b[:0], int64(t.step))
		b = binary.AppendVarint(b, t.at.UnixMilli())
		if t.inv != nil {
			b = binary.AppendVarint(b, int64(t.inv.id))
		}
		for _, f := range []string{t.what, t.key, t.detail, t.fault} {
			b = append(b, f...)
			b = append(b, 0)
		}
		h.Write(b)
	}
	return h.Sum64()
}

func (s *sim) formatStep(t traceStep) string {
	who, key := "", ""
	if t.inv != nil {
		who = t.inv.String()
	}
	if t.key != "" {
		key = s.label(t.key)
	}
	detail := t.detail
	if t.what == "returned" {
		detail = summarize(detail)
	}
	step := fmt.Sprintf("#%d", t.step)
	line := fmt.Sprintf("%-6s %-11s %-12s %-18s %-9s %s", step, s.rel(t.at), who, t.what, key, detail)
	line = strings.TrimRight(line, " ")
	if t.fault != "" {
		line += "  [" + t.fault + "]"
	}
	return line
}

// maxScheduleLines bounds the schedule a report prints in full; a longer
// one prints the lines that touch the rows involved, the faults and the
// last lines.
const maxScheduleLines = 160

// report renders a violation: the seed, the world, the schedule and the
// histories of the rows involved.
func (s *sim) report(v *violation, seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "VIOLATION %s (seed %d, %s)\n  %s\n", v.name, seed, s.mutant, v.detail)
	if len(v.also) > 0 {
		fmt.Fprintf(&b, "  the same step also violated: %s\n", strings.Join(v.also, ", "))
	}
	fmt.Fprintf(&b, "  world:\n%s", s.w.describe())
	fmt.Fprintf(&b, "  schedule (%d steps, %d lines; [..] is the injected fault or the provider's answer):\n", s.step, len(s.trace))
	keys := v.keys
	if len(keys) == 0 {
		keys = s.w.keys
	}
	lines := s.trace
	elided := 0
	if len(lines) > maxScheduleLines {
		lines = nil
		for i, t := range s.trace {
			if i >= len(s.trace)-40 || t.fault != "" || t.inv == nil || slices.Contains(keys, t.key) {
				lines = append(lines, t)
			}
		}
		if len(lines) > maxScheduleLines {
			lines = lines[len(lines)-maxScheduleLines:]
		}
		elided = len(s.trace) - len(lines)
	}
	if elided > 0 {
		fmt.Fprintf(&b, "    (%d lines about other rows elided)\n", elided)
	}
	for _, t := range lines {
		fmt.Fprintf(&b, "    %s\n", s.formatStep(t))
	}
	fmt.Fprintf(&b, "  rows involved:\n")
	s.rows(&b, keys)
	return b.String()
}

// fullTrace renders a whole run: the world, every line of the schedule and
// every row's history.
func (s *sim) fullTrace(seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d (%s): %d steps\n  world:\n%s  schedule:\n", seed, s.mutant, s.step, s.w.describe())
	for _, t := range s.trace {
		fmt.Fprintf(&b, "    %s\n", s.formatStep(t))
	}
	fmt.Fprintf(&b, "  rows:\n")
	s.rows(&b, s.w.keys)
	return b.String()
}

// rows renders the rows of keys with their histories and what the
// provider took for them.
func (s *sim) rows(b *strings.Builder, keys []string) {
	for _, k := range keys {
		b.WriteString(s.history(k))
		p := s.providers[s.w.rows[k].channel]
		var recs []string
		for _, r := range p.msgs[k] {
			recs = append(recs, r.ack+" at "+s.rel(r.at))
		}
		if len(recs) == 0 {
			recs = []string{"none"}
		}
		fmt.Fprintf(b, "      provider (%s): messages taken: %s; refusals %d; not-sent answers %d\n",
			p.spec, strings.Join(recs, ", "), p.rejected[k], p.notSent[k])
	}
}

// history renders one row and its history.
func (s *sim) history(key string) string {
	var b strings.Builder
	e, ok := s.peek(key)
	if !ok {
		return fmt.Sprintf("    %s (%s): no row\n", s.label(key), short(key))
	}
	fmt.Fprintf(&b, "    %s (%s): %s, version %d, attempts %d, expires %s", s.label(key), short(key), e.State, e.Version, e.Attempts, s.rel(e.ExpiresAt))
	if e.AckID != "" {
		fmt.Fprintf(&b, ", ack %s", e.AckID)
	}
	b.WriteString("\n")
	for i, ev := range e.History {
		kind := ""
		if ev.Kind != ledger.KindTransition {
			kind = " (" + string(ev.Kind) + ")"
		}
		extra := ""
		if ev.AckID != "" {
			extra += " ack " + ev.AckID
		}
		if ev.Attempt > 0 {
			extra += fmt.Sprintf(" attempt %d", ev.Attempt)
		}
		fmt.Fprintf(&b, "      %2d %-11s %s → %s%s by %s: %s;%s\n", i+1, s.rel(ev.At), ev.From, ev.To, kind, ev.Worker, ev.Reason, extra)
	}
	return b.String()
}

// summarize shortens a handler's JSON log line to what a schedule needs.
func summarize(line string) string {
	var m map[string]any
	if json.Unmarshal([]byte(line), &m) != nil {
		return line
	}
	var out []string
	for _, k := range []string{"outcome", "state", "ack_id", "seen", "actions", "quarantined", "decided", "error", "row_errors"} {
		if v, ok := m[k]; ok && v != "" {
			out = append(out, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(out, " ")
}
