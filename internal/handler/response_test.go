package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// The batch responses are what the event source reads back. An all-success
// batch must encode as an empty list: AWS accepts null too, but ministack
// 1.5.33 iterates batchItemFailures without a null check, fails on null and
// then deletes nothing, so every good message is received again and, after
// the redrive count, dead-lettered.

const testKeyARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// dataKeyKMS hands out one fixed data key: enough to seal, no network.
type dataKeyKMS struct{}

func (dataKeyKMS) GenerateDataKey(context.Context, *kms.GenerateDataKeyInput, ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return &kms.GenerateDataKeyOutput{
		Plaintext: bytes.Repeat([]byte{7}, 32), CiphertextBlob: bytes.Repeat([]byte{9}, 184), KeyId: aws.String(testKeyARN),
	}, nil
}

func memService(now time.Time) (*ledger.Service, *ledgertest.Transport) {
	tr := &ledgertest.Transport{}
	return &ledger.Service{
		Store: &memstore.Store{}, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
		Clock:      func() time.Time { return now }, Policy: ledger.DefaultPolicy(),
	}, tr
}

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// sqsBody is challenge i's intent as the producer publishes it.
func sqsBody(t *testing.T, i int, now time.Time) string {
	t.Helper()
	in, _ := ledgertest.Intent(i, ledger.Email, now, time.Hour)
	env, err := (&envelope.Sealer{KMS: dataKeyKMS{}, KeyID: testKeyARN}).Seal(context.Background(), in.Key(), ledgertest.Message(i, ledger.Email))
	if err != nil {
		t.Fatal(err)
	}
	body, err := intent.Encode(in, env)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func sqsMessage(id, body string) events.SQSMessage {
	return events.SQSMessage{MessageId: id, Body: body, EventSource: "aws:sqs", Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

func encode(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestClaimResponseEncoding(t *testing.T) {
	now := time.Now()
	good, other := sqsBody(t, 1, now), sqsBody(t, 2, now)
	for _, tc := range []struct {
		name    string
		records []events.SQSMessage
		want    string
	}{
		{"empty batch", nil, `{"batchItemFailures":[]}`},
		// a new claim, a redelivery of it (duplicate) and another new claim
		{"all success", []events.SQSMessage{sqsMessage("m-1", good), sqsMessage("m-2", good), sqsMessage("m-3", other)}, `{"batchItemFailures":[]}`},
		{"one poison", []events.SQSMessage{sqsMessage("m-1", good), sqsMessage("m-bad", `{"note":"not an intent"}`)},
			`{"batchItemFailures":[{"itemIdentifier":"m-bad"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, _ := memService(now)
			h := &Claim{Svc: svc, Log: quiet(), Metrics: &metrics.Emitter{W: io.Discard}}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: tc.records})
			if err != nil {
				t.Fatal(err)
			}
			if got := encode(t, resp); got != tc.want {
				t.Errorf("response %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDispatchResponseEncoding(t *testing.T) {
	now := time.Now()
	ctx := context.Background()
	svc, tr := memService(now)
	in, sealed := ledgertest.Intent(1, ledger.Email, now, time.Hour)
	if _, err := svc.Claim(ctx, in, sealed, "claim/test"); err != nil {
		t.Fatal(err)
	}
	record := func(seq, name, state, key string) events.DynamoDBEventRecord {
		return events.DynamoDBEventRecord{EventName: name, EventSource: "aws:dynamodb", Change: events.DynamoDBStreamRecord{
			Keys:           map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key)},
			NewImage:       map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key), "state": events.NewStringAttribute(state)},
			SequenceNumber: seq, StreamViewType: "NEW_AND_OLD_IMAGES",
		}}
	}
	h := &Dispatch{Svc: svc, Log: quiet(), Metrics: &metrics.Emitter{W: io.Discard}}
	for _, tc := range []struct {
		name    string
		records []events.DynamoDBEventRecord
		want    string
	}{
		{"empty batch", nil, `{"batchItemFailures":[]}`},
		// a claim that is sent, then a record dispatch skips
		{"all success", []events.DynamoDBEventRecord{
			record("100", "INSERT", "claimed", in.Key()),
			record("101", "MODIFY", "accepted", in.Key()),
		}, `{"batchItemFailures":[]}`},
		{"unreadable", []events.DynamoDBEventRecord{record("102", "INSERT", "claimed", "not-a-dedupe-key")},
			`{"batchItemFailures":[{"itemIdentifier":"102"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := h.Handle(ctx, events.DynamoDBEvent{Records: tc.records})
			if err != nil {
				t.Fatal(err)
			}
			if got := encode(t, resp); got != tc.want {
				t.Errorf("response %s, want %s", got, tc.want)
			}
		})
	}
	if n := tr.Recorded(in.Key()); n != 1 {
		t.Errorf("transport recorded %d sends, want 1 (the all-success batch did dispatch)", n)
	}
}
