package producer_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
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
	p := &producer.Producer{Queue: q, QueueURL: "https://queue.test/intents", Sealer: s, Clock: clock}
	n := notification(1, ledger.Email)
	id, err := p.Publish(context.Background(), n)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if id != "msg-1" || len(q.bodies) != 1 {
		t.Fatalf("id %q, %d messages sent", id, len(q.bodies))
	}
	in, _, err := intent.Decode([]byte(q.bodies[0]))
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
	}{
		{"raw address as destination ref", func(n *producer.Notification) { n.DestinationRef = n.Message.To }, "destination_ref"},
		{"unknown channel", func(n *producer.Notification) { n.Channel = "push" }, "channel"},
		{"control character in challenge id", func(n *producer.Notification) { n.ChallengeID = "chal\n" + ledgertest.Canary }, "challenge_id"},
		{"fallback without order", func(n *producer.Notification) { n.Workflow = ledger.Workflow{Kind: ledger.Fallback} }, "workflow.order"},
		{"no expiry", func(n *producer.Notification) { n.ExpiresAt = time.Time{} }, "expires_at"},
		{"no address", func(n *producer.Notification) { n.Message.To = "" }, "message.to"},
		{"no body", func(n *producer.Notification) { n.Message.Body = "" }, "message.body"},
		{"message too large to seal", func(n *producer.Notification) { n.Message.Body = strings.Repeat("x", intent.MaxBodySize) }, "message"},
		{"sealed intent too large", func(n *producer.Notification) { n.Message.Body = strings.Repeat("x", intent.MaxBodySize*3/4-200) }, "message"},
		{"already expired", func(n *producer.Notification) { n.ExpiresAt = ledgertest.Epoch }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, s := &fakeQueue{}, &bigSealer{}
			p := &producer.Producer{Queue: q, QueueURL: "https://queue.test/intents", Sealer: s, Clock: clock}
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
			if strings.Contains(err.Error(), ledgertest.Canary) || strings.Contains(err.Error(), "@") {
				t.Errorf("error leaks content: %v", err)
			}
		})
	}
}

// bigSealer's ciphertext grows with the body, as real sealing does.
type bigSealer struct{}

func (bigSealer) Seal(_ context.Context, _ string, m ledger.Message) (envelope.Envelope, error) {
	return envelope.Envelope{
		V: envelope.Version, Alg: envelope.Algorithm, KMSKeyID: "alias/test",
		EDK: []byte("edk"), Nonce: make([]byte, 12), CT: bytes.Repeat([]byte{1}, len(m.Body)+16),
	}, nil
}
