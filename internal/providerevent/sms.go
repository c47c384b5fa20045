package providerevent

import (
	"fmt"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// smsRecord holds the fields of an End User Messaging SMS text event the
// ledger keeps; the phone numbers, prices and carrier ids are skipped
// unread.
type smsRecord struct {
	EventType      string            `json:"eventType"`
	EventTimestamp int64             `json:"eventTimestamp"` // Unix milliseconds
	IsFinal        bool              `json:"isFinal"`
	MessageID      string            `json:"messageId"`
	MessageStatus  string            `json:"messageStatus"`
	Context        map[string]string `json:"context"`
}

// smsKinds maps the text event types to entry kinds. The failure statuses
// become delivery_failed; with isFinal they are permanent.
var smsKinds = map[string]ledger.EventKind{
	"TEXT_PENDING":             ledger.KindProviderSent,
	"TEXT_QUEUED":              ledger.KindProviderSent,
	"TEXT_SUCCESSFUL":          ledger.KindProviderSent,
	"TEXT_UNKNOWN":             ledger.KindProviderSent, // accepted; the carrier never reported a final status
	"TEXT_DELIVERED":           ledger.KindDelivered,
	"TEXT_BLOCKED":             ledger.KindDeliveryFailed,
	"TEXT_CARRIER_BLOCKED":     ledger.KindDeliveryFailed,
	"TEXT_CARRIER_UNREACHABLE": ledger.KindDeliveryFailed,
	"TEXT_INVALID":             ledger.KindDeliveryFailed,
	"TEXT_INVALID_MESSAGE":     ledger.KindDeliveryFailed,
	"TEXT_SPAM":                ledger.KindDeliveryFailed,
	"TEXT_TTL_EXPIRED":         ledger.KindDeliveryFailed,
	"TEXT_UNREACHABLE":         ledger.KindDeliveryFailed,
	"TEXT_PROTECT_BLOCKED":     ledger.KindDeliveryFailed,
}

func decodeSMS(body []byte) (ledger.ProviderEvent, error) {
	var r smsRecord
	if err := strictJSON(body, &r); err != nil {
		return ledger.ProviderEvent{}, err
	}
	kind, known := smsKinds[r.EventType]
	if !known {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SMS %s", ErrUnsupported, safe(r.EventType))
	}
	k, err := key(r.Context[smsContextIdempotencyKey])
	if err != nil {
		return ledger.ProviderEvent{}, fmt.Errorf("SMS %s: %w", r.EventType, err)
	}
	p := ledger.ProviderEvent{
		Key: k, Channel: ledger.SMS, Kind: kind, Type: r.EventType, Detail: safe(r.MessageStatus), MessageID: r.MessageID,
		Permanent: kind == ledger.KindDeliveryFailed && r.IsFinal,
	}
	p.Attempt, p.Proof = attemptOf(r.Context[smsContextAttempt], r.Context[smsContextAttemptProof])
	if r.EventTimestamp <= 0 {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SMS event without a readable time", ErrMalformed)
	}
	return finish(p, time.UnixMilli(r.EventTimestamp).UTC().Format(time.RFC3339Nano))
}
