package producer_test

import (
	"bytes"
	"context"
	"errors"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/resetledger/resetledger/pkg/intentseal"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

func TestEmulatorPublishReceiveOpen(t *testing.T) {
	cfg := emulator.Config(t)
	ctx := context.Background()
	kmsClient, sqsClient := kms.NewFromConfig(cfg), sqs.NewFromConfig(cfg)

	arn := emulator.KMSKey(t, kmsClient, "producer-test")
	queueURL := emulator.Queue(t, sqsClient, "intents")

	macKey, err := kmsClient.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	seals := &kmsseal.KMS{Client: kmsClient, KeyARN: *macKey.KeyMetadata.Arn}
	p := &producer.Producer{
		Queue:    sqsClient,
		QueueURL: queueURL,
		Sealer:   &envelope.Sealer{KMS: kmsClient, KeyID: arn},
		Seals:    seals,
		Clock:    time.Now,
	}
	sent := map[ledger.Channel]producer.Notification{}
	for i, ch := range []ledger.Channel{ledger.Email, ledger.SMS} {
		n := notification(20+i, ch)
		n.ChallengeID = emulator.UniqueName(t, "chal")
		n.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
		n.ExpiresAt = time.Now().Add(10 * time.Minute).Truncate(time.Millisecond)
		id, err := p.Publish(ctx, n)
		if err != nil {
			t.Fatalf("Publish %s: %v", ch, err)
		}
		if id == "" {
			t.Fatalf("Publish %s returned no message id", ch)
		}
		sent[ch] = n
	}

	opener := &envelope.Opener{KMS: kmsClient, KeyARN: arn}
	got := map[ledger.Channel]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(sent) && time.Now().Before(deadline) {
		out, err := sqsClient.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		for _, msg := range out.Messages {
			body := aws.ToString(msg.Body)
			dec, err := intent.Decode([]byte(body))
			in := dec.Intent
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			n, ok := sent[in.Channel]
			if !ok {
				t.Fatalf("unexpected intent for %s", in.Channel)
			}
			if got[in.Channel] {
				// SQS is at-least-once: a send retried after a lost
				// response is a second copy of the same intent.
				continue
			}
			got[in.Channel] = true
			checkReceivedIntent(t, ctx, seals, opener, body, dec, n)
			if _, err := sqsClient.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(queueURL), ReceiptHandle: msg.ReceiptHandle}); err != nil {
				t.Fatalf("DeleteMessage: %v", err)
			}
		}
	}
	if len(got) != len(sent) {
		t.Fatalf("received %d of %d intents", len(got), len(sent))
	}
}

// checkReceivedIntent: the received intent's seal verifies (and over no other
// bytes), its raw body holds no secret, it decodes to what was published, and
// its content opens, under its own channel's key only.
func checkReceivedIntent(t *testing.T, ctx context.Context, seals *kmsseal.KMS, opener *envelope.Opener, body string, dec intent.Decoded, n producer.Notification) {
	t.Helper()
	in, sealed := dec.Intent, dec.Sealed
	// The seal KMS made verifies under the same key, and not over
	// any other fields.
	if err := seals.Verify(ctx, dec.Binding, dec.Seal); err != nil {
		t.Fatalf("%s: the intent's seal does not verify: %v", in.Channel, err)
	}
	forged := append(bytes.Clone(dec.Binding), '!')
	if err := seals.Verify(ctx, forged, dec.Seal); !errors.Is(err, intentseal.ErrMismatch) {
		t.Fatalf("%s: a seal verified over other bytes: %v", in.Channel, err)
	}
	for _, secret := range []string{ledgertest.Canary, n.Message.To, n.Message.Body} {
		if strings.Contains(body, secret) {
			t.Errorf("%s: raw SQS body contains %q", in.Channel, secret)
		}
	}
	if in.ChallengeID != n.ChallengeID || !in.ExpiresAt.Equal(n.ExpiresAt) ||
		in.Workflow.Kind != ledger.Fallback || len(in.Workflow.Order) != 2 {
		t.Errorf("%s: decoded intent %+v does not match what was published", in.Channel, in)
	}
	m, err := opener.Open(ctx, in.Key(), sealed)
	if err != nil {
		t.Fatalf("%s: Open: %v", in.Channel, err)
	}
	if m != n.Message {
		t.Errorf("%s: opened %+v, want %+v", in.Channel, m, n.Message)
	}
	if h := ledger.ContentHash(in.TemplateID, in.TemplateVersion, m); h != in.ContentHash {
		t.Errorf("%s: content hash of the opened message %s, intent says %s", in.Channel, h, in.ContentHash)
	}
	// The content sealed for one channel does not open as the other.
	other := in.Identity
	other.Channel = map[ledger.Channel]ledger.Channel{ledger.Email: ledger.SMS, ledger.SMS: ledger.Email}[in.Channel]
	if _, err := opener.Open(ctx, other.Key(), sealed); err == nil {
		t.Errorf("%s: content opened under the other channel's key", in.Channel)
	}
}
