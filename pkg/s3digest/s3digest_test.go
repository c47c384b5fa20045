package s3digest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/kmsdigest"
	"github.com/resetledger/resetledger/pkg/s3digest"
)

// TestOnEmulator: digests signed by the emulator's KMS with an
// ECC_NIST_P256 key verify offline with the key's public key; a digest is
// never overwritten; a locked digest cannot be deleted.
func TestOnEmulator(t *testing.T) {
	cfg := emulator.Config(t)
	ctx := context.Background()
	kc := kms.NewFromConfig(cfg)
	sc := emulator.S3(cfg)
	keyARN := emulator.SigningKey(t, kc, "digest-key")
	bucket := emulator.LockedBucket(t, sc, "digests")
	store := s3digest.New(sc, bucket)
	w := &digest.Writer{Store: store, Signer: kmsdigest.New(kc, keyARN), Clock: time.Now, Retention: time.Hour}
	for i := range 3 {
		b := digest.Batch{Rows: []digest.Row{{Key: string(rune('a' + i)), Count: 1, Head: "h", RetainUntil: time.Now().Add(2 * time.Hour).Unix()}}}
		if _, err := w.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	v, err := kmsdigest.Verifier(ctx, kc, keyARN)
	if err != nil {
		t.Fatal(err)
	}
	c, err := digest.Load(ctx, store, v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digests != 3 || len(c.Findings) != 0 {
		t.Fatalf("digests %d findings %v", c.Digests, c.Findings)
	}

	t.Run("another key's signature does not verify", func(t *testing.T) {
		other, err := kmsdigest.Verifier(ctx, kc, emulator.SigningKey(t, kc, "other-key"))
		if err != nil {
			t.Fatal(err)
		}
		c, err := digest.Load(ctx, store, other)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Findings) != 3 {
			t.Fatalf("findings %v", c.Findings)
		}
	})
	t.Run("a digest is never overwritten", func(t *testing.T) {
		err := store.Put(ctx, 2, []byte("forged"), time.Now().Add(time.Hour))
		if !errors.Is(err, digest.ErrExists) {
			t.Fatalf("Put over digest 2: %v", err)
		}
		raw, _ := store.Get(ctx, 2)
		if _, _, err := v.Open(raw); err != nil {
			t.Fatalf("digest 2 after the overwrite attempt: %v", err)
		}
	})
	t.Run("a locked digest cannot be deleted", func(t *testing.T) {
		head, err := sc.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: aws.String(digest.ObjectName(1))})
		if err != nil {
			t.Fatal(err)
		}
		if head.ObjectLockMode != "COMPLIANCE" || head.ObjectLockRetainUntilDate == nil || !head.ObjectLockRetainUntilDate.After(time.Now().Add(time.Hour)) {
			t.Fatalf("lock %q until %v", head.ObjectLockMode, head.ObjectLockRetainUntilDate)
		}
		_, err = sc.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: aws.String(digest.ObjectName(1)), VersionId: head.VersionId})
		if err == nil {
			t.Fatal("deleting a locked digest version succeeded")
		}
	})
}
