package redact

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain reason", "plain reason"},
		{"mail to a.b@example.com failed", "mail to [redacted] failed"},
		{"call +1 (415) 555-0123 now", "call [redacted] now"},
		{"see https://x.example/r?t=abc", "see [redacted]"},
		{"tok " + strings.Repeat("a", 50), "tok [redacted]"},
		{"ctl\x00\x1b\r\nchars", "ctl chars"},
		{strings.Repeat("x ", 200), strings.TrimSpace(strings.Repeat("x ", 60))[:maxLen-1] + "…"},
		{"", ""},
		{"a@b.c https://x.example 1234567 end", "[redacted] end"},
		{"order 12345 kept, 123456 not", "order 12345 kept, [redacted] not"},
		{"word " + strings.Repeat("b", 40) + " kept", "word " + strings.Repeat("b", 40) + " kept"},
		{"bad utf8 \xff\xfe here", "bad utf8 here"},
	}
	for _, tt := range tests {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTextSecrets(t *testing.T) {
	if got := Text("secret=hunter2-pass ok", "hunter2-pass"); strings.Contains(got, "hunter2") {
		t.Errorf("Text kept a listed secret: %q", got)
	}
	tests := []struct {
		name    string
		in      string
		secrets []string
		want    string
	}{
		{"secret inside a word", "body was Reset now", []string{"Reset now"}, "body was [redacted]"},
		{"several secrets", "to Alice said Hello there", []string{"Alice", "Hello there"}, "to [redacted] said [redacted]"},
		{"short secret ignored", "an ox ran", []string{"ox"}, "an ox ran"},
		{"blank secret ignored", "a   b", []string{"   "}, "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in, tt.secrets...); got != tt.want {
				t.Errorf("Text(%q, %q) = %q, want %q", tt.in, tt.secrets, got, tt.want)
			}
		})
	}
}

func TestTextLength(t *testing.T) {
	got := Text(strings.Repeat("é ", 150))
	if n := len([]rune(got)); n != maxLen {
		t.Fatalf("Text of 300 runes kept %d runes, want %d", n, maxLen)
	}
	if !strings.HasSuffix(got, "…") {
		t.Fatalf("truncated text %q does not end with an ellipsis", got)
	}
	exact := strings.Repeat("y ", maxLen/2-1) + "yy"
	if got := Text(exact); got != exact {
		t.Fatalf("text of exactly %d runes was changed to %q", maxLen, got)
	}
}
