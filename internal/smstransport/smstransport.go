// Package smstransport sends reset notifications by SMS through AWS End User
// Messaging SMS (pinpoint-sms-voice-v2 SendTextMessage) and implements
// ledger.Transport.
//
// SendTextMessage has no client token and the service has no API that finds
// a sent message by its Context, so the transport declares no capabilities:
// an unknown outcome is quarantined for an operator decision (docs/design.md,
// "Transports and the reconcile policy"). Every send is TRANSACTIONAL, carries the dedupe key, the
// content hash, the attempt number and the attempt's proof (ledger.Send.Proof, when
// there is one) in its Context map (which the service copies into the events
// it publishes to the configuration set's event destinations) and has a
// TimeToLive equal to the challenge's remaining lifetime, so the service
// stops trying to hand the message off once the reset link is dead. With
// Config.MaxPrice, the service refuses a message that would cost more. With
// Config.ProtectConfigurationID, the send names that protect configuration,
// and the service refuses a message to a country its rules block
// (ConflictException/DESTINATION_COUNTRY_BLOCKED_BY_PROTECT_CONFIGURATION, a
// rejection: the same number stays in the same country).
//
// Outcomes:
//
//	SendTextMessage returned a MessageId            -> ledger.Ack{ID: MessageId}
//	less than Config.MinTimeToLive left (no call)   -> *ledger.Rejection
//	ValidationException, AccessDeniedException,
//	ResourceNotFoundException, ConflictException    -> *ledger.Rejection ("<code>/<reason>: <sanitized text>")
//	ThrottlingException,
//	ServiceQuotaExceededException (a monthly spend
//	limit or a daily quota)                         -> *ledger.NotSent{Code: "<code>[/<reason>]"}
//	anything else (InternalServerException, other codes, 5xx, timeouts,
//	cancelled or expired contexts, network errors, a reply without
//	MessageId)                                      -> error wrapping ErrOutcomeUnknown
//
// <reason> is the exception's Reason enum where it has one
// (DESTINATION_PHONE_NUMBER_OPTED_OUT, MONTHLY_SPEND_LIMIT_REACHED_FOR_TEXT).
// The service documents no retry hint on these errors, and the SDK exposes
// none: its retryer reads only the x-amz-retry-after header (milliseconds),
// and only when it retries, which Send turns off. Send reads that header
// itself, so NotSent.RetryAfter is its value (capped at
// outcome.MaxRetryAfter) if the service ever sends it and 0 otherwise; with
// 0 the ledger falls back to its own backoff.
//
// No error text contains the phone number or the message body.
package smstransport

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2/types"

	"github.com/resetledger/resetledger/internal/outcome"
	"github.com/resetledger/resetledger/internal/sdkhttp"
	"github.com/resetledger/resetledger/pkg/charclass"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Context keys under which every send carries its correlation data.
const (
	ContextIdempotencyKey = "idempotency_key"
	ContextContentHash    = "content_hash"
	ContextAttempt        = "attempt"
	ContextAttemptProof   = "attempt_proof"
)

// TimeToLive bounds of SendTextMessage (the service model's TimeToLive
// shape: an integer number of seconds, 5 to 259200).
const (
	MinTimeToLive = 5 * time.Second
	MaxTimeToLive = 259200 * time.Second
)

// DefaultMinTimeToLive is the default for Config.MinTimeToLive.
const DefaultMinTimeToLive = MinTimeToLive

// ErrOutcomeUnknown is wrapped by every Send error that is neither a
// rejection nor a *ledger.NotSent: the provider may or may not have accepted
// the message.
var ErrOutcomeUnknown = errors.New("smstransport: outcome unknown")

// ErrInvalidConfig is wrapped by Config.Validate errors.
var ErrInvalidConfig = errors.New("smstransport: invalid config")

// Client is the part of the pinpoint-sms-voice-v2 API the transport uses;
// *pinpointsmsvoicev2.Client implements it.
type Client interface {
	SendTextMessage(ctx context.Context, in *pinpointsmsvoicev2.SendTextMessageInput, optFns ...func(*pinpointsmsvoicev2.Options)) (*pinpointsmsvoicev2.SendTextMessageOutput, error)
}

// Config configures the transport. The zero value is usable: the account's
// default origination identity, no configuration set, a 5 s minimum TTL and
// the system clock.
type Config struct {
	// OriginationIdentity is the phone number, sender id or pool (id or ARN)
	// to send from. Optional: empty lets the service choose.
	OriginationIdentity string
	// ConfigurationSetName is the configuration set (name or ARN) whose event
	// destinations receive the message events with their Context. Optional.
	ConfigurationSetName string
	// MaxPrice is the most one text message may cost, in US dollars as a
	// decimal ("0.10"); the service refuses a send that would cost more
	// (a rejection: the same message to the same number costs the same).
	// Optional: empty sets no cap.
	MaxPrice string
	// ProtectConfigurationID is the protect configuration (id or ARN) every
	// send names, so the service applies its country rules to the message
	// whatever the account's default protect configuration is. Optional.
	ProtectConfigurationID string
	// MinTimeToLive is the least remaining challenge lifetime worth sending
	// with; below it Send refuses without calling the service. Default and
	// lower bound 5 s (the API's minimum TimeToLive); at most 259200 s.
	MinTimeToLive time.Duration
	// Now is the clock the remaining lifetime is measured with. Default
	// time.Now.
	Now ledger.Clock
}

func (c Config) withDefaults() Config {
	if c.MinTimeToLive == 0 {
		c.MinTimeToLive = DefaultMinTimeToLive
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first invalid field, after applying defaults. Its
// errors wrap ErrInvalidConfig and never echo the configured values.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.OriginationIdentity != "" && !identityLike(c.OriginationIdentity) {
		return fmt.Errorf("%w: OriginationIdentity must be 1-256 of %s", ErrInvalidConfig, identityChars)
	}
	if c.ConfigurationSetName != "" && !identityLike(c.ConfigurationSetName) {
		return fmt.Errorf("%w: ConfigurationSetName must be 1-256 of %s", ErrInvalidConfig, identityChars)
	}
	if c.ProtectConfigurationID != "" && !identityLike(c.ProtectConfigurationID) {
		return fmt.Errorf("%w: ProtectConfigurationID must be 1-256 of %s", ErrInvalidConfig, identityChars)
	}
	if c.MaxPrice != "" && !maxPrice.MatchString(c.MaxPrice) {
		return fmt.Errorf("%w: MaxPrice must be a decimal amount of US dollars such as 0.10", ErrInvalidConfig)
	}
	if c.MinTimeToLive < MinTimeToLive || c.MinTimeToLive > MaxTimeToLive {
		return fmt.Errorf("%w: MinTimeToLive must be between %s and %s", ErrInvalidConfig, MinTimeToLive, MaxTimeToLive)
	}
	return nil
}

// Transport sends SMS through End User Messaging. It is safe for concurrent
// use.
type Transport struct {
	client Client
	cfg    Config
}

// New returns a transport that sends through client. The client's own retry
// policy is overridden per call: sends are never retried by the SDK.
func New(client Client, cfg Config) (*Transport, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil SMS client", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Transport{client: client, cfg: cfg.withDefaults()}, nil
}

// Capabilities reports that the service honors no idempotency key and offers
// no lookup by Context. With a configuration set, its event destinations
// publish text events that carry the Context (Events): reconcile then waits
// the settle period for one to resolve an unknown outcome, and otherwise it
// needs an operator decision.
func (t *Transport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{Events: t.cfg.ConfigurationSetName != ""}
}

// Send makes at most one SendTextMessage call (the SDK retryer is disabled
// for it). See the package documentation for the outcome mapping.
func (t *Transport) Send(ctx context.Context, s ledger.Send) (ledger.Ack, error) {
	if strings.TrimSpace(s.Message.To) == "" {
		return ledger.Ack{}, &ledger.Rejection{Reason: "smstransport: message has no destination number"}
	}
	ttl, err := t.timeToLive(s.ExpiresAt)
	if err != nil {
		return ledger.Ack{}, err
	}
	in := &pinpointsmsvoicev2.SendTextMessageInput{
		DestinationPhoneNumber: aws.String(s.Message.To),
		MessageBody:            aws.String(s.Message.Body),
		MessageType:            types.MessageTypeTransactional,
		TimeToLive:             aws.Int32(ttl),
		Context: map[string]string{
			ContextIdempotencyKey: s.IdempotencyKey,
			ContextContentHash:    s.ContentHash,
			ContextAttempt:        strconv.Itoa(s.Attempt),
		},
	}
	if s.Proof != "" {
		in.Context[ContextAttemptProof] = s.Proof
	}
	if t.cfg.MaxPrice != "" {
		in.MaxPrice = aws.String(t.cfg.MaxPrice)
	}
	if t.cfg.OriginationIdentity != "" {
		in.OriginationIdentity = aws.String(t.cfg.OriginationIdentity)
	}
	if t.cfg.ConfigurationSetName != "" {
		in.ConfigurationSetName = aws.String(t.cfg.ConfigurationSetName)
	}
	if t.cfg.ProtectConfigurationID != "" {
		in.ProtectConfigurationId = aws.String(t.cfg.ProtectConfigurationID)
	}
	out, err := t.client.SendTextMessage(ctx, in, oneAttempt)
	var id string
	if out != nil {
		id = aws.ToString(out.MessageId)
	}
	return classifier.Ack("SendTextMessage", id, err, s.Message.To, s.Message.Body)
}

// timeToLive returns the whole seconds left until expiresAt, clamped to the
// API's maximum, or a rejection if fewer than MinTimeToLive are left.
func (t *Transport) timeToLive(expiresAt time.Time) (int32, error) {
	left := expiresAt.Sub(t.cfg.Now()).Truncate(time.Second)
	if left < t.cfg.MinTimeToLive {
		return 0, &ledger.Rejection{Reason: fmt.Sprintf(
			"smstransport: challenge expires before minimum TTL (%ds left, minimum %ds)",
			max(int64(left/time.Second), 0), int64(t.cfg.MinTimeToLive/time.Second))}
	}
	return int32(min(left, MaxTimeToLive) / time.Second), nil
}

// oneAttempt makes the call one attempt the ledger recorded, with a request
// body of its own (sdkhttp.OneAttempt).
func oneAttempt(o *pinpointsmsvoicev2.Options) {
	o.Retryer, o.HTTPClient = sdkhttp.OneAttempt(o.HTTPClient)
}

// classifier maps SendTextMessage errors (see the package documentation).
// The rejections definitely refuse this message: bad input or destination
// (ValidationException), permissions or a disabled account
// (AccessDeniedException), a missing origination identity or configuration
// set (ResourceNotFoundException), an opted-out or unverified destination
// (ConflictException, which also carries a destination country or number
// that the protect configuration blocks). Throttling and a spend limit or quota
// (ServiceQuotaExceededException) only say "not now": a later attempt, after
// the rate drops, the day or month turns or the limit is raised, may be
// sent. None of them is sent.
var classifier = outcome.Classifier{
	Unknown: ErrOutcomeUnknown,
	Codes: outcome.Codes{
		"ValidationException":           outcome.Rejected,
		"AccessDeniedException":         outcome.Rejected,
		"ResourceNotFoundException":     outcome.Rejected,
		"ConflictException":             outcome.Rejected,
		"ThrottlingException":           outcome.NotSent,
		"ServiceQuotaExceededException": outcome.NotSent,
	},
	Reason: serviceReason,
}

// serviceReason returns the Reason enum of the typed exceptions that have one.
func serviceReason(err error) string {
	var (
		v *types.ValidationException
		a *types.AccessDeniedException
		c *types.ConflictException
		q *types.ServiceQuotaExceededException
	)
	switch {
	case errors.As(err, &v):
		return string(v.Reason)
	case errors.As(err, &a):
		return string(a.Reason)
	case errors.As(err, &c):
		return string(c.Reason)
	case errors.As(err, &q):
		return string(q.Reason)
	}
	return ""
}

// maxPrice is the text Config.MaxPrice takes: a decimal amount of US dollars
// below 1000 with up to five decimals (settings.Price reads the same).
var maxPrice = regexp.MustCompile(`^[0-9]{1,3}(\.[0-9]{1,5})?$`)

// identityChars is the service's alphabet for origination identities and
// configuration set names or ARNs.
var identityChars = charclass.AlnumPlus("_:/+-")

// identityLike matches the service's pattern for origination identities and
// configuration set names or ARNs: 1-256 of identityChars.
func identityLike(s string) bool { return identityChars.Fits(s, 256) }
