package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	"github.com/resetledger/resetledger/pkg/charclass"
)

// WorkflowKind says how the channels of one challenge relate.
type WorkflowKind string

// Workflow kinds.
const (
	// Single sends on one channel only.
	Single WorkflowKind = "single"
	// Dual deliberately sends on every listed channel: independent claims.
	Dual WorkflowKind = "dual"
	// Fallback sends on the first channel of Order, and on the next only
	// after the active one ended rejected.
	Fallback WorkflowKind = "fallback"
)

// Workflow describes the channel plan of a challenge.
type Workflow struct {
	Kind  WorkflowKind
	Order []Channel // for Fallback: channel order, first is tried first
}

// neighbor returns the channel step places from c in a fallback order
// (-1: the one that must end rejected before c; +1: the one c may open),
// and false if there is none.
func (w Workflow) neighbor(c Channel, step int) (Channel, bool) {
	if w.Kind != Fallback {
		return "", false
	}
	i := slices.Index(w.Order, c)
	if i < 0 || i+step < 0 || i+step >= len(w.Order) {
		return "", false
	}
	return w.Order[i+step], true
}

// Intent is a validated request to notify once on one channel.
type Intent struct {
	Identity
	Workflow       Workflow
	DestinationRef string // opaque reference to the address, never the address
	// SubjectRef is an opaque reference to the account the challenge is
	// for, never an address; "" when the producer gave none. Send limits
	// per subject and supersession of older challenges key on it.
	SubjectRef string
	// IssuedAt is when the account service issued the challenge: the
	// newest challenge of a subject is the one issued last, whatever the
	// expiries say. Zero for an intent of a wire version that does not
	// carry it; the claim then records its own time.
	IssuedAt        time.Time
	ExpiresAt       time.Time
	TemplateID      string
	TemplateVersion string
	PolicyVersion   string
	ContentHash     string // ContentHash of the sealed message
}

// Validate checks the intent and returns a *FieldError naming the first bad field.
func (in Intent) Validate() error {
	if err := in.Identity.Validate(); err != nil {
		return err
	}
	seen := map[Channel]bool{}
	for _, c := range in.Workflow.Order {
		if !c.valid() || seen[c] {
			return FieldErr("workflow.order", "unknown or repeated channel")
		}
		seen[c] = true
	}
	switch in.Workflow.Kind {
	case Single, Dual:
	case Fallback:
		if len(in.Workflow.Order) < 2 || len(in.Workflow.Order) > len(Channels) {
			return FieldErr("workflow.order", "fallback needs 2 distinct channels")
		}
		if !seen[in.Channel] {
			return FieldErr("workflow.order", "does not contain the intent's channel")
		}
	default:
		return FieldErr("workflow.kind", "unknown workflow (want single, dual or fallback)")
	}
	if err := checkOpaque("destination_ref", in.DestinationRef, 256); err != nil {
		return err
	}
	if in.SubjectRef != "" {
		if err := checkOpaque("subject_ref", in.SubjectRef, 256); err != nil {
			return err
		}
	}
	if in.ExpiresAt.IsZero() {
		return FieldErr("expires_at", "missing")
	}
	if !in.IssuedAt.IsZero() && !in.IssuedAt.Before(in.ExpiresAt) {
		return FieldErr("issued_at", "not before expires_at")
	}
	if err := checkOpaque("template_id", in.TemplateID, 64); err != nil {
		return err
	}
	if err := checkOpaque("template_version", in.TemplateVersion, 32); err != nil {
		return err
	}
	if err := checkOpaque("policy_version", in.PolicyVersion, 32); err != nil {
		return err
	}
	if !isHexSHA256(in.ContentHash) {
		return FieldErr("content_hash", "want 64 lowercase hex characters")
	}
	return nil
}

// IsDedupeKey reports whether s has the form of a dedupe key: 64 lowercase
// hex characters (so does a content hash).
func IsDedupeKey(s string) bool { return isHexSHA256(s) }

var lowerHex = charclass.Of("0123456789abcdef")

func isHexSHA256(s string) bool { return len(s) == 64 && lowerHex.All(s) }

// Message is the secret-bearing content of a notification: the real
// destination and the rendered text with the reset link. It exists only in
// memory, inside the dispatch path; the ledger never stores it.
type Message struct {
	To      string `json:"to"`
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body"`
}

// ContentHash binds a rendered message to the template that produced it. It
// is the hex SHA-256 over length-prefixed fields, so no field can bleed into
// the next. The template version takes part here, not in the dedupe key.
func ContentHash(templateID, templateVersion string, m Message) string {
	h := sha256.New()
	for _, f := range []string{"reset-notification-content-v1", templateID, templateVersion, m.To, m.Subject, m.Body} {
		var n [8]byte
		l := uint64(len(f))
		for i := 7; i >= 0; i-- {
			n[i] = byte(l)
			l >>= 8
		}
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return hex.EncodeToString(h.Sum(nil))
}
