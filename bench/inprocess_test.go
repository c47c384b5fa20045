package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// The in-process benchmarks run the real handlers over the in-memory store,
// with real envelopes (AES-256-GCM, the wire JSON) whose data key comes from
// an in-process stand-in for KMS: they measure the code, not the network.

const fakeKeyARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"

// fakeKMS hands out one fixed data key, with an encrypted blob of the size
// AWS KMS returns for AES-256 data keys.
type fakeKMS struct{}

var (
	fakeDataKey = bytes.Repeat([]byte{7}, 32)
	fakeEDK     = bytes.Repeat([]byte{9}, 184)
)

func (fakeKMS) GenerateDataKey(context.Context, *kms.GenerateDataKeyInput, ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return &kms.GenerateDataKeyOutput{Plaintext: bytes.Clone(fakeDataKey), CiphertextBlob: fakeEDK, KeyId: aws.String(fakeKeyARN)}, nil
}

func (fakeKMS) Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	return &kms.DecryptOutput{Plaintext: bytes.Clone(fakeDataKey), KeyId: aws.String(fakeKeyARN)}, nil
}

// inProcessService is a service on the memory stores with the envelope
// opener and an accepting transport.
func inProcessService() *ledger.Service {
	return &ledger.Service{
		Store: &memstore.Store{}, Content: &memstore.Content{},
		Opener:     &envelope.Opener{KMS: fakeKMS{}, KeyARN: fakeKeyARN},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: ackTransport{}, ledger.SMS: ackTransport{}},
		Clock:      time.Now, Policy: ledger.DefaultPolicy(),
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// wireIntent returns intent i as the claim function receives it: the
// intent, its sealed content and the SQS body.
func wireIntent(tb testing.TB, sealer *envelope.Sealer, i int, now time.Time) (ledger.Intent, []byte, string) {
	tb.Helper()
	in, _ := ledgertest.Intent(i, ledger.Email, now, time.Hour)
	env, err := sealer.Seal(context.Background(), in.Key(), ledgertest.Message(i, ledger.Email))
	if err != nil {
		tb.Fatal(err)
	}
	body, err := intent.Encode(in, env)
	if err != nil {
		tb.Fatal(err)
	}
	sealed, err := env.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return in, sealed, string(body)
}

func sqsRecord(i int, body string) events.SQSMessage {
	return events.SQSMessage{
		MessageId: fmt.Sprintf("0c5e3f4a-%04x-4b1d-9e2f-%012x", i&0xffff, i), Body: body,
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs",
	}
}

func streamRecord(i int, key string) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
		EventName: "INSERT", EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{
			Keys:           map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key)},
			NewImage:       map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key), "state": events.NewStringAttribute("claimed")},
			SequenceNumber: fmt.Sprintf("%021d", i), StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}}}
}

const benchChunk = 1024

// BenchmarkClaim is the claim handler's cost per message: one SQS record
// per call (decode, validate, read, store content, conditional create, log).
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	sealer := &envelope.Sealer{KMS: fakeKMS{}, KeyID: fakeKeyARN}
	h := &handler.Claim{Svc: inProcessService(), Log: quietLog(), Metrics: &metrics.Emitter{W: io.Discard}}
	evs := make([]events.SQSEvent, benchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchChunk == 0 {
			b.StopTimer()
			now := time.Now()
			for j := range min(benchChunk, b.N-i) {
				_, _, body := wireIntent(b, sealer, i+j, now)
				evs[j] = events.SQSEvent{Records: []events.SQSMessage{sqsRecord(i+j, body)}}
			}
			b.StartTimer()
		}
		resp, err := h.Handle(ctx, evs[i%benchChunk])
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("claim %d: %v %v", i, err, resp.BatchItemFailures)
		}
	}
}

// BenchmarkDispatch is the dispatch handler's cost per claimed row: one
// stream record per call (read, fetch and open the envelope, conditional
// move to dispatching, send, record the outcome, purge, log).
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	sealer := &envelope.Sealer{KMS: fakeKMS{}, KeyID: fakeKeyARN}
	svc := inProcessService()
	h := &handler.Dispatch{Svc: svc, Log: quietLog(), Metrics: &metrics.Emitter{W: io.Discard}}
	evs := make([]events.DynamoDBEvent, benchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchChunk == 0 {
			b.StopTimer()
			now := time.Now()
			for j := range min(benchChunk, b.N-i) {
				in, sealed, _ := wireIntent(b, sealer, i+j, now)
				if _, err := svc.Claim(ctx, in, sealed, claimWorker); err != nil {
					b.Fatal(err)
				}
				evs[j] = streamRecord(i+j, in.Key())
			}
			b.StartTimer()
		}
		resp, err := h.Handle(ctx, evs[i%benchChunk])
		if err != nil || len(resp.BatchItemFailures) > 0 {
			b.Fatalf("dispatch %d: %v %v", i, err, resp.BatchItemFailures)
		}
	}
}

// TestInProcessHandlers checks that the benchmarks' setup does what they
// claim to measure: the claim creates a claimed row, the dispatch sends and
// records accepted.
func TestInProcessHandlers(t *testing.T) {
	ctx := context.Background()
	sealer := &envelope.Sealer{KMS: fakeKMS{}, KeyID: fakeKeyARN}
	svc := inProcessService()
	in, _, body := wireIntent(t, sealer, 1, time.Now())
	claim := &handler.Claim{Svc: svc, Log: quietLog()}
	if resp, err := claim.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{sqsRecord(1, body)}}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("claim: %v %v", err, resp)
	}
	if e, err := svc.Store.Get(ctx, in.Key()); err != nil || e.State != ledger.Claimed {
		t.Fatalf("after claim: %v %v", e.State, err)
	}
	dispatch := &handler.Dispatch{Svc: svc, Log: quietLog()}
	if resp, err := dispatch.Handle(ctx, streamRecord(1, in.Key())); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("dispatch: %v %v", err, resp)
	}
	if e, err := svc.Store.Get(ctx, in.Key()); err != nil || e.State != ledger.Accepted || e.AckID == "" {
		t.Fatalf("after dispatch: %v %q %v", e.State, e.AckID, err)
	}
}

func inProcessReport(t *testing.T, rep *Report) {
	for _, bm := range []struct {
		name string
		f    func(*testing.B)
	}{{"BenchmarkClaim", BenchmarkClaim}, {"BenchmarkDispatch", BenchmarkDispatch}} {
		res := testing.Benchmark(bm.f)
		if res.N == 0 {
			t.Fatalf("%s did not run", bm.name)
		}
		t.Logf("%s\t%s\t%s", bm.name, res.String(), res.MemString())
		rep.Add(Figure{
			Name:     "Handler cost in-process: " + bm.name + " (memstore)",
			Measured: fmt.Sprintf("%s µs/op, %d allocs/op, %s KiB/op", trimFloat(float64(res.NsPerOp())/1000), res.AllocsPerOp(), trimFloat(float64(res.AllocedBytesPerOp())/1024)),
			Target:   "— (reported)",
			Verdict:  NoTarget,
			Note:     fmt.Sprintf("%d iterations; one record per call, real handler, real envelope (AES-256-GCM) with an in-process stand-in for KMS, JSON logs to io.Discard. Also `go test ./bench -run '^$' -bench . -benchmem`.", res.N),
		})
	}
}
