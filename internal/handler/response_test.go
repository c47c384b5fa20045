package handler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The batch responses are what the event source reads back. An all-success
// batch must encode as an empty list: AWS accepts null too, but ministack
// 1.5.33 iterates batchItemFailures without a null check, fails on null and
// then deletes nothing, so every good message is received again and, after
// the redrive count, dead-lettered.

func memUseCases(now time.Time) (*ledgertest.UseCases, *ledgertest.Transport) {
	tr := &ledgertest.Transport{}
	return &ledgertest.UseCases{Ports: assemble.Ports{
		Store: &memstore.Store{}, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
		Clock:      func() time.Time { return now }, Policy: ledger.DefaultPolicy(),
	}}, tr
}

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// sqsBody is challenge i's intent as the producer publishes it.
func sqsBody(t *testing.T, i int, now time.Time) string {
	t.Helper()
	_, _, body := handlertest.WireIntent(t, handlertest.Sealer(), i, now)
	return body
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
		{"all success", []events.SQSMessage{handlertest.SQSMessage("m-1", good), handlertest.SQSMessage("m-2", good), handlertest.SQSMessage("m-3", other)}, `{"batchItemFailures":[]}`},
		{"one poison", []events.SQSMessage{handlertest.SQSMessage("m-1", good), handlertest.SQSMessage("m-bad", `{"note":"not an intent"}`)},
			`{"batchItemFailures":[{"itemIdentifier":"m-bad"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases, _ := memUseCases(now)
			h := &Claim{Deps: Deps{Log: quiet(), Metrics: &metrics.Emitter{W: io.Discard}}, UseCase: cases, Seals: handlertest.Seals()}
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
	cases, tr := memUseCases(now)
	in, sealed := ledgertest.Intent(1, ledger.Email, now, time.Hour)
	if _, err := cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
		t.Fatal(err)
	}
	record := handlertest.StreamRecord
	h := NewDispatch(Deps{Log: quiet(), Metrics: &metrics.Emitter{W: io.Discard}}, cases, dynamostore.Records{})
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
