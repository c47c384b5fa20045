package shapes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestLengths: each shape is at the length production gives it, and the
// intents it makes are valid.
func TestLengths(t *testing.T) {
	if !strings.Contains(shapes.ResetEmailHTML, shapes.ResetURLPlaceholder) {
		t.Fatalf("the HTML reset email has no %s", shapes.ResetURLPlaceholder)
	}
	email, sms := shapes.Email(7), shapes.SMS(7, "+12015550123")
	if n := len(email.Body); n < 8000 || n > 8500 || strings.Contains(email.Body, shapes.ResetURLPlaceholder) {
		t.Errorf("email body %d B (want about 8 KB, the link in place)", n)
	}
	if n := len(sms.Body); n != shapes.SMSLength {
		t.Errorf("SMS body %d characters, want %d", n, shapes.SMSLength)
	}
	for name, f := range map[string]struct{ got, want int }{
		"UUID":           {len(shapes.UUID("x", 1)), 36},
		"Ref64":          {len(shapes.Ref64("x", 1)), 64},
		"SES message id": {len(shapes.SESMessageID(1)), 60},
	} {
		if f.got != f.want {
			t.Errorf("%s: %d characters, want %d", name, f.got, f.want)
		}
	}
	now := time.Now()
	for ch, m := range map[ledger.Channel]ledger.Message{ledger.Email: email, ledger.SMS: sms} {
		in := shapes.Intent("challenge", 7, ch, m, now)
		if err := in.Validate(); err != nil {
			t.Errorf("%s intent: %v", ch, err)
		}
		if shapes.Intent("challenge", 8, ch, m, now).Key() == in.Key() {
			t.Errorf("%s: two challenges with one key", ch)
		}
	}
}
