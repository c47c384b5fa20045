package fingerprint_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestLocalNormalizesAndSeparates(t *testing.T) {
	ctx := context.Background()
	l := &fingerprint.Local{Key: []byte("k1")}
	fp := func(ch ledger.Channel, a string) string {
		v, err := l.Fingerprint(ctx, ch, a)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if fp(ledger.Email, "Player@Example.com ") != fp(ledger.Email, "player@example.com") {
		t.Error("one mailbox, two fingerprints")
	}
	if fp(ledger.SMS, "+1 (555) 010-0200") != fp(ledger.SMS, "+15550100200") {
		t.Error("one number, two fingerprints")
	}
	if fp(ledger.Email, "a@example.com") == fp(ledger.Email, "b@example.com") {
		t.Error("two mailboxes, one fingerprint")
	}
	if fp(ledger.SMS, "+15550100200") == fp(ledger.Email, "+15550100200") {
		t.Error("channels share a fingerprint")
	}
	other := &fingerprint.Local{Key: []byte("k2")}
	v, _ := other.Fingerprint(ctx, ledger.SMS, "+15550100200")
	if v == fp(ledger.SMS, "+15550100200") {
		t.Error("the fingerprint does not depend on the key")
	}
	if strings.Contains(v, "5550100200") {
		t.Error("the fingerprint shows the number")
	}
}

// TestKMSFingerprint: under a KMS HMAC key, one mailbox is one 43-character
// fingerprint, and a failure names no address.
func TestKMSFingerprint(t *testing.T) {
	ctx := context.Background()
	c := kms.NewFromConfig(emulator.Config(t))
	key, err := c.CreateKey(ctx, &kms.CreateKeyInput{KeySpec: types.KeySpecHmac256, KeyUsage: types.KeyUsageTypeGenerateVerifyMac})
	if err != nil {
		t.Fatal(err)
	}
	k := &fingerprint.KMS{Client: c, KeyARN: aws.ToString(key.KeyMetadata.Arn)}
	a, err := k.Fingerprint(ctx, ledger.Email, "Player@example.com")
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Fingerprint(ctx, ledger.Email, "player@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if a != b || len(a) != 43 {
		t.Fatalf("fingerprints %q and %q, want one 43-character fingerprint", a, b)
	}
	if _, err := (&fingerprint.KMS{Client: c, KeyARN: "arn:aws:kms:us-east-1:000000000000:key/none"}).Fingerprint(ctx, ledger.SMS, "+15550100200"); err == nil || strings.Contains(err.Error(), "5550100200") {
		t.Fatalf("unknown key: %v, want an error without the number", err)
	}
}
