// Package handlertest builds the events the functions receive, for tests
// and benchmarks that call the handlers in process: intents sealed with a
// fixed-key stand-in for KMS and published as SQS bodies, SQS messages and
// stream records of the ledger table.
//
// It is imported only by tests.
package handlertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/intentseal"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// KeyARN is the KMS key FixedKeyKMS claims to hold.
const KeyARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

var (
	dataKey = bytes.Repeat([]byte{7}, 32)
	// encryptedDataKey has the size AWS KMS returns for AES-256 data keys.
	encryptedDataKey = bytes.Repeat([]byte{9}, 184)
)

// FixedKeyKMS stands in for KMS in process: it hands out one fixed AES-256
// data key and decrypts every blob to it. Envelopes sealed with it are real
// (AES-256-GCM, the wire JSON); only their key is no secret.
type FixedKeyKMS struct{}

// GenerateDataKey returns the fixed data key.
func (FixedKeyKMS) GenerateDataKey(context.Context, *kms.GenerateDataKeyInput, ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return &kms.GenerateDataKeyOutput{Plaintext: bytes.Clone(dataKey), CiphertextBlob: encryptedDataKey, KeyId: aws.String(KeyARN)}, nil
}

// Decrypt returns the fixed data key, whatever the blob.
func (FixedKeyKMS) Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	return &kms.DecryptOutput{Plaintext: bytes.Clone(dataKey), KeyId: aws.String(KeyARN)}, nil
}

// Sealer seals with FixedKeyKMS.
func Sealer() *envelope.Sealer { return &envelope.Sealer{KMS: FixedKeyKMS{}, KeyID: KeyARN} }

// IntentKey is the intent-seal key of Seals: no secret, tests only.
var IntentKey = []byte("handlertest intent key")

// Seals seals and verifies intents under IntentKey, as the producer and
// the claim function do under the stack's intent key.
func Seals() *intentseal.Local { return &intentseal.Local{Key: IntentKey} }

// Opener opens what Sealer sealed.
func Opener() *envelope.Opener { return &envelope.Opener{KMS: FixedKeyKMS{}, KeyARN: KeyARN} }

// WireIntent returns email intent i (see ledgertest.Intent), expiring an
// hour after now and sealed by sealer, as the claim function receives it:
// the intent, its sealed content (the envelope's JSON) and the SQS body the
// producer publishes.
func WireIntent(tb testing.TB, sealer *envelope.Sealer, i int, now time.Time) (ledger.Intent, []byte, string) {
	tb.Helper()
	in, _ := ledgertest.Intent(i, ledger.Email, now, time.Hour)
	env, err := sealer.Seal(context.Background(), in.Key(), ledgertest.Message(i, ledger.Email))
	if err != nil {
		tb.Fatal(err)
	}
	body, err := SealedBody(in, env)
	if err != nil {
		tb.Fatal(err)
	}
	sealed, err := env.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return in, sealed, string(body)
}

// SealedBody is the wire form of in with its sealed content env, sealed
// by Seals as a producer seals it.
func SealedBody(in ledger.Intent, env envelope.Envelope) ([]byte, error) {
	b, err := intent.Binding(in, env)
	if err != nil {
		return nil, err
	}
	seal, err := Seals().Sign(context.Background(), b)
	if err != nil {
		return nil, err
	}
	return intent.Encode(in, env, seal)
}

// SQSMessage is a first delivery of body from the intents queue.
func SQSMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// StreamRecord is a ledger-table stream record: event name (INSERT or
// MODIFY) for the row key whose new image is in state.
func StreamRecord(seq, name, state, key string) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{EventName: name, EventSource: "aws:dynamodb", Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{dynamostore.AttrPK: events.NewStringAttribute(key)},
		NewImage: map[string]events.DynamoDBAttributeValue{
			dynamostore.AttrPK: events.NewStringAttribute(key), dynamostore.AttrState: events.NewStringAttribute(state),
		},
		SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES",
	}}
}
