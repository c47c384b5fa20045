package bench

import (
	"bytes"
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
