// Package redact makes provider text safe to store and log.
//
// Transports copy a provider's error text into rejection reasons, which are
// stored in the ledger and logged. That text may repeat the destination, the
// message body or a token; Text removes what it can recognise and caps the
// length.
package redact

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLen caps the text Text returns, in runes.
const maxLen = 120

// placeholder replaces every removed part.
const placeholder = "[redacted]"

var phoneLike = regexp.MustCompile(`\+?\d[\d\s().-]{5,}\d`)

// Text makes provider text safe to store and log: it removes the known
// secrets (destination, body, ...) and anything that looks like an address,
// a phone number, a URL or a long opaque token, drops control characters and
// caps the length at 120 runes. Secrets shorter than three non-blank
// characters are ignored, so that they do not erase ordinary words.
func Text(text string, secrets ...string) string {
	for _, s := range secrets {
		if len(strings.TrimSpace(s)) >= 3 {
			text = strings.ReplaceAll(text, s, " "+placeholder+" ")
		}
	}
	text = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) || !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, text)
	text = phoneLike.ReplaceAllString(text, " "+placeholder+" ")
	words := strings.Fields(text)
	out := words[:0]
	for _, w := range words {
		if redactWord(w) {
			w = placeholder
		}
		if w == placeholder && len(out) > 0 && out[len(out)-1] == w {
			continue
		}
		out = append(out, w)
	}
	text = strings.Join(out, " ")
	if utf8.RuneCountInString(text) > maxLen {
		r := []rune(text)
		text = string(r[:maxLen-1]) + "…"
	}
	return text
}

// redactWord reports whether w looks like an address, a URL, a long opaque
// token or a number long enough to identify someone.
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
