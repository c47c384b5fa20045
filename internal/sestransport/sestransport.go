// Package sestransport sends reset notifications by email through Amazon SES
// v2 (SendEmail) and implements ledger.Transport.
//
// SES has no idempotency token and no API to look a sent message up, so the
// transport declares no capabilities: an unknown outcome is quarantined for
// an operator decision (docs/design.md, "Transports and the reconcile policy"). For correlation every send
// carries the dedupe key, the content hash and the attempt number as SES
// message tags (EmailTags), which SES copies into the events it publishes to
// the configuration set's event destinations; that is where an operator finds
// evidence for a decision.
//
// Outcomes:
//
//	SendEmail returned a MessageId                -> ledger.Ack{ID: MessageId}
//	MessageRejected, MailFromDomainNotVerifiedException,
//	AccountSuspendedException, BadRequestException,
//	NotFoundException                             -> *ledger.Rejection ("<code>: <sanitized text>")
//	TooManyRequestsException (sending rate),
//	LimitExceededException (daily quota),
//	SendingPausedException (sending paused for
//	the account or configuration set)             -> *ledger.NotSent{Code: "<code>"}
//	anything else (InternalServiceErrorException, other codes, other 4xx
//	and 5xx, timeouts, cancelled or expired contexts, network errors, a
//	reply without MessageId)                      -> error wrapping ErrOutcomeUnknown
//
// SES documents no retry hint on its throttling errors, and the SDK exposes
// none: its retryer reads only the x-amz-retry-after header (milliseconds),
// and only when it retries, which Send turns off. Send reads that header
// itself, so NotSent.RetryAfter is its value (capped at
// outcome.MaxRetryAfter) if SES ever sends it and 0 otherwise; with 0 the
// ledger falls back to its own backoff.
//
// No error text contains the address, subject or body.
package sestransport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/resetledger/resetledger/internal/outcome"
	"github.com/resetledger/resetledger/internal/sdkhttp"
	"github.com/resetledger/resetledger/pkg/charclass"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Tag names under which every send carries its correlation data.
const (
	TagIdempotencyKey = "idempotency_key"
	TagContentHash    = "content_hash"
	TagAttempt        = "attempt"
	// TagAttemptProof carries the attempt's proof (ledger.Send.Proof) when
	// there is one: the events function verifies it before it takes an
	// event as evidence.
	TagAttemptProof = "attempt_proof"
)

// ErrOutcomeUnknown is wrapped by every Send error that is neither a
// rejection nor a *ledger.NotSent: the provider may or may not have accepted
// the message.
var ErrOutcomeUnknown = errors.New("sestransport: outcome unknown")

// ErrInvalidConfig is wrapped by Config.Validate errors.
var ErrInvalidConfig = errors.New("sestransport: invalid config")

// Client is the part of the SES v2 API the transport uses; *sesv2.Client
// implements it.
type Client interface {
	SendEmail(ctx context.Context, in *sesv2.SendEmailInput, optFns ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error)
}

// Config configures the transport. There are no defaults: the sender must be
// named.
type Config struct {
	// FromEmailAddress is the sender, an address or domain identity verified
	// in SES, optionally with a display name ("Example <no-reply@example.com>").
	// Required.
	FromEmailAddress string
	// ConfigurationSetName is the SES configuration set to send with. Its
	// event destinations receive the send, delivery and bounce events with
	// the message tags; without one the tags only reach the account's default
	// configuration set, if any. Optional.
	ConfigurationSetName string
}

// Validate reports the first invalid field. Its errors wrap ErrInvalidConfig
// and never echo the configured values.
func (c Config) Validate() error {
	from := strings.TrimSpace(c.FromEmailAddress)
	switch {
	case from == "":
		return fmt.Errorf("%w: FromEmailAddress is required", ErrInvalidConfig)
	case !strings.Contains(from, "@") || strings.ContainsAny(from, "\r\n"):
		return fmt.Errorf("%w: FromEmailAddress is not an email address", ErrInvalidConfig)
	}
	if c.ConfigurationSetName != "" && (len(c.ConfigurationSetName) > 64 || !tagSafe(c.ConfigurationSetName)) {
		return fmt.Errorf("%w: ConfigurationSetName must be 1-64 letters, digits, '_' or '-'", ErrInvalidConfig)
	}
	return nil
}

// Transport sends email through SES v2. It is safe for concurrent use.
type Transport struct {
	client Client
	cfg    Config
}

// New returns a transport that sends through client. The client's own retry
// policy is overridden per call: SES sends are never retried by the SDK.
func New(client Client, cfg Config) (*Transport, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil SES client", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Transport{client: client, cfg: cfg}, nil
}

// Capabilities reports that SES honors no idempotency key and offers no
// per-message lookup: SendEmail has no client token, and no SES API returns
// a sent message by tag. With a configuration set, SES publishes events that
// carry the tags (Events): reconcile then waits the settle period for one to
// resolve an unknown outcome, and otherwise it needs an operator decision.
func (t *Transport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{Events: t.cfg.ConfigurationSetName != ""}
}

// Send makes exactly one SendEmail call (the SDK retryer is disabled for it)
// with a simple subject and text body. See the package documentation for
// how its result maps to the outcomes.
func (t *Transport) Send(ctx context.Context, s ledger.Send) (ledger.Ack, error) {
	if strings.TrimSpace(s.Message.To) == "" {
		return ledger.Ack{}, &ledger.Rejection{Reason: "sestransport: message has no destination address"}
	}
	if !tagSafe(s.IdempotencyKey) || !tagSafe(s.ContentHash) || s.Proof != "" && !tagSafe(s.Proof) {
		return ledger.Ack{}, &ledger.Rejection{Reason: "sestransport: idempotency key, content hash or attempt proof is not a valid SES tag value"}
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(t.cfg.FromEmailAddress),
		Destination:      &types.Destination{ToAddresses: []string{s.Message.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(s.Message.Subject), Charset: aws.String("UTF-8")},
			Body:    &types.Body{Text: &types.Content{Data: aws.String(s.Message.Body), Charset: aws.String("UTF-8")}},
		}},
		EmailTags: []types.MessageTag{
			{Name: aws.String(TagIdempotencyKey), Value: aws.String(s.IdempotencyKey)},
			{Name: aws.String(TagContentHash), Value: aws.String(s.ContentHash)},
			{Name: aws.String(TagAttempt), Value: aws.String(strconv.Itoa(s.Attempt))},
		},
	}
	if s.Proof != "" {
		in.EmailTags = append(in.EmailTags, types.MessageTag{Name: aws.String(TagAttemptProof), Value: aws.String(s.Proof)})
	}
	if t.cfg.ConfigurationSetName != "" {
		in.ConfigurationSetName = aws.String(t.cfg.ConfigurationSetName)
	}
	out, err := t.client.SendEmail(ctx, in, oneAttempt)
	var id string
	if out != nil {
		id = aws.ToString(out.MessageId)
	}
	return classifier.Ack("SendEmail", id, err, s.Message.To, s.Message.Subject, s.Message.Body)
}

// oneAttempt makes the call one attempt the ledger recorded, with a request
// body of its own (sdkhttp.OneAttempt).
func oneAttempt(o *sesv2.Options) { o.Retryer, o.HTTPClient = sdkhttp.OneAttempt(o.HTTPClient) }

// classifier maps SendEmail errors (see the package documentation). A
// paused account or configuration set is not a refusal of this message:
// sending resumes when it is re-enabled, so it is NotSent like the rate and
// daily quota.
var classifier = outcome.Classifier{
	Unknown: ErrOutcomeUnknown,
	Codes: outcome.Codes{
		"MessageRejected":                    outcome.Rejected,
		"MailFromDomainNotVerifiedException": outcome.Rejected,
		"AccountSuspendedException":          outcome.Rejected,
		"BadRequestException":                outcome.Rejected,
		"NotFoundException":                  outcome.Rejected,
		"TooManyRequestsException":           outcome.NotSent,
		"LimitExceededException":             outcome.NotSent,
		"SendingPausedException":             outcome.NotSent,
	},
}

// tagChars is the alphabet of SES tag names and values.
var tagChars = charclass.AlnumPlus("_-")

// tagSafe reports whether s is a valid SES tag name or value: 1-256 ASCII
// letters, digits, '_' or '-'.
func tagSafe(s string) bool { return tagChars.Fits(s, 256) }
