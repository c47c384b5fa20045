// Package providerevent decodes the events providers publish about sent
// messages into ledger.ProviderEvent: Amazon SES event publishing records
// (configuration set event destinations) and AWS End User Messaging SMS text
// message events, as they arrive from the provider-events queue: raw, or
// wrapped in an SNS notification envelope.
//
// What the ledger keeps is decided here, at the boundary, by the fields the
// decoder reads: the correlation key the send carried (the SES message tag
// sestransport.TagIdempotencyKey, the SMS context key
// smstransport.ContextIdempotencyKey), the event type, a short detail (bounce
// type and subtype, complaint feedback type, delay type, reject reason,
// carrier status), the provider's message id and the event time. Recipient
// addresses, phone numbers, headers, diagnostic codes and SMTP responses are
// never read, so they can reach no row, log or error.
//
// Event types and the entry kinds they become:
//
//	SES Send                           provider_sent
//	SES Delivery                       delivered
//	SES Bounce                         bounced (permanent if the bounce type is Permanent)
//	SES Complaint                      complained
//	SES DeliveryDelay                  delivery_delayed
//	SES Reject, Rendering Failure      provider_rejected (permanent)
//	SMS TEXT_PENDING, TEXT_QUEUED,
//	    TEXT_SUCCESSFUL, TEXT_UNKNOWN  provider_sent
//	SMS TEXT_DELIVERED                 delivered
//	SMS TEXT_BLOCKED, TEXT_SPAM, TEXT_INVALID, ... (the failure statuses)
//	                                   delivery_failed (permanent if isFinal)
//
// SES Open, Click and Subscription events and SMS events of other media
// (voice, MMS) are ErrIgnored: valid, but not evidence this system keeps.
package providerevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Errors of Decode. Each names why an event is not recorded; none quotes
// the event.
var (
	// ErrMalformed: not an event this decoder can read (bad JSON, a missing
	// message id or time). It may be ours: keep it (dead-letter).
	ErrMalformed = errors.New("providerevent: malformed event")
	// ErrUnsupported: a provider event of a type this decoder does not
	// know (a type added after it was written). Keep it (dead-letter).
	ErrUnsupported = errors.New("providerevent: unsupported event type")
	// ErrNotOurs: a well-formed event that carries no dedupe key: a message
	// some other sender sent through the same configuration set.
	ErrNotOurs = errors.New("providerevent: event carries no dedupe key")
	// ErrIgnored: a well-formed event of a type the ledger does not keep
	// (opens, clicks, subscriptions, voice and MMS events).
	ErrIgnored = errors.New("providerevent: event type not kept")
)

// The names under which each send carries its correlation data to the
// provider, which copies them into its events: sestransport's message tags
// (TagIdempotencyKey, TagAttempt, TagAttemptProof) and smstransport's
// context keys (ContextIdempotencyKey, ContextAttempt, ContextAttemptProof).
// They are restated here rather than imported, so the events function, which
// decodes events and sends nothing, does not link the SES and SMS clients;
// TestCorrelationNames pins them to the transports'.
const (
	sesTagIdempotencyKey = "idempotency_key"
	sesTagAttempt        = "attempt"
	sesTagAttemptProof   = "attempt_proof"

	smsContextIdempotencyKey = "idempotency_key"
	smsContextAttempt        = "attempt"
	smsContextAttemptProof   = "attempt_proof"
)

// MaxBody bounds what Decode reads: an SQS message is at most 1 MiB.
const MaxBody = 1 << 20

// Decode reads one provider event from a queue message body. Every error
// wraps one of the errors above (FuzzDecode holds it to that).
func Decode(body []byte) (ledger.ProviderEvent, error) {
	if len(body) > MaxBody {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: body over %d bytes", ErrMalformed, MaxBody)
	}
	body, err := unwrapSNS(body)
	if err != nil {
		return ledger.ProviderEvent{}, err
	}
	var probe struct {
		EventType        string          `json:"eventType"`
		NotificationType string          `json:"notificationType"`
		Mail             json.RawMessage `json:"mail"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	switch {
	case probe.Mail != nil:
		return decodeSES(body)
	case strings.HasPrefix(probe.EventType, "TEXT_"):
		return decodeSMS(body)
	case strings.HasPrefix(probe.EventType, "VOICE_"), strings.HasPrefix(probe.EventType, "MEDIA_"):
		return ledger.ProviderEvent{}, fmt.Errorf("%w: %s", ErrIgnored, safe(probe.EventType))
	}
	return ledger.ProviderEvent{}, fmt.Errorf("%w: neither an SES nor an SMS event", ErrMalformed)
}

// unwrapSNS returns the message of an SNS notification envelope, or body
// itself if it is not one (a subscription with raw message delivery).
func unwrapSNS(body []byte) ([]byte, error) {
	var env struct {
		Type     string  `json:"Type"`
		TopicArn string  `json:"TopicArn"`
		Message  *string `json:"Message"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if env.TopicArn == "" || env.Message == nil {
		return body, nil
	}
	if env.Type != "Notification" {
		return nil, fmt.Errorf("%w: SNS message of type %s, not a notification", ErrMalformed, safe(env.Type))
	}
	return []byte(*env.Message), nil
}

// parseTime reads an RFC 3339 time (SES) as UTC.
func parseTime(v string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, v)
	return t.UTC(), err == nil && !t.IsZero()
}

// safe returns v if it is a short token of letters, digits, spaces and
// "/-_.:", the shape of provider types, codes and statuses; otherwise
// "(withheld)". Provider detail text is not free text in the ledger: this
// keeps any address, number or control character out of it, whatever a
// provider puts there.
func safe(v string) string {
	if len(v) > 64 {
		return "(withheld)"
	}
	digits := 0
	for _, r := range v {
		switch {
		case r >= '0' && r <= '9':
			if digits++; digits >= 5 {
				return "(withheld)"
			}
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', strings.ContainsRune(" /-_.:", r):
			digits = 0
		default:
			return "(withheld)"
		}
	}
	return v
}

// strictJSON decodes body into v, refusing trailing data.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %s", ErrMalformed, "fields of the wrong type")
	}
	if dec.More() {
		return fmt.Errorf("%w: trailing data", ErrMalformed)
	}
	return nil
}

// maxProof bounds the attempt proof read from an event; a proof is 43
// characters, and anything longer is no proof.
const maxProof = 128

// attemptOf reads the attempt number and attempt proof a send carried. It
// refuses nothing: an event with neither is decoded, and the ledger refuses
// it as unproven (ledger.ErrUnproven), which is what it is.
func attemptOf(attempt, proof string) (int, string) {
	n, err := strconv.Atoi(attempt)
	if err != nil || n < 1 || n > 1000 {
		n = 0
	}
	if len(proof) > maxProof {
		proof = ""
	}
	return n, proof
}

// key reads the dedupe key from a tag or context value.
func key(v string) (string, error) {
	if v == "" {
		return "", ErrNotOurs
	}
	if !ledger.IsDedupeKey(v) {
		return "", fmt.Errorf("%w: the dedupe key is not 64 hex digits", ErrMalformed)
	}
	return v, nil
}
