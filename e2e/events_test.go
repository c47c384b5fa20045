package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestProviderEventsEndToEnd: an email sent through the deployed stack, then
// SES's Delivery and a permanent Bounce event, in the documented record
// format, published to the deployed provider-events topic. The topic's
// subscription, the events queue and the deployed events function append
// both to the row's history, and the recipient address in the events
// reaches nothing the ledger keeps.
func TestProviderEventsEndToEnd(t *testing.T) {
	e := setup(t)
	if e.out.ProviderEventsTopicARN == "" {
		t.Fatalf("stack %s has no ProviderEventsTopicArn output", e.out.Stack)
	}
	ctx := context.Background()
	challenge := emulator.UniqueName(t, "events")
	n := notification(challenge, ledger.Email, "success+"+challenge+"@"+simulatorDomain, time.Now().Add(10*time.Minute))
	if _, err := e.producer.Publish(ctx, n); err != nil {
		t.Fatal(err)
	}
	row := e.terminal(t, key(n), sendTimeout)
	if row.State != ledger.Accepted {
		t.Fatalf("row is %s (%s), want accepted", row.State, row.Reason)
	}
	topic := sns.NewFromConfig(e.cfg)
	// The emulator's SES keeps no message tags, so the proof the send carried
	// is made again here with the deployed key, as dispatch made it (the
	// emulator enforces no key policy; on AWS only dispatch may sign). A
	// forged event without it goes first and must change nothing.
	if e.out.AttemptProofKeyARN == "" {
		t.Fatalf("stack %s has no AttemptProofKeyArn output", e.out.Stack)
	}
	proofs := &attemptproof.KMS{Client: kms.NewFromConfig(e.cfg), KeyARN: e.out.AttemptProofKeyARN}
	proof, err := proofs.Sign(ctx, ledger.AttemptRef{Key: row.Key, Channel: ledger.Email, Attempt: row.Attempts})
	if err != nil {
		t.Fatal(err)
	}
	sent := providereventtest.Carried{Key: row.Key, Attempt: row.Attempts, Proof: proof}
	for _, rec := range [][]byte{
		providereventtest.SES("Delivery", providereventtest.Unproven(row.Key), "0102018f-forged-000000", time.Now(), ""),
		providereventtest.SES("Delivery", sent, row.AckID, time.Now(), ""),
		providereventtest.SES("Bounce", sent, row.AckID, time.Now().Add(time.Second), "Permanent"),
	} {
		if _, err := topic.Publish(ctx, &sns.PublishInput{TopicArn: aws.String(e.out.ProviderEventsTopicARN), Message: aws.String(string(rec))}); err != nil {
			t.Fatal(err)
		}
	}
	err = Poll(ctx, sendTimeout, pollEvery, func(ctx context.Context) (bool, string, error) {
		got, err := e.store.Get(ctx, row.Key)
		if err != nil {
			return false, "", err
		}
		row = got
		kinds := []string{}
		for _, ev := range got.History {
			if ev.Kind.Provider() {
				kinds = append(kinds, string(ev.Kind))
			}
		}
		return len(kinds) == 2, fmt.Sprintf("provider entries %v", kinds), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := row.DeliveryFailure()
	if !ok || f.Detail != "Permanent/General" || f.AckID != row.AckID || !row.Delivered() || row.State != ledger.Accepted {
		t.Fatalf("row %s, delivered %v, failure %+v", row.State, row.Delivered(), f)
	}
	if err := row.Verify(); err != nil {
		t.Fatal(err)
	}
	for _, ev := range row.History {
		if ev.AckID == "0102018f-forged-000000" {
			t.Fatalf("the forged event was recorded: %+v", ev)
		}
		if s := fmt.Sprintf("%+v", ev); strings.Contains(s, providereventtest.Recipient) || strings.Contains(s, "Reset your password") {
			t.Fatalf("the event's personal data reached the ledger: %s", s)
		}
	}
}
