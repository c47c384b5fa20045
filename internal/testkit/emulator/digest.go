package emulator

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// SigningKey creates an ECC_NIST_P256 SIGN_VERIFY key (the digest key's
// kind) in the emulator, schedules its deletion when the test ends, and
// returns its ARN.
func SigningKey(t testing.TB, client *kms.Client, prefix string) string {
	t.Helper()
	return createKey(t, client, prefix, kmstypes.KeySpecEccNistP256, kmstypes.KeyUsageTypeSignVerify)
}

// S3 returns an S3 client on the emulator (path-style addressing, which a
// local endpoint needs).
func S3(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

// LockedBucket creates a bucket with Object Lock enabled (and so
// versioning), named by UniqueName from prefix in lower case, and returns
// its name. It is not deleted: its objects are locked in COMPLIANCE mode.
func LockedBucket(t testing.TB, client *s3.Client, prefix string) string {
	t.Helper()
	name := strings.ToLower(strings.ReplaceAll(UniqueName(t, prefix), "_", "-"))
	if _, err := client.CreateBucket(context.Background(), &s3.CreateBucketInput{
		Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true),
	}); err != nil {
		t.Fatalf("emulator: CreateBucket with Object Lock: %v", err)
	}
	return name
}
