package producer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

// invalidFile holds notifications a producer must refuse before any AWS
// call, and how.
const invalidFile = "invalid.json"

type invalidDoc struct {
	Description string          `json:"description"`
	Now         string          `json:"now"`
	Vectors     []invalidVector `json:"vectors"`
}

// refusal is how a producer refuses: error "invalid_intent" with the field
// and reason of the *ledger.FieldError, or error "expired".
type refusal struct {
	Error  string `json:"error"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type invalidVector struct {
	Name         string               `json:"name"`
	Notification vectors.Notification `json:"notification"`
	Want         refusal              `json:"want"`
}

// vectorNow is the producer's clock for invalid.json.
const vectorNow = "2026-11-30T10:40:00Z"

func invalidInputs() []struct {
	name string
	edit func(n *vectors.Notification)
} {
	type in = struct {
		name string
		edit func(n *vectors.Notification)
	}
	return []in{
		{"unknown channel", func(n *vectors.Notification) { n.Channel = "push" }},
		{"empty channel", func(n *vectors.Notification) { n.Channel = "" }},
		{"channel in capitals", func(n *vectors.Notification) { n.Channel = "EMAIL" }},
		{"no challenge id", func(n *vectors.Notification) { n.ChallengeID = "" }},
		{"challenge id of 129 characters", func(n *vectors.Notification) { n.ChallengeID = strings.Repeat("c", 129) }},
		{"address as challenge id", func(n *vectors.Notification) { n.ChallengeID = "player1001@example.com" }},
		{"control character in challenge id", func(n *vectors.Notification) { n.ChallengeID = "chal-1\nFORGED log line" }},
		{"non-ASCII challenge id", func(n *vectors.Notification) { n.ChallengeID = "chal-é" }},
		{"unknown workflow", func(n *vectors.Notification) { n.Workflow.Kind = "broadcast" }},
		{"no workflow", func(n *vectors.Notification) { n.Workflow.Kind = "" }},
		{"fallback without an order", func(n *vectors.Notification) { n.Workflow = vectors.Workflow{Kind: "fallback"} }},
		{"fallback order without the intent's channel", func(n *vectors.Notification) {
			n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"sms"}}
		}},
		{"fallback order with a repeated channel", func(n *vectors.Notification) {
			n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"email", "email"}}
		}},
		{"fallback order with an unknown channel", func(n *vectors.Notification) {
			n.Workflow = vectors.Workflow{Kind: "fallback", Order: []string{"email", "push"}}
		}},
		{"email address in destination_ref", func(n *vectors.Notification) { n.DestinationRef = "player1001@example.com" }},
		{"phone number in destination_ref", func(n *vectors.Notification) { n.DestinationRef = "+15555550123" }},
		{"no destination_ref", func(n *vectors.Notification) { n.DestinationRef = "" }},
		{"destination_ref of 257 characters", func(n *vectors.Notification) { n.DestinationRef = strings.Repeat("d", 257) }},
		{"email address in subject_ref", func(n *vectors.Notification) { n.SubjectRef = "player1001@example.com" }},
		{"phone number in subject_ref", func(n *vectors.Notification) { n.SubjectRef = "+15555550123" }},
		{"subject_ref of 257 characters", func(n *vectors.Notification) { n.SubjectRef = strings.Repeat("s", 257) }},
		{"space in subject_ref", func(n *vectors.Notification) { n.SubjectRef = "acct 1001" }},
		{"control character in subject_ref", func(n *vectors.Notification) { n.SubjectRef = "acct-1001\nFORGED log line" }},
		{"non-ASCII subject_ref", func(n *vectors.Notification) { n.SubjectRef = "acct-é" }},
		{"no expiry", func(n *vectors.Notification) { n.ExpiresAt = "" }},
		{"no template id", func(n *vectors.Notification) { n.TemplateID = "" }},
		{"template id of 65 characters", func(n *vectors.Notification) { n.TemplateID = strings.Repeat("t", 65) }},
		{"template version of 33 characters", func(n *vectors.Notification) { n.TemplateVersion = strings.Repeat("v", 33) }},
		{"space in policy version", func(n *vectors.Notification) { n.PolicyVersion = "policy 1" }},
		{"no address", func(n *vectors.Notification) { n.Message.To = vectors.Plain("") }},
		{"no body", func(n *vectors.Notification) { n.Message.Body = vectors.Plain("") }},
		{"body of 64 KiB", func(n *vectors.Notification) { n.Message.Body = vectors.Repeated("x", 65536) }},
		{"body whose sealed intent cannot fit 64 KiB", func(n *vectors.Notification) { n.Message.Body = vectors.Plain(vectors.Noise("too large", 63000)) }},
		{"body whose escapes make the sealed intent too large", func(n *vectors.Notification) { n.Message.Body = vectors.Repeated("<", 16384) }},
		{"challenge expires now", func(n *vectors.Notification) { n.ExpiresAt = vectorNow }},
		{"challenge expired", func(n *vectors.Notification) { n.ExpiresAt = "2026-11-30T10:39:59.999Z" }},
		{"issued at its expiry", func(n *vectors.Notification) { n.IssuedAt = n.ExpiresAt }},
		{"issued after its expiry", func(n *vectors.Notification) { n.IssuedAt = "2026-11-30T10:50:00.001Z" }},
	}
}

func validNotification() vectors.Notification {
	return vectors.Notification{
		ChallengeID: "chal-7f3a9c01", Channel: "email", Workflow: vectors.Workflow{Kind: "single"},
		DestinationRef: "acct-1001:email", IssuedAt: "2026-11-30T10:39:00Z", ExpiresAt: "2026-11-30T10:50:00Z",
		TemplateID: "reset-email", TemplateVersion: "3", PolicyVersion: "policy-1",
		Message: vectors.Message{
			To: vectors.Plain("player1001@example.com"), Subject: vectors.Plain("Reset your password"),
			Body: vectors.Plain("Reset your password: https://game.example.com/reset?token=4f9c2a61d0e8b7a5"),
		},
	}
}

// countingSealer and countingQueue fail the refusal if they are called:
// every refusal in invalid.json comes before any AWS call.
type countingSealer struct{ calls int }

func (s *countingSealer) Seal(context.Context, string, ledger.Message) (envelope.Envelope, error) {
	s.calls++
	return envelope.Envelope{}, errors.New("sealer called")
}

type countingSigner struct{ calls int }

func (m *countingSigner) Sign(context.Context, []byte) (string, error) {
	m.calls++
	return "", errors.New("intent key called")
}

type countingQueue struct{ calls int }

func (q *countingQueue) SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	q.calls++
	return nil, errors.New("queue called")
}

// refuse publishes n at vectorNow and reports how the producer refused it.
func refuse(t *testing.T, n vectors.Notification) refusal {
	t.Helper()
	p, err := n.Producer()
	if err != nil {
		t.Fatalf("notification: %v", err)
	}
	now, _ := time.Parse(time.RFC3339, vectorNow)
	s, q, m := &countingSealer{}, &countingQueue{}, &countingSigner{}
	pr := &producer.Producer{Queue: q, QueueURL: "https://sqs.test/intents", Sealer: s, Seals: m, Clock: func() time.Time { return now }}
	_, err = pr.Publish(context.Background(), p)
	if s.calls+m.calls+q.calls != 0 {
		t.Errorf("refusal after %d KMS and %d SQS calls, want none", s.calls+m.calls, q.calls)
	}
	var fe *ledger.FieldError
	switch {
	case errors.As(err, &fe):
		return refusal{Error: "invalid_intent", Field: fe.Field, Reason: fe.Reason}
	case errors.Is(err, producer.ErrExpired):
		return refusal{Error: "expired"}
	}
	t.Fatalf("Publish = %v, want a field error or ErrExpired", err)
	return refusal{}
}

// TestVectorsInvalid checks that the Go producer refuses every notification
// of invalid.json as the file says, before any AWS call, and that the
// notification the cases start from is valid.
func TestVectorsInvalid(t *testing.T) {
	var doc invalidDoc
	vectors.Load(t, invalidFile, &doc)
	generated := invalidDoc{
		Description: "Notifications a producer must refuse before any AWS call: each is a valid notification with one defect. " +
			"want.error is invalid_intent (with the field and reason) or expired (at \"now\"). Strings may be given as " +
			"{\"repeat\": s, \"count\": n}. See docs/intent-v2.md.",
		Now: vectorNow,
	}
	for _, c := range invalidInputs() {
		n := validNotification()
		c.edit(&n)
		generated.Vectors = append(generated.Vectors, invalidVector{Name: c.name, Notification: n, Want: refuse(t, n)})
	}
	if !vectors.Updating() {
		if len(doc.Vectors) != len(generated.Vectors) || doc.Now != vectorNow {
			t.Errorf("%s has %d vectors at %s, the generator %d at %s", invalidFile, len(doc.Vectors), doc.Now, len(generated.Vectors), vectorNow)
		}
		for _, v := range doc.Vectors {
			t.Run(v.Name, func(t *testing.T) {
				if got := refuse(t, v.Notification); got != v.Want {
					t.Errorf("refused with %+v, want %+v", got, v.Want)
				}
			})
		}
	}
	vectors.Sync(t, invalidFile, generated)

	// The base case is published; its body fits.
	p, _ := validNotification().Producer()
	now, _ := time.Parse(time.RFC3339, vectorNow)
	q := &fakeQueue{}
	pr := &producer.Producer{Queue: q, QueueURL: "https://sqs.test/intents", Sealer: &fakeSealer{}, Seals: testSeals, Clock: func() time.Time { return now }}
	if _, err := pr.Publish(context.Background(), p); err != nil || len(q.bodies) != 1 || len(q.bodies[0]) > intent.MaxBodySize {
		t.Fatalf("the valid notification: %v", err)
	}
}
