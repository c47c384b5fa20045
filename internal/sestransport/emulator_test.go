package sestransport

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestEmulatorSendEmail runs the transport against the local emulator
// (ministack or LocalStack): an unverified sender is a MessageRejected
// rejection whose reason does not repeat the addresses; after
// CreateEmailIdentity the send is accepted with the MessageId the emulator
// recorded. ministack does not keep EmailTags, so the tags are checked in
// TestSendWireFormat instead.
func TestEmulatorSendEmail(t *testing.T) {
	cfg := emulator.Config(t)
	client := sesv2.NewFromConfig(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	domain := emulator.UniqueName(t, "resetledger") + ".test"
	from := "no-reply@" + domain
	tr := newTransport(t, client, Config{FromEmailAddress: "Reset <" + from + ">"})
	s := testSend()
	s.Message.To = "player-" + emulator.UniqueName(t, "p") + "@example.org"

	_, err := tr.Send(ctx, s)
	var rej *ledger.Rejection
	if !errors.As(err, &rej) {
		t.Fatalf("send from an unverified identity: err = %v, want *ledger.Rejection", err)
	}
	if !strings.HasPrefix(rej.Reason, "MessageRejected") {
		t.Fatalf("reason = %q, want MessageRejected", rej.Reason)
	}
	for _, addr := range []string{from, domain, s.Message.To} {
		if strings.Contains(rej.Reason, addr) {
			t.Fatalf("reason %q repeats %q", rej.Reason, addr)
		}
	}
	t.Logf("unverified sender: %s", rej.Reason)

	if _, err := client.CreateEmailIdentity(ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: aws.String(domain)}); err != nil {
		t.Fatalf("CreateEmailIdentity: %v", err)
	}
	ack, err := tr.Send(ctx, s)
	if err != nil {
		var ue interface{ Unwrap() []error }
		if errors.As(err, &ue) {
			for _, cause := range ue.Unwrap() {
				if cause != ErrOutcomeUnknown {
					t.Logf("cause (test data only): %v", cause)
				}
			}
		}
		t.Fatalf("send after verifying the domain: %v", err)
	}
	if ack.ID == "" {
		t.Fatal("empty ack id")
	}

	checkRecordedMessage(t, ctx, s, ack, from)
}

// checkRecordedMessage: the emulator recorded the acknowledged message once,
// as sent (skipped on an emulator that records none).
func checkRecordedMessage(t *testing.T, ctx context.Context, s ledger.Send, ack ledger.Ack, from string) {
	t.Helper()
	endpoint, _ := emulator.Endpoint()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(endpoint, "/")+"/_ministack/ses/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /_ministack/ses/messages: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Skip("emulator has no /_ministack/ses/messages (not ministack); send was acknowledged")
	}
	var got struct {
		Messages map[string][]struct {
			MessageID string   `json:"MessageId"`
			Source    string   `json:"Source"`
			To        []string `json:"To"`
			Subject   string   `json:"Subject"`
			BodyText  string   `json:"BodyText"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode messages: %v", err)
	}
	n := 0
	for _, msgs := range got.Messages {
		for _, m := range msgs {
			if m.MessageID != ack.ID {
				continue
			}
			n++
			if len(m.To) != 1 || m.To[0] != s.Message.To || m.Subject != s.Message.Subject || m.BodyText != s.Message.Body || !strings.Contains(m.Source, from) {
				t.Errorf("recorded message = %+v", m)
			}
		}
	}
	if n != 1 {
		t.Fatalf("emulator recorded %d messages with id %q, want 1", n, ack.ID)
	}
}
