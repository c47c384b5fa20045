// Package providereventtest builds provider events in the providers'
// documented record formats, for tests that publish them the way SES and End
// User Messaging SMS would: with the recipient's address or phone number,
// headers and diagnostics in them, which the ledger must never keep.
package providereventtest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/internal/smstransport"
)

// Recipient and Phone are the personal data every built event carries.
const (
	Recipient = "player.events@example.com"
	Phone     = "+14255550199"
)

// Carried is what a send carried to the provider, which the provider copies
// into every event about the message: the dedupe key, the attempt number
// and the attempt's proof (ledger.Send.Proof).
type Carried struct {
	Key     string
	Attempt int
	Proof   string
}

// Unproven is what a send that carried key and no proof would have carried:
// what anyone can put in an event.
func Unproven(key string) Carried { return Carried{Key: key, Attempt: 1} }

// SES returns an SES event publishing record of eventType ("Send",
// "Delivery", "Bounce", "Complaint", "DeliveryDelay", "Reject") for the
// message messageID whose send carried c, at at. A Bounce is bounceType
// ("Permanent", "Transient") with subtype "General".
func SES(eventType string, c Carried, messageID string, at time.Time, bounceType string) []byte {
	ts := at.UTC().Format("2006-01-02T15:04:05.000Z")
	tags := map[string][]string{
		"ses:configuration-set": {"resetledger-events"}, sestransport.TagIdempotencyKey: {c.Key},
		sestransport.TagAttempt: {strconv.Itoa(c.Attempt)},
	}
	if c.Proof != "" {
		tags[sestransport.TagAttemptProof] = []string{c.Proof}
	}
	rec := map[string]any{
		"eventType": eventType,
		"mail": map[string]any{
			"timestamp": ts, "source": "Reset <no-reply@game.example>", "sendingAccountId": "000000000000",
			"messageId": messageID, "destination": []string{Recipient}, "headersTruncated": false,
			"headers":       []map[string]string{{"name": "To", "value": Recipient}, {"name": "Subject", "value": "Reset your password"}},
			"commonHeaders": map[string]any{"to": []string{Recipient}, "subject": "Reset your password"},
			"tags":          tags,
		},
	}
	switch eventType {
	case "Send":
		rec["send"] = map[string]any{}
	case "Delivery":
		rec["delivery"] = map[string]any{"timestamp": ts, "recipients": []string{Recipient}, "smtpResponse": "250 2.6.0 Message received"}
	case "Bounce":
		rec["bounce"] = map[string]any{
			"bounceType": bounceType, "bounceSubType": "General", "timestamp": ts, "feedbackId": messageID + "-bounce",
			"bouncedRecipients": []map[string]string{{"emailAddress": Recipient, "status": "5.1.1", "diagnosticCode": "smtp; 550 5.1.1 " + Recipient + " unknown"}},
		}
	case "Complaint":
		rec["complaint"] = map[string]any{
			"timestamp": ts, "complaintFeedbackType": "abuse", "feedbackId": messageID + "-complaint",
			"complainedRecipients": []map[string]string{{"emailAddress": Recipient}},
		}
	case "DeliveryDelay":
		rec["deliveryDelay"] = map[string]any{"timestamp": ts, "delayType": "MailboxFull", "delayedRecipients": []map[string]string{{"emailAddress": Recipient}}}
	case "Reject":
		rec["reject"] = map[string]any{"reason": "Bad content"}
	}
	b, _ := json.Marshal(rec)
	return b
}

// SMS returns an End User Messaging SMS text event of eventType
// ("TEXT_DELIVERED", "TEXT_BLOCKED", ...) with status messageStatus for the
// message messageID whose send carried c in its Context.
func SMS(eventType, messageStatus string, c Carried, messageID string, at time.Time, final bool) []byte {
	context := map[string]string{smstransport.ContextIdempotencyKey: c.Key, smstransport.ContextAttempt: strconv.Itoa(c.Attempt)}
	if c.Proof != "" {
		context[smstransport.ContextAttemptProof] = c.Proof
	}
	b, _ := json.Marshal(map[string]any{
		"eventType": eventType, "eventVersion": "1.0", "eventTimestamp": at.UnixMilli(), "isFinal": final,
		"originationPhoneNumber": "+12065550100", "destinationPhoneNumber": Phone, "isoCountryCode": "US",
		"messageId": messageID, "messageRequestTimestamp": at.UnixMilli() - 300, "messageType": "TRANSACTIONAL",
		"messageStatus": messageStatus, "messageStatusDescription": "Message for " + Phone,
		"context": context,
	})
	return b
}
