package providerevent

import (
	"fmt"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// sesRecord holds the fields of an SES event publishing record the ledger
// keeps; every other field (recipients, headers, diagnostics) is skipped
// unread.
type sesRecord struct {
	EventType string `json:"eventType"`
	// NotificationType is set instead of eventType by identity feedback
	// notifications, which carry no tags.
	NotificationType string `json:"notificationType"`
	Mail             struct {
		Timestamp string              `json:"timestamp"`
		MessageID string              `json:"messageId"`
		Tags      map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType    string `json:"bounceType"`
		BounceSubType string `json:"bounceSubType"`
		Timestamp     string `json:"timestamp"`
	} `json:"bounce"`
	Complaint *struct {
		FeedbackType string `json:"complaintFeedbackType"`
		Timestamp    string `json:"timestamp"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp string `json:"timestamp"`
	} `json:"delivery"`
	DeliveryDelay *struct {
		DelayType string `json:"delayType"`
		Timestamp string `json:"timestamp"`
	} `json:"deliveryDelay"`
	Reject *struct {
		Reason string `json:"reason"`
	} `json:"reject"`
}

// sesKinds maps the SES event types to entry kinds.
var sesKinds = map[string]ledger.EventKind{
	"Send":              ledger.KindProviderSent,
	"Delivery":          ledger.KindDelivered,
	"Bounce":            ledger.KindBounced,
	"Complaint":         ledger.KindComplained,
	"DeliveryDelay":     ledger.KindDeliveryDelayed,
	"Reject":            ledger.KindProviderRejected,
	"Rendering Failure": ledger.KindProviderRejected,
	"RenderingFailure":  ledger.KindProviderRejected,
}

// sesIgnored are SES event types the ledger does not keep.
var sesIgnored = map[string]bool{"Open": true, "Click": true, "Subscription": true}

func decodeSES(body []byte) (ledger.ProviderEvent, error) {
	var r sesRecord
	if err := strictJSON(body, &r); err != nil {
		return ledger.ProviderEvent{}, err
	}
	typ := r.EventType
	if typ == "" {
		typ = r.NotificationType
	}
	kind, known := sesKinds[typ]
	switch {
	case sesIgnored[typ]:
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SES %s", ErrIgnored, typ)
	case typ == "":
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SES record without an event type", ErrMalformed)
	case !known:
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SES %s", ErrUnsupported, safe(typ))
	}
	tag := func(name string) string {
		if v := r.Mail.Tags[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	k, err := key(tag(sesTagIdempotencyKey))
	if err != nil {
		return ledger.ProviderEvent{}, fmt.Errorf("SES %s: %w", typ, err)
	}
	p := ledger.ProviderEvent{Key: k, Channel: ledger.Email, Kind: kind, Type: typ, MessageID: r.Mail.MessageID}
	p.Attempt, p.Proof = attemptOf(tag(sesTagAttempt), tag(sesTagAttemptProof))
	at := r.Mail.Timestamp
	switch {
	case kind == ledger.KindBounced && r.Bounce != nil:
		p.Detail = safe(r.Bounce.BounceType + "/" + r.Bounce.BounceSubType)
		p.Permanent = r.Bounce.BounceType == "Permanent"
		at = r.Bounce.Timestamp
	case kind == ledger.KindComplained && r.Complaint != nil:
		p.Detail = safe(r.Complaint.FeedbackType)
		at = r.Complaint.Timestamp
	case kind == ledger.KindDelivered && r.Delivery != nil:
		at = r.Delivery.Timestamp
	case kind == ledger.KindDeliveryDelayed && r.DeliveryDelay != nil:
		p.Detail = safe(r.DeliveryDelay.DelayType)
		at = r.DeliveryDelay.Timestamp
	case typ == "Reject" && r.Reject != nil:
		p.Detail = safe(r.Reject.Reason)
	}
	if kind == ledger.KindProviderRejected {
		p.Permanent = true
	}
	if kind == ledger.KindBounced && r.Bounce == nil {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: SES Bounce without its bounce object", ErrMalformed)
	}
	return finish(p, at)
}

// finish sets the event time from the provider's text and checks the event
// as the ledger will.
func finish(p ledger.ProviderEvent, at string) (ledger.ProviderEvent, error) {
	t, ok := parseTime(at)
	if !ok {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: %s event without a readable time", ErrMalformed, p.Channel)
	}
	p.At = t.Truncate(ledger.Precision)
	if err := p.Validate(); err != nil {
		return ledger.ProviderEvent{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return p, nil
}
