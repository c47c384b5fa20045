// Package shapes makes messages and intents at the lengths production gives
// them: the 8 KB HTML reset email, the 160-character SMS, UUID challenge
// ids, 64-character references and provider message ids at their real
// lengths. make bench's production-shape figures and the surge send them.
package shapes

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// ResetEmailHTML is the HTML reset email, with ResetURLPlaceholder where
// the link goes.
//
//go:embed reset-email.html
var ResetEmailHTML string

const (
	// ResetURLPlaceholder is where ResetEmailHTML's link goes.
	ResetURLPlaceholder = "{{RESET_URL}}"
	// SMSLength is the SMS body's length: one GSM-7 segment.
	SMSLength = 160
	// EmailTemplate and SMSTemplate are the intents' template ids, and
	// TemplateVersion their version.
	EmailTemplate   = "password-reset-html"
	SMSTemplate     = "password-reset-sms"
	TemplateVersion = "2026-11-18.3"
)

// UUID is a version-4-shaped UUID derived from label and i: 36 characters,
// as AWS and the account service spell them.
func UUID(label string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", label, i)))
	h[6] = h[6]&0x0f | 0x40
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// Ref64 is a 64-character opaque reference (a hex HMAC, as an account
// service derives subject_ref and destination_ref).
func Ref64(label string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", label, i)))
	return hex.EncodeToString(h[:])
}

// ResetToken is the link's secret: 32 random-looking bytes, base64url.
func ResetToken(i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("token-%d", i)))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// SESMessageID is an SES message id at its real length (60 characters):
// 0100 and 12 hex digits of time, a UUID, and the -000000 suffix.
func SESMessageID(i int) string {
	return fmt.Sprintf("0100018c%08x-%s-000000", 0x3f2a1b00+i, UUID("ses", i))
}

// Email is the HTML reset email i, to its own address.
func Email(i int) ledger.Message {
	link := fmt.Sprintf("https://account.starfall.example/reset-password?token=%s&challenge=%s", ResetToken(i), UUID("challenge", i))
	return ledger.Message{
		To:      fmt.Sprintf("alexandra.marchetti-%04d@mail.example.com", i),
		Subject: "Reset your Starfall Online password",
		Body:    strings.ReplaceAll(ResetEmailHTML, ResetURLPlaceholder, link),
	}
}

// SMS is the 160-character reset SMS i, to number to.
func SMS(i int, to string) ledger.Message {
	return ledger.Message{To: to, Body: smsBody(ResetToken(i)[:26])}
}

func smsBody(token string) string {
	return fmt.Sprintf("Starfall Online: reset your password at https://sfo.example/r/%s within 10 min. "+
		"Not you? Ignore this text, your password stays the same.", token)
}

// Dictionary is the preset DEFLATE dictionary of these templates
// (docs/intent-v2.md §1.5): the canonical plaintexts of the SMS and the
// email, each rendered with an empty address and link. The stack holds it
// (internal/dictionaries); with it an email seals to about 250 bytes.
func Dictionary() []byte {
	email := ledger.Message{Subject: "Reset your Starfall Online password",
		Body: strings.ReplaceAll(ResetEmailHTML, ResetURLPlaceholder, "https://account.starfall.example/reset-password?token=&challenge=")}
	var d []byte
	for _, m := range []ledger.Message{{Body: smsBody("")}, email} {
		pt, err := json.Marshal(m) // envelope.Plaintext's form; valid UTF-8
		if err != nil {
			panic(err)
		}
		d = append(d, pt...)
	}
	return d
}

// Intent is message m on channel ch as the account service issues it: a
// UUID challenge (label and i), 64-character subject_ref and
// destination_ref, a ten-minute lifetime from now.
func Intent(label string, i int, ch ledger.Channel, m ledger.Message, now time.Time) ledger.Intent {
	template := EmailTemplate
	if ch == ledger.SMS {
		template = SMSTemplate
	}
	in := ledger.Intent{
		Identity:        ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: UUID(label, i), Channel: ch},
		Workflow:        ledger.Workflow{Kind: ledger.Single},
		DestinationRef:  Ref64("destination-"+string(ch), i),
		SubjectRef:      Ref64("subject", i),
		IssuedAt:        now,
		ExpiresAt:       now.Add(10 * time.Minute),
		TemplateID:      template,
		TemplateVersion: TemplateVersion,
		PolicyVersion:   ledger.DefaultPolicy().Version,
	}
	in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	return in
}
