package ledger

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/resetledger/resetledger/pkg/charclass"
)

// Purpose is why a notification is sent. Only password resets are supported.
type Purpose string

// PurposePasswordReset is the only supported purpose.
const PurposePasswordReset Purpose = "password-reset"

// Channel is the medium a notification travels on.
type Channel string

// Supported channels.
const (
	Email Channel = "email"
	SMS   Channel = "sms"
)

// Channels lists the supported channels.
var Channels = []Channel{Email, SMS}

func (c Channel) valid() bool { return c == Email || c == SMS }

// Identity is the immutable business identity of one logical message.
type Identity struct {
	Purpose     Purpose
	ChallengeID string
	Channel     Channel
}

// Key returns the dedupe key: the hex SHA-256 of
// "<purpose>:<challenge_id>:<channel>". It is also the idempotency key every
// transport attempt carries. Nothing else (SQS message id, template version,
// content) takes part in it.
func (id Identity) Key() string {
	sum := sha256.Sum256([]byte(string(id.Purpose) + ":" + id.ChallengeID + ":" + string(id.Channel)))
	return hex.EncodeToString(sum[:])
}

// Validate checks every field and returns a *FieldError for the first bad one.
func (id Identity) Validate() error {
	if id.Purpose != PurposePasswordReset {
		return FieldErr("purpose", "unknown purpose")
	}
	if err := checkOpaque("challenge_id", id.ChallengeID, 128); err != nil {
		return err
	}
	if !id.Channel.valid() {
		return FieldErr("channel", "unknown channel (want email or sms)")
	}
	return nil
}

// opaqueChars is the alphabet of opaque identifiers. It keeps control
// characters out of logs and keeps raw email addresses (no '@') and phone
// numbers (no '+') out of fields that are meant to be references.
var opaqueChars = charclass.AlnumPlus("._:-")

// checkOpaque validates an opaque identifier: 1..max characters from
// opaqueChars.
func checkOpaque(field, v string, max int) error {
	if v == "" {
		return FieldErr(field, "missing")
	}
	if len(v) > max {
		return FieldErr(field, "too long")
	}
	if !opaqueChars.All(v) {
		return FieldErr(field, "contains a character outside "+opaqueChars.String())
	}
	return nil
}
