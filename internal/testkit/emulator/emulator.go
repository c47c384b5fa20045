// Package emulator points aws-sdk-go-v2 clients at a local AWS emulator
// (ministack or LocalStack) for tests. Only test code imports it (test files
// and internal/testkit/pipelinetest, the test harness).
//
// Endpoint selection, in order:
//
//  1. AWS_ENDPOINT_URL, if set, is used as is.
//  2. Otherwise, if something accepts TCP connections on 127.0.0.1:<port>,
//     http://127.0.0.1:<port> is used; the port is MINISTACK_PORT (as
//     localstack/ministack.sh reads it), default 4566.
//  3. Otherwise the test is skipped, or fails when CI is non-empty or
//     LEDGER_REQUIRE_EMULATOR=1, with a message saying how to start one
//     (make emulator-start, i.e. localstack/ministack.sh install && start).
//
// Credentials are always the static test/test pair; the region is AWS_REGION,
// default us-east-1. The endpoint is applied with the SDK's own BaseEndpoint
// mechanism (config.WithBaseEndpoint), so every service client built from the
// returned aws.Config uses it without a custom resolver.
package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/sdkhttp"
	"github.com/resetledger/resetledger/pkg/charclass"
)

// DefaultEndpoint is where ministack.sh (without MINISTACK_PORT) and the
// LocalStack compose file listen.
const DefaultEndpoint = "http://127.0.0.1:4566"

// localAddr is where localstack/ministack.sh starts ministack: port
// MINISTACK_PORT, default 4566.
func localAddr() string {
	if port := strings.TrimSpace(os.Getenv("MINISTACK_PORT")); port != "" {
		return "127.0.0.1:" + port
	}
	return "127.0.0.1:4566"
}

// Account is the account id the emulators use for the static test credentials.
const Account = "000000000000"

func startHint() string {
	return "no AWS emulator: AWS_ENDPOINT_URL is unset and nothing listens on " + localAddr() +
		"; start one with `make emulator-start` (localstack/ministack.sh install && localstack/ministack.sh start)" +
		" or set AWS_ENDPOINT_URL"
}

// Endpoint reports the emulator endpoint to use and whether one is available,
// following the package rules without touching a testing.TB.
func Endpoint() (string, bool) {
	if ep := strings.TrimSpace(os.Getenv("AWS_ENDPOINT_URL")); ep != "" {
		return ep, true
	}
	addr := localAddr()
	conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
	if err != nil {
		return "", false
	}
	_ = conn.Close()
	return "http://" + addr, true
}

// Required reports whether a missing emulator must fail the test instead of
// skipping it: CI is non-empty or LEDGER_REQUIRE_EMULATOR=1.
func Required() bool {
	return os.Getenv("CI") != "" || os.Getenv("LEDGER_REQUIRE_EMULATOR") == "1"
}

// Config returns an aws.Config for the emulator, or skips/fails t when none is
// reachable (see the package documentation).
func Config(t testing.TB) aws.Config {
	t.Helper()
	ep, ok := Endpoint()
	if !ok {
		if Required() {
			t.Fatal(startHint())
		}
		t.Skip(startHint())
	}
	region := os.Getenv("AWS_REGION")
	if region == "" {
		region = "us-east-1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every request with a body of its own (see internal/sdkhttp), as the functions send them.
	cfg, err := sdkhttp.LoadDefaultConfig(ctx,
		config.WithRegion(region),
		config.WithBaseEndpoint(ep),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		// Never consult ~/.aws profiles on a developer machine.
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		t.Fatalf("emulator: load AWS config for %s: %v", ep, err)
	}
	return cfg
}

// suffixAlphabet is lower-case alphanumerics: valid in DynamoDB table names
// ([a-zA-Z0-9_.-]), SQS queue names ([a-zA-Z0-9_-]) and most other resource
// names, and case-insensitive-safe.
const suffixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// SuffixLen is the length of the random suffix UniqueName appends.
const SuffixLen = 10

// maxNameLen is the tightest limit among the names we create: SQS queue
// names are at most 80 characters (DynamoDB tables allow 255), and a FIFO
// queue needs room for ".fifo".
const maxNameLen = 80 - len(".fifo")

// queueNameChars is the alphabet of SQS queue names (a subset of DynamoDB's
// table-name alphabet).
var queueNameChars = charclass.AlnumPlus("-_")

// UniqueName returns prefix + "-" + a 10-character random suffix
// (lower-case letters and digits), valid as a DynamoDB table name and an SQS
// queue name, unique per call. Characters of prefix not allowed in SQS queue
// names are replaced by '-', and a long prefix is truncated so the result
// fits 75 characters (80 minus room for a ".fifo" suffix). An empty prefix
// becomes "t".
func UniqueName(t testing.TB, prefix string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range prefix {
		if queueNameChars.Has(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	p := b.String()
	if p == "" {
		p = "t"
	}
	if limit := maxNameLen - 1 - SuffixLen; len(p) > limit {
		p = p[:limit]
	}
	buf := make([]byte, SuffixLen)
	if _, err := rand.Read(buf); err != nil {
		t.Fatalf("emulator: random suffix: %v", err)
	}
	for i, c := range buf {
		buf[i] = suffixAlphabet[int(c)%len(suffixAlphabet)]
	}
	return p + "-" + string(buf)
}

// KMSKey creates a symmetric encryption key in the emulator, described by a
// UniqueName from prefix, schedules its deletion when the test ends, and
// returns its ARN.
func KMSKey(t testing.TB, client *kms.Client, prefix string) string {
	t.Helper()
	return createKey(t, client, prefix, kmstypes.KeySpecSymmetricDefault, kmstypes.KeyUsageTypeEncryptDecrypt)
}

// HMACKey creates an HMAC_256 key (usage GENERATE_VERIFY_MAC, the attempt-proof
// key's kind) in the emulator, schedules its deletion when the test ends, and
// returns its ARN.
func HMACKey(t testing.TB, client *kms.Client, prefix string) string {
	t.Helper()
	return createKey(t, client, prefix, kmstypes.KeySpecHmac256, kmstypes.KeyUsageTypeGenerateVerifyMac)
}

// createKey creates a key of spec and usage, described by a UniqueName from
// prefix, and schedules its deletion when the test ends.
func createKey(t testing.TB, client *kms.Client, prefix string, spec kmstypes.KeySpec, usage kmstypes.KeyUsageType) string {
	t.Helper()
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{
		Description: aws.String(UniqueName(t, prefix)), KeySpec: spec, KeyUsage: usage,
	})
	if err != nil {
		if strings.Contains(err.Error(), "cryptography") {
			t.Fatalf("emulator: CreateKey %s: the emulator's KMS lacks the Python cryptography package, which localstack/requirements.txt pins: run localstack/ministack.sh install, then restart the emulator (%v)", spec, err)
		}
		t.Fatalf("emulator: CreateKey %s: %v", spec, err)
	}
	arn := aws.ToString(out.KeyMetadata.Arn)
	t.Cleanup(func() {
		_, _ = client.ScheduleKeyDeletion(context.Background(), &kms.ScheduleKeyDeletionInput{KeyId: aws.String(arn), PendingWindowInDays: aws.Int32(7)})
	})
	return arn
}

// Queue creates an SQS queue in the emulator named by UniqueName from
// prefix, deletes it when the test ends, and returns its URL.
func Queue(t testing.TB, client *sqs.Client, prefix string) string {
	t.Helper()
	out, err := client.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(UniqueName(t, prefix))})
	if err != nil {
		t.Fatalf("emulator: CreateQueue: %v", err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		_, _ = client.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: aws.String(url)})
	})
	return url
}

// Secret creates a Secrets Manager secret in the emulator named by
// UniqueName from prefix, with a random 64-character value (as the stack's
// webhook signing secret), deletes it when the test ends, and returns its
// ARN and value.
func Secret(t testing.TB, client *secretsmanager.Client, prefix string) (arn, value string) {
	t.Helper()
	buf := make([]byte, 32)
	_, _ = rand.Read(buf)
	value = hex.EncodeToString(buf)
	out, err := client.CreateSecret(context.Background(), &secretsmanager.CreateSecretInput{
		Name: aws.String(UniqueName(t, prefix)), SecretString: aws.String(value),
	})
	if err != nil {
		t.Fatalf("emulator: CreateSecret: %v", err)
	}
	arn = aws.ToString(out.ARN)
	t.Cleanup(func() {
		_, _ = client.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(arn), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	return arn, value
}

// KeepExpired turns TTL off on table. A test whose clock is
// ledgertest.Epoch, days in the past, writes items whose TTL has passed by
// the real clock, which the emulator's TTL sweep (once a minute) deletes:
// sealed content could vanish between a claim and its dispatch.
func KeepExpired(t testing.TB, client *dynamodb.Client, table string) {
	t.Helper()
	_, err := client.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(false)},
	})
	if err != nil {
		t.Fatalf("emulator: turn TTL off on %s: %v", table, err)
	}
}
