// Package producer is what the account service imports to publish a
// password-reset notification intent: it seals the rendered message with
// KMS, computes its content hash, validates the intent exactly as the claim
// function will, seals the intent's fields and its envelope (intent_mac,
// under the stack's intent key) and sends it to the intents queue.
//
// The producer never puts the address, the body or the reset link anywhere
// but inside the sealed envelope, and its errors never contain them.
package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/intentseal"
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
	// Seals seals the intent's fields (intentseal.KMS under the stack's
	// IntentKeyArn): the claim function refuses an intent without a seal
	// it can verify.
	Seals intentseal.Signer
	// Clock refuses notifications that already expired; time.Now if nil.
	Clock ledger.Clock
}

// Notification is one password-reset notification on one channel, with the
// rendered, secret-bearing message.
type Notification struct {
	ChallengeID    string // opaque challenge id
	Channel        ledger.Channel
	Workflow       ledger.Workflow
	DestinationRef string // opaque reference to the address, never the address
	// SubjectRef is an opaque reference to the account the challenge is
	// for (the rules of DestinationRef), never an address. Optional: ""
	// publishes the intent without subject_ref.
	SubjectRef string
	// IssuedAt is when the account service issued the challenge: a
	// subject's newest challenge is the one issued last. Zero means now
	// (the producer's clock); it may not be later than the claim's clock.
	IssuedAt        time.Time
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
// input is a *ledger.FieldError (errors.Is ledger.ErrInvalidIntent) and an
// expired challenge is ErrExpired, both before any AWS call; only a sealed
// intent within a few hundred bytes of the queue's limit is refused after
// KMS answered. KMS and SQS failures are wrapped and may be retried (a
// duplicate intent is harmless: the ledger deduplicates).
func (p *Producer) Publish(ctx context.Context, n Notification) (string, error) {
	if p.Queue == nil || p.QueueURL == "" || p.Sealer == nil || p.Seals == nil {
		return "", errors.New("producer: needs a queue client, a queue URL, a content sealer and an intent signer")
	}
	now := time.Now
	if p.Clock != nil {
		now = p.Clock
	}

	in := ledger.Intent{
		Identity: ledger.Identity{
			Purpose:     ledger.PurposePasswordReset,
			ChallengeID: n.ChallengeID,
			Channel:     n.Channel,
		},
		Workflow:        n.Workflow,
		DestinationRef:  n.DestinationRef,
		SubjectRef:      n.SubjectRef,
		ExpiresAt:       n.ExpiresAt,
		TemplateID:      n.TemplateID,
		TemplateVersion: n.TemplateVersion,
		PolicyVersion:   n.PolicyVersion,
		ContentHash:     ledger.ContentHash(n.TemplateID, n.TemplateVersion, n.Message),
	}
	if err := in.Validate(); err != nil {
		return "", err
	}
	if err := checkMessage(in, n.Message, presetDictionary(p.Sealer)); err != nil {
		return "", err
	}
	t := now()
	if !in.ExpiresAt.After(t) {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, ErrExpired)
	}
	in.IssuedAt = n.IssuedAt
	if in.IssuedAt.IsZero() {
		in.IssuedAt = t
	}
	if err := intent.Check(in); err != nil {
		return "", err
	}

	sealed, err := p.Sealer.Seal(ctx, in.Key(), n.Message)
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, err)
	}
	// The seal binds the envelope too (its digest): the content is sealed
	// first.
	binding, err := intent.Binding(in, sealed)
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, err)
	}
	seal, err := p.Seals.Sign(ctx, binding)
	if err != nil {
		return "", fmt.Errorf("publish %s/%s: %w", in.ChallengeID, in.Channel, err)
	}
	body, err := intent.Encode(in, sealed, seal)
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

// checkMessage refuses a message the consumer could not use, before any
// AWS call: a missing address or body, a field that is not valid UTF-8, or
// one too large for the sealed intent to fit the queue even with the
// smallest data key and key id KMS could return.
func checkMessage(in ledger.Intent, m ledger.Message, dict []byte) error {
	for _, f := range []struct{ name, v string }{{"to", m.To}, {"subject", m.Subject}, {"body", m.Body}} {
		switch {
		case f.v == "" && f.name != "subject":
			return &ledger.FieldError{Field: "message." + f.name, Reason: "missing"}
		case !utf8.ValidString(f.v):
			return &ledger.FieldError{Field: "message." + f.name, Reason: "not valid UTF-8"}
		}
	}
	// The sealed JSON is at least as long as the fields, and it may not
	// be longer than envelope.MaxPlaintext: past the limit here, it cannot
	// be sealed.
	if len(m.To)+len(m.Subject)+len(m.Body) > intent.MaxBodySize {
		return tooLarge()
	}
	size, err := sealedSizeAtLeast(in, m, dict)
	if err != nil {
		return err
	}
	if size > intent.MaxBodySize {
		return tooLarge()
	}
	return nil
}

// presetDictionary is the Sealer's preset dictionary, if it says it has one
// (*envelope.Sealer does): the size check must compress as Seal will.
func presetDictionary(s Sealer) []byte {
	if d, ok := s.(interface{ PresetDictionary() []byte }); ok {
		return d.PresetDictionary()
	}
	return nil
}

// sealedSizeAtLeast is the size of the intent with m sealed under a
// one-byte data key ciphertext and a one-character key id: a lower bound
// of the real size, which only the KMS answer settles.
func sealedSizeAtLeast(in ledger.Intent, m ledger.Message, dict []byte) (int, error) {
	pt, err := envelope.Plaintext(m)
	if err != nil {
		return 0, err
	}
	defer clear(pt)
	if len(pt) > envelope.MaxPlaintext {
		return intent.MaxBodySize + 1, nil
	}
	// Seal encrypts the DEFLATE stream, which compress/flate writes the
	// same way every time: its length is the ciphertext's, less the tag.
	z, err := envelope.Compress(pt, dict)
	if err != nil {
		return 0, err
	}
	n := len(z)
	clear(z)
	if in.IssuedAt.IsZero() {
		// Checked before the clock is read: the shortest issued_at RFC 3339
		// writes keeps this a lower bound.
		in.IssuedAt = in.ExpiresAt.Truncate(time.Second).Add(-time.Second)
	}
	smallest := envelope.Envelope{
		V: envelope.Version, Alg: envelope.Algorithm, KMSKeyID: "k",
		EDK: []byte{0}, Nonce: make([]byte, 12), CT: make([]byte, n+16),
	}
	if len(dict) > 0 {
		smallest.V, smallest.Dict = envelope.VersionDictionary, envelope.DictionaryID(dict)
	}
	body, err := intent.Encode(in, smallest, strings.Repeat("A", sealLen))
	if err != nil {
		return 0, err
	}
	return len(body), nil
}

// sealLen is the length of every seal: 32 bytes in unpadded base64url.
const sealLen = 43

func tooLarge() error {
	return &ledger.FieldError{Field: "message", Reason: fmt.Sprintf("too large: the sealed intent must fit %d bytes", intent.MaxBodySize)}
}
