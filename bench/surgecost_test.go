package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// surgeTargets are issue 22's targets for a surge's cost per accepted
// message (make surge: 10,000 intents, R = 10 sends/s per channel), keyed as
// the surge's summary line names the figures.
var surgeTargets = []struct {
	key, name string
	max       float64
	unit      string // "%" for a share of the intents
}{
	{"wcu", "DynamoDB WCU per accepted message", 11, ""},
	{"rcu", "DynamoDB RCU per accepted message", 4, ""},
	{"requests", "DynamoDB requests per accepted message", 8, ""},
	{"redriven", "Re-driven rows", 5, "%"},
}

// surgeSections are the report's surge cost tables, one per run of make
// surge kept in dir: .run/surge-limits-on.out and .run/surge-limits-off.out
// (SURGE_LIMITS=off), or, if neither is there, .run/surge.out.
func surgeSections(dir string) []Section {
	var secs []Section
	for _, run := range []struct{ file, title string }{
		{"surge-limits-on.out", "Surge cost (`make surge`, send limits on, as deployed)"},
		{"surge-limits-off.out", "Surge cost (`SURGE_LIMITS=off make surge`)"},
	} {
		if _, err := os.Stat(filepath.Join(dir, run.file)); err == nil {
			sec := surgeSection(filepath.Join(dir, run.file), filepath.Join(dir, "surge-quiet-"+strings.TrimPrefix(run.file, "surge-")))
			sec.Title = run.title
			secs = append(secs, sec)
		}
	}
	if len(secs) == 0 {
		secs = append(secs, surgeSection(filepath.Join(dir, "surge.out"), ""))
	}
	return secs
}

// surgeSection is the report's surge cost table. make bench does not run
// the surge (make surge takes most of an hour); it takes the figures from
// the summary line of the last make surge in this working tree (the file at
// path), saying so and when that was. If that line does not carry them,
// the section says the figures are missing and what fills them. When the
// file at quietPath holds a make surge-quiet line of the same limits, its
// figures stand beside the burst's, with the burst's as a multiple of them.
func surgeSection(path, quietPath string) Section {
	sec := Section{Title: "Surge cost (`make surge`)"}
	file := "`.run/" + filepath.Base(path) + "`"
	targets := "WCU ≤ 11, RCU ≤ 4, DynamoDB requests ≤ 8, re-driven rows ≤ 5 % of intents"
	line, mod := lastSurgeLine(path)
	fields := surgeFields(line)
	if fields["wcu"] == "" {
		sec.Body = "**Not measured here (placeholder).** Issue 22 asks for a surge's cost per accepted message under `make surge` " +
			"(10,000 intents, R = 10 sends/s per channel): " + targets + ". `make bench` does not run the surge (it takes most of an hour); " +
			"it takes these figures from the `wcu=… rcu=… requests=… redriven=…` of the surge's summary line (`surge: intents=…`) " +
			"in `.run/surge.out`, which `make surge` writes, and found none there. Run `make surge`, then `make bench`, to fill this table; " +
			"until then no figure is claimed here."
		if line != "" {
			sec.Body += fmt.Sprintf("\n\nLast summary line found (%s, %s): `%s`", path, mod.UTC().Format("2006-01-02 15:04 MST"), line)
		}
		return sec
	}
	var b strings.Builder
	fmt.Fprintf(&b, "From the summary line of the last `make surge` in this working tree (%s, written %s), "+
		"not re-run by `make bench`: the figures are those of the code at that time. Targets from issue 22: %s.\n\n",
		file, mod.UTC().Format("2006-01-02 15:04 MST"), targets)
	quietLine, quietMod := lastSurgeLine(quietPath)
	quiet := surgeFields(quietLine)
	if quiet["limits"] != fields["limits"] || quiet["pace"] != "quiet" {
		quiet = nil
	}
	if quiet != nil {
		fmt.Fprintf(&b, "Beside it, the same traffic published at a quiet pace (`make surge-quiet`, `.run/%s`, written %s): "+
			"nothing waits for a slot and nothing expires, which is what a burst is compared with.\n\n",
			filepath.Base(quietPath), quietMod.UTC().Format("2006-01-02 15:04 MST"))
		fmt.Fprintf(&b, "| Figure | Measured | Quiet pace | Burst ÷ quiet | Target | Met? |\n|---|---|---|---|---|---|\n")
	} else {
		fmt.Fprintf(&b, "| Figure | Measured | Target | Met? |\n|---|---|---|---|\n")
	}
	intents, _ := strconv.ParseFloat(fields["intents"], 64)
	for _, tg := range surgeTargets {
		raw := fields[tg.key]
		measured, verdict := raw, NotMeasured
		if raw != "" {
			verdict = NoTarget
			if v, ok := surgeValue(raw, tg.unit, intents); ok {
				verdict = Check(v <= tg.max)
				if tg.unit == "%" && !strings.HasSuffix(raw, "%") {
					measured = fmt.Sprintf("%s of %s (%.1f %%)", raw, fields["intents"], v)
				}
			}
		}
		limit := "≤ " + trimFloat(tg.max) + map[string]string{"%": " % of intents"}[tg.unit]
		if quiet == nil {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", tg.name, cell(measured), limit, verdict)
			continue
		}
		q, ratio := quiet[tg.key], "—"
		if tg.unit == "" {
			burst, okB := surgeValue(raw, "", 0)
			calm, okQ := surgeValue(q, "", 0)
			if okB && okQ && calm > 0 {
				ratio = fmt.Sprintf("×%.2f", burst/calm)
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", tg.name, cell(measured), cell(q), ratio, limit, verdict)
	}
	if quiet != nil && fields["shape"] == "production" {
		b.WriteString(burstBound(fields, quiet))
	}
	fmt.Fprintf(&b, "\nSummary line: `%s`", line)
	if quiet != nil {
		fmt.Fprintf(&b, "\n\nQuiet pace: `%s`", quietLine)
	}
	sec.Body = b.String()
	return sec
}

// lastSurgeLine returns the last "surge: intents=" line of the file at
// path and the file's modification time ("" if there is none).
func lastSurgeLine(path string) (string, time.Time) {
	f, err := os.Open(path)
	if err != nil {
		return "", time.Time{}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", time.Time{}
	}
	var last string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "surge: intents=") {
			last = l
		}
	}
	return last, fi.ModTime()
}

// surgeFields splits a summary line's key=value pairs.
func surgeFields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(strings.TrimPrefix(line, "surge:")) {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

// surgeValue reads a figure; for a share of intents ("%"), a value written
// with % is the share, an integer is a count of rows out of intents.
func surgeValue(raw, unit string, intents float64) (float64, bool) {
	if unit != "%" {
		v, err := strconv.ParseFloat(raw, 64)
		return v, err == nil
	}
	if p, ok := strings.CutSuffix(raw, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		return v, err == nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || intents <= 0 {
		return 0, false
	}
	return 100 * float64(n) / intents, true
}

// burstBound judges issue 44's bound on a production-shaped burst: at most
// 1.15 times the quiet pace, in write units and in requests.
func burstBound(burst, quiet map[string]string) string {
	const bound = 1.15
	var parts []string
	met := true
	for _, k := range []string{"wcu", "requests"} {
		b, okB := surgeValue(burst[k], "", 0)
		q, okQ := surgeValue(quiet[k], "", 0)
		if !okB || !okQ || q <= 0 {
			return ""
		}
		met = met && b/q <= bound
		parts = append(parts, fmt.Sprintf("%s ×%.2f", k, b/q))
	}
	verdict := "met"
	if !met {
		verdict = "**missed**"
	}
	return fmt.Sprintf("\nBoth runs are production-shaped (`shape=production`): issue 44 bounds such a burst at %.2f × the quiet pace, "+
		"in write units and in requests (%s): %s. Issue 22's per-message targets above were set for the small shape; "+
		"the production shape's per-message targets are rows 28 and 29's.\n", bound, strings.Join(parts, ", "), verdict)
}
