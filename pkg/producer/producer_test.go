package producer_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/resetledger/resetledger/pkg/intentseal"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// fakeSealer returns a well-formed envelope whose ciphertext is filler; it
// records the keys it sealed for.
type fakeSealer struct{ keys []string }

func (f *fakeSealer) Seal(_ context.Context, key string, _ ledger.Message) (envelope.Envelope, error) {
	f.keys = append(f.keys, key)
	return envelope.Envelope{
		V: envelope.Version, Alg: envelope.Algorithm, KMSKeyID: "alias/test",
		EDK: []byte("edk"), Nonce: make([]byte, 12), CT: make([]byte, 48),
	}, nil
}

type fakeQueue struct{ bodies []string }

func (f *fakeQueue) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.bodies = append(f.bodies, aws.ToString(in.MessageBody))
	return &sqs.SendMessageOutput{MessageId: aws.String("msg-1")}, nil
}

func notification(i int, ch ledger.Channel) producer.Notification {
	return producer.Notification{
		ChallengeID:     "chal-" + strings.Repeat("7", i%5+1),
		Channel:         ch,
		Workflow:        ledger.Workflow{Kind: ledger.Single},
		DestinationRef:  "acct-42:" + string(ch),
		ExpiresAt:       ledgertest.Epoch.Add(10 * time.Minute),
		TemplateID:      "reset-" + string(ch),
		TemplateVersion: "3",
		PolicyVersion:   "policy-1",
		Message:         ledgertest.Message(i, ch),
	}
}

func clock() time.Time { return ledgertest.Epoch }

func TestPublish(t *testing.T) {
	q, s := &fakeQueue{}, &fakeSealer{}
	p := &producer.Producer{Queue: q, QueueURL: "https://queue.test/intents", Sealer: s, Seals: testSeals, Clock: clock}
	n := notification(1, ledger.Email)
	id, err := p.Publish(context.Background(), n)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if id != "msg-1" || len(q.bodies) != 1 {
		t.Fatalf("id %q, %d messages sent", id, len(q.bodies))
	}
	dec, err := intent.Decode([]byte(q.bodies[0]))
	in := dec.Intent
	if err != nil {
		t.Fatalf("published body does not decode: %v", err)
	}
	if want := ledger.ContentHash(n.TemplateID, n.TemplateVersion, n.Message); in.ContentHash != want {
		t.Errorf("content hash %s, want %s", in.ContentHash, want)
	}
	if len(s.keys) != 1 || s.keys[0] != in.Key() {
		t.Errorf("sealed for keys %v, want [%s]", s.keys, in.Key())
	}
	if in.ChallengeID != n.ChallengeID || in.Channel != n.Channel || in.DestinationRef != n.DestinationRef ||
		!in.ExpiresAt.Equal(n.ExpiresAt) || in.Purpose != ledger.PurposePasswordReset {
		t.Errorf("decoded intent %+v does not match the notification", in)
	}
	for _, secret := range []string{ledgertest.Canary, n.Message.To, n.Message.Body} {
		if strings.Contains(q.bodies[0], secret) {
			t.Errorf("body contains %q", secret)
		}
	}
}

func TestPublishRefuses(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(n *producer.Notification)
		field string // "" means ErrExpired
		// edk is the size of the data key ciphertext the sealer returns.
		edk int
	}{
		{"raw address as destination ref", func(n *producer.Notification) { n.DestinationRef = n.Message.To }, "destination_ref", 0},
		{"unknown channel", func(n *producer.Notification) { n.Channel = "push" }, "channel", 0},
		{"control character in challenge id", func(n *producer.Notification) { n.ChallengeID = "chal\n" + ledgertest.Canary }, "challenge_id", 0},
		{"fallback without order", func(n *producer.Notification) { n.Workflow = ledger.Workflow{Kind: ledger.Fallback} }, "workflow.order", 0},
		{"no expiry", func(n *producer.Notification) { n.ExpiresAt = time.Time{} }, "expires_at", 0},
		{"no address", func(n *producer.Notification) { n.Message.To = "" }, "message.to", 0},
		{"no body", func(n *producer.Notification) { n.Message.Body = "" }, "message.body", 0},
		{"message too large to seal", func(n *producer.Notification) { n.Message.Body = strings.Repeat("x", intent.MaxBodySize) }, "message", 0},
		// Noise barely compresses (to about 82%), whichever codec.
		{"sealed intent too large", func(n *producer.Notification) { n.Message.Body = vectors.Noise("too large", 63000) }, "message", 0},
		{"sealed intent too large once KMS answered", func(n *producer.Notification) { n.Message.Body = vectors.Noise("too large", 54000) }, "message", 6000},
		{"escapes make the sealed intent too large", func(n *producer.Notification) { n.Message.Body = strings.Repeat("<", intent.MaxBodySize/4) }, "message", 0},
		{"address not UTF-8", func(n *producer.Notification) { n.Message.To = "player\xff@example.com" }, "message.to", 0},
		{"subject not UTF-8", func(n *producer.Notification) { n.Message.Subject = "Reset \xc3" }, "message.subject", 0},
		{"body not UTF-8", func(n *producer.Notification) { n.Message.Body += "\xed\xa0\x80" }, "message.body", 0},
		{"expiry past year 9999", func(n *producer.Notification) { n.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "expires_at", 0},
		{"already expired", func(n *producer.Notification) { n.ExpiresAt = ledgertest.Epoch }, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, s := &fakeQueue{}, &bigSealer{edk: tc.edk}
			p := &producer.Producer{Queue: q, QueueURL: "https://queue.test/intents", Sealer: s, Seals: testSeals, Clock: clock}
			n := notification(2, ledger.Email)
			tc.edit(&n)
			_, err := p.Publish(context.Background(), n)
			if tc.field == "" {
				if !errors.Is(err, producer.ErrExpired) {
					t.Fatalf("Publish = %v, want ErrExpired", err)
				}
			} else {
				var fe *ledger.FieldError
				if !errors.As(err, &fe) || fe.Field != tc.field {
					t.Fatalf("Publish = %v, want a field error on %s", err, tc.field)
				}
			}
			if len(q.bodies) != 0 {
				t.Error("a refused notification was sent")
			}
			switch {
			case s.calls != 0 && tc.edk == 0:
				t.Errorf("sealed %d times: a refusal that needs no KMS answer must come before the KMS call", s.calls)
			case s.calls != 1 && tc.edk != 0:
				t.Errorf("sealed %d times, want once: only the KMS answer shows this one is too large", s.calls)
			}
			if strings.Contains(err.Error(), ledgertest.Canary) || strings.Contains(err.Error(), "@") {
				t.Errorf("error leaks content: %v", err)
			}
		})
	}
}

// bigSealer's ciphertext grows with the body, as real sealing does. It
// counts its calls (each one is a KMS call in the real sealer).
type bigSealer struct{ edk, calls int }

func (s *bigSealer) Seal(_ context.Context, _ string, m ledger.Message) (envelope.Envelope, error) {
	s.calls++
	pt, err := envelope.Plaintext(m)
	if err != nil {
		return envelope.Envelope{}, err
	}
	z, err := envelope.Compress(pt, nil)
	if err != nil {
		return envelope.Envelope{}, err
	}
	return envelope.Envelope{
		V: envelope.Version, Alg: envelope.Algorithm, KMSKeyID: "alias/test",
		EDK: bytes.Repeat([]byte{2}, max(s.edk, 3)), Nonce: make([]byte, 12), CT: bytes.Repeat([]byte{1}, len(z)+16),
	}, nil
}

// testSeals seals intents in process: tests only.
var testSeals = &intentseal.Local{Key: []byte("producer test intent key")}
