package envelope_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestEmulatorSealOpen(t *testing.T) {
	client := kms.NewFromConfig(emulator.Config(t))
	ctx := context.Background()
	arn := emulator.KMSKey(t, client, "envelope-test")
	otherARN := emulator.KMSKey(t, client, "envelope-test")

	s := &envelope.Sealer{KMS: client, KeyID: arn}
	o := &envelope.Opener{KMS: client, KeyARN: arn}
	m := ledgertest.Message(11, ledger.Email)

	e, err := s.Seal(ctx, keyA, m)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	if e.KMSKeyID != arn {
		t.Errorf("kms_key_id = %q, want the key ARN %q", e.KMSKeyID, arn)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{ledgertest.Canary, m.To, m.Body} {
		if bytes.Contains(b, []byte(secret)) {
			t.Fatalf("envelope contains plaintext %q", secret)
		}
	}

	got, err := o.Open(ctx, keyA, b)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if got != m {
		t.Fatalf("Open = %+v, want %+v", got, m)
	}

	t.Run("tampered ciphertext", func(t *testing.T) {
		bad := e
		bad.CT = bytes.Clone(e.CT)
		bad.CT[0] ^= 0x01
		tb, _ := json.Marshal(bad)
		_, err := o.Open(ctx, keyA, tb)
		assertUnavailable(t, err, m)
	})
	t.Run("tampered data key", func(t *testing.T) {
		bad := e
		bad.EDK = bytes.Clone(e.EDK)
		bad.EDK[len(bad.EDK)-1] ^= 0x01
		tb, _ := json.Marshal(bad)
		_, err := o.Open(ctx, keyA, tb)
		assertUnavailable(t, err, m)
	})
	t.Run("other dedupe key", func(t *testing.T) {
		_, err := o.Open(ctx, keyB, b)
		assertUnavailable(t, err, m)
	})
	t.Run("opener pinned to another KMS key", func(t *testing.T) {
		_, err := (&envelope.Opener{KMS: client, KeyARN: otherARN}).Open(ctx, keyA, b)
		assertUnavailable(t, err, m)
	})
	t.Run("KMS enforces the encryption context", func(t *testing.T) { kmsEnforcesContext(t, ctx, client, arn, e) })
}

// kmsEnforcesContext: independent of the GCM AAD, KMS itself must refuse the
// data key under another dedupe key's context, and give it under the sealing
// one.
func kmsEnforcesContext(t *testing.T, ctx context.Context, client *kms.Client, arn string, e envelope.Envelope) {
	// Independent of the GCM AAD: KMS itself must refuse the data key
	// under another dedupe key's context.
	_, err := client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    e.EDK,
		KeyId:             aws.String(arn),
		EncryptionContext: envelope.EncryptionContext(keyB),
	})
	var invalid *types.InvalidCiphertextException
	if !errors.As(err, &invalid) {
		t.Fatalf("Decrypt under another context = %v, want InvalidCiphertextException", err)
	}
	out, err := client.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    e.EDK,
		KeyId:             aws.String(arn),
		EncryptionContext: envelope.EncryptionContext(keyA),
	})
	if err != nil || len(out.Plaintext) != 32 {
		t.Fatalf("Decrypt under the sealing context = %v", err)
	}
}
