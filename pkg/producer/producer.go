// Package producer is what the account service imports to publish a
// password-reset notification intent: it seals the rendered message with
// KMS, computes its content hash, validates the intent exactly as the claim
// function will, and sends it to the intents queue.
//
// The producer never puts the address, the body or the reset link anywhere
// but inside the sealed envelope, and its errors never contain them.
package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ErrExpired reports a notification whose challenge expired before it was
// published; nothing was sent.
var ErrExpired = errors.New("producer: challenge already expired")

// Sender is the SQS call the producer makes.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Sealer encrypts a message for one dedupe key; *envelope.Sealer is one.
type Sealer interface {
	Seal(ctx context.Context, key string, m ledger.Message) (envelope.Envelope, error)
}

// Producer publishes notification intents. It is safe for concurrent use.
type Producer struct {
	// Queue sends to SQS.
	Queue Sender
	// QueueURL is the intents queue (a standard queue).
	QueueURL string
	// Sealer seals the rendered message.
	Sealer Sealer
	// Clock refuses notifications that already expired; time.Now if nil.
	Clock ledger.Clock
}

// Notification is one password-reset notification on one channel, with the
// rendered, secret-bearing message.
type Notification struct {
	ChallengeID     string // opaque challenge id
	Channel         ledger.Channel
	Workflow        ledger.Workflow
	DestinationRef  string // opaque reference to the address, never the address
	ExpiresAt       time.Time
	TemplateID      string
	TemplateVersion string
	PolicyVersion   string
	// Message is the rendered message with the real address and reset link.
	// It leaves the process only sealed.
	Message ledger.Message
}

// Publish validates n, seals its message under the intent's dedupe key and
// sends the intent to the queue. It returns the SQS message id. Invalid
// input is a *ledger.FieldError (errors.Is ledger.ErrInvalidIntent); an
// expired challenge is ErrExpired; KMS and SQS failures are wrapped and may
// be retried (a duplicate intent is harmless: the ledger deduplicates).
func (p *Producer) Publish(ctx context.Context, n Notification) (string, error) {
	if p.Queue == nil || p.QueueURL == "" || p.Sealer == nil {
		return "", errors.New("producer: needs a queue client, a queue URL and a sealer")
	}
	in := ledger.Intent{
		Identity: ledger.Identity{
			Purpose:     ledger.PurposePasswordReset,
			ChallengeID: n.ChallengeID,
			Channel:     n.Channel,
		},
		Workflow:        n.Workflow,
		DestinationRef:  n.DestinationRef,
		ExpiresAt:       n.ExpiresAt,
		TemplateID:      n.TemplateID,
		TemplateVersion: n.TemplateVersion,
		PolicyVersion:   n.PolicyVersion,
		ContentHash:     ledger.ContentHash(n.TemplateID, n.TemplateVersion, n.Message),
	}
	if err := in.Validate(); err != nil {
		return "", err
	}
	switch {
	case n.Message.To == "":
		return "", &ledger.FieldError{Field: "message.to", Reason: "missing"}
	case n.Message.Body == "":
		return "", &ledger.FieldError{Field: "message.body", Reason: "missing"}
	}
	// Base64 of the sealed JSON grows the message by a third: anything past
	// three quarters of the body limit cannot fit. Refuse before calling KMS.
	if len(n.Message.To)+len(n.Message.Subject)+len(n.Message.Body) > intent.MaxBodySize*3/4 {
		return "", tooLarge()
	}
	now := time.Now
	if p.Clock != nil {
		now = p.Clock
	}
	if !in.ExpiresAt.After(now()) {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, ErrExpired)
	}

	sealed, err := p.Sealer.Seal(ctx, in.Key(), n.Message)
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, err)
	}
	body, err := intent.Encode(in, sealed)
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, err)
	}
	if len(body) > intent.MaxBodySize {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, tooLarge())
	}
	out, err := p.Queue.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(p.QueueURL),
		MessageBody: aws.String(string(body)),
	})
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: send: %w", in.ChallengeID, in.Channel, err)
	}
	return aws.ToString(out.MessageId), nil
}

func tooLarge() error {
	return &ledger.FieldError{Field: "message", Reason: fmt.Sprintf("too large: the sealed intent must fit %d bytes", intent.MaxBodySize)}
}
