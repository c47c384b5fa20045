package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportMarkdown(t *testing.T) {
	r := Report{Command: "make bench", Environment: []string{"linux/amd64"}}
	r.Add(Figure{Name: "Requests per message", Measured: "8", Target: "≤ 5", Verdict: Check(8 <= 5), Note: "Get|Put"})
	r.Add(Figure{Name: "Size", Measured: "9 MiB", Target: "≤ 12 MiB", Verdict: Check(true)})
	var b bytes.Buffer
	r.WriteMarkdown(&b)
	md := b.String()
	for _, want := range []string{
		"```sh\nmake bench\n```",
		"| 1 | Requests per message | 8 | ≤ 5 | **no** |",
		"| 2 | Size | 9 MiB | ≤ 12 MiB | yes |",
		"1. **Requests per message.** Get|Put",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "2. **Size.**") {
		t.Errorf("a figure without a note got a note line:\n%s", md)
	}
	b.Reset()
	r.WriteText(&b)
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "met: no") {
		t.Errorf("text report = %q", b.String())
	}
}

func TestSurgeSection(t *testing.T) {
	dir := t.TempDir()
	write := fileWriter(t, dir)
	// No file, and a summary line without the cost figures: a marked
	// placeholder that claims no figure.
	for _, path := range []string{dir + "/absent", write("old.out", "=== RUN TestSurge\nsurge: intents=10000 accepted=9990 rate_ratio=1.010 drain_ratio=1.100\n")} {
		s := surgeSection(path, "")
		if !strings.Contains(s.Body, "Not measured here (placeholder)") || strings.Contains(s.Body, "| yes |") || strings.Contains(s.Body, "**no**") {
			t.Errorf("%s: section = %q", path, s.Body)
		}
	}
	// The last line with the figures fills the table against the targets.
	s := surgeSection(write("new.out", "surge: intents=10 wcu=99\nsurge: intents=10000 accepted=10000 expired_not_sent=0 quarantined=0 unknown=0 duplicates=0 rate_ratio=1.010 drain_ratio=1.100 wcu=10.50 rcu=4.20 requests=7.90 redriven=600\n"), "")
	sectionHas(t, s,
		"| DynamoDB WCU per accepted message | 10.50 | ≤ 11 | yes |",
		"| DynamoDB RCU per accepted message | 4.20 | ≤ 4 | **no** |",
		"| DynamoDB requests per accepted message | 7.90 | ≤ 8 | yes |",
		"| Re-driven rows | 600 of 10000 (6.0 %) | ≤ 5 % of intents | **no** |",
		"redriven=600`",
	)
}

// TestSurgeSectionBesideQuiet: a quiet-pace run of the same limits stands
// beside the burst, with the burst as a multiple of it; one of other
// limits, or a burst's line, does not.
func TestSurgeSectionBesideQuiet(t *testing.T) {
	dir := t.TempDir()
	write := fileWriter(t, dir)
	burst := write("burst.out", "surge: intents=10000 accepted=9000 wcu=13.00 rcu=1.20 requests=8.00 redriven=0 limits=on pace=burst\n")
	s := surgeSection(burst, write("quiet.out", "surge: intents=2000 accepted=2000 wcu=12.50 rcu=0.60 requests=8.00 redriven=0 limits=on pace=quiet\n"))
	sectionHas(t, s,
		"| DynamoDB WCU per accepted message | 13.00 | 12.50 | ×1.04 | ≤ 11 | **no** |",
		"| DynamoDB RCU per accepted message | 1.20 | 0.60 | ×2.00 | ≤ 4 | yes |",
		"| Re-driven rows | 0 of 10000 (0.0 %) | 0 | — | ≤ 5 % of intents | yes |",
		"Quiet pace: `surge: intents=2000",
	)
	for _, other := range []string{
		"surge: intents=2000 accepted=2000 wcu=12.50 limits=off pace=quiet\n",
		"surge: intents=2000 accepted=2000 wcu=12.50 limits=on pace=burst\n",
	} {
		if s := surgeSection(burst, write("other.out", other)); strings.Contains(s.Body, "Quiet pace") {
			t.Errorf("%q set beside a limits=on burst:\n%s", other, s.Body)
		}
	}
}

func TestUnmeasured(t *testing.T) {
	r := Report{}
	r.Add(Figure{Name: "a", Measured: "1", Verdict: Met})
	r.Add(Figure{Name: "b", Verdict: NotMeasured})
	r.Add(Figure{Name: "c", Measured: " ", Verdict: NoTarget})
	var names []string
	for _, f := range r.Unmeasured() {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "b,c" {
		t.Errorf("Unmeasured = %v, want b, c", names)
	}
}

// TestSurgeSections: one table per kept run of make surge, limits on and
// off; without either, the one from .run/surge.out (here a placeholder).
func TestSurgeSections(t *testing.T) {
	dir := t.TempDir()
	if secs := surgeSections(dir); len(secs) != 1 || !strings.Contains(secs[0].Body, "placeholder") {
		t.Fatalf("no runs kept: %+v", secs)
	}
	line := "surge: intents=10000 accepted=10000 wcu=10.50 rcu=4.20 requests=7.90 redriven=600\n"
	for _, f := range []string{"surge-limits-on.out", "surge-limits-off.out"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secs := surgeSections(dir)
	if len(secs) != 2 || !strings.Contains(secs[0].Title, "limits on") || !strings.Contains(secs[1].Title, "SURGE_LIMITS=off") ||
		!strings.Contains(secs[1].Body, "`.run/surge-limits-off.out`") {
		t.Fatalf("two runs kept: %+v", secs)
	}
}

// fileWriter returns a function that writes text to the file name in dir
// and returns its path.
func fileWriter(t *testing.T, dir string) func(name, text string) string {
	return func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// sectionHas fails t for each of wants the section's body lacks.
func sectionHas(t *testing.T, s Section, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(s.Body, want) {
			t.Errorf("section lacks %q:\n%s", want, s.Body)
		}
	}
}
