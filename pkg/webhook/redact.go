package webhook

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxReason caps the provider text kept in a rejection reason.
const maxReason = 120

var phoneLike = regexp.MustCompile(`\+?\d[\d\s().-]{5,}\d`)

// sanitize makes provider text safe to store and log: it removes the known
// secrets (destination, body, ...) and anything that looks like an address,
// a phone number, a URL or a long opaque token, drops control characters and
// caps the length.
func sanitize(text string, secrets ...string) string {
	for _, s := range secrets {
		if len(strings.TrimSpace(s)) >= 3 {
			text = strings.ReplaceAll(text, s, " [redacted] ")
		}
	}
	text = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, text)
	text = phoneLike.ReplaceAllString(text, " [redacted] ")
	words := strings.Fields(text)
	out := words[:0]
	for _, w := range words {
		if redactWord(w) {
			w = "[redacted]"
		}
		if w == "[redacted]" && len(out) > 0 && out[len(out)-1] == w {
			continue
		}
		out = append(out, w)
	}
	text = strings.Join(out, " ")
	if utf8.RuneCountInString(text) > maxReason {
		r := []rune(text)
		text = string(r[:maxReason-1]) + "…"
	}
	return text
}

func redactWord(w string) bool {
	if strings.ContainsRune(w, '@') || strings.Contains(w, "://") || len(w) > 40 {
		return true
	}
	digits := 0
	for _, r := range w {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return digits >= 6
}
