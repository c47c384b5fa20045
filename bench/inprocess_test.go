package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The in-process benchmarks run the real handlers over the in-memory store,
// with real envelopes (AES-256-GCM, the wire JSON) whose data key comes from
// an in-process stand-in for KMS: they measure the code, not the network.

// inProcessService is a service on the memory stores with the envelope
// opener and an accepting transport.
func inProcessService() *ledgertest.UseCases {
	return &ledgertest.UseCases{Ports: assemble.Ports{
		Store: &memstore.Store{}, Content: &memstore.Content{},
		Opener:     handlertest.Opener(),
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: ackTransport{}, ledger.SMS: ackTransport{}},
		Clock:      time.Now, Policy: ledger.DefaultPolicy(),
	}}
}

// built is a use case built once, as a function builds it at start; a port
// the benchmark forgot panics.
func built[U any](uc U, err error) U {
	if err != nil {
		panic(err)
	}
	return uc
}

func quietLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

// sqsRecord is intent body i's first delivery, with a message id of the
// shape SQS gives.
func sqsRecord(i int, body string) events.SQSMessage {
	return handlertest.SQSMessage(fmt.Sprintf("0c5e3f4a-%04x-4b1d-9e2f-%012x", i&0xffff, i), body)
}

// streamRecord is the stream record of row key's claim, number i.
func streamRecord(i int, key string) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{handlertest.StreamRecord(fmt.Sprintf("%021d", i), "INSERT", "claimed", key)}}
}

const benchChunk = 1024

// BenchmarkClaim is the claim handler's cost per message: one SQS record
// per call (decode, validate, read, store content, conditional create, log).
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	sealer := handlertest.Sealer()
	h := &handler.Claim{Deps: handler.Deps{Log: quietLog(), Metrics: &metrics.Emitter{W: io.Discard}}, UseCase: built(inProcessService().Claimer()), Seals: handlertest.Seals()}
	benchChunked(b, func(i int, now time.Time) events.SQSEvent {
		_, _, body := handlertest.WireIntent(b, sealer, i, now)
		return events.SQSEvent{Records: []events.SQSMessage{sqsRecord(i, body)}}
	}, func(ev events.SQSEvent) ([]events.SQSBatchItemFailure, error) {
		resp, err := h.Handle(ctx, ev)
		return resp.BatchItemFailures, err
	})
}

// BenchmarkDispatch is the dispatch handler's cost per claimed row: one
// stream record per call (read, fetch and open the envelope, conditional
// move to dispatching, send, record the outcome, purge, log).
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	sealer := handlertest.Sealer()
	cases := inProcessService()
	h := handler.NewDispatch(handler.Deps{Log: quietLog(), Metrics: &metrics.Emitter{W: io.Discard}}, built(cases.Dispatcher()), dynamostore.Records{})
	benchChunked(b, func(i int, now time.Time) events.DynamoDBEvent {
		in, sealed, _ := handlertest.WireIntent(b, sealer, i, now)
		if _, err := cases.Claim(ctx, in, sealed, claimWorker); err != nil {
			b.Fatal(err)
		}
		return streamRecord(i, in.Key())
	}, func(ev events.DynamoDBEvent) ([]events.DynamoDBBatchItemFailure, error) {
		resp, err := h.Handle(ctx, ev)
		return resp.BatchItemFailures, err
	})
}

// benchChunked runs handle b.N times, on events that prepare builds
// benchChunk at a time with the timer stopped (prepare(i, now) is the event
// of iteration i). handle returns the batch's failures, which must be
// empty, and its error.
func benchChunked[E any, F any](b *testing.B, prepare func(i int, now time.Time) E, handle func(E) ([]F, error)) {
	evs := make([]E, benchChunk)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%benchChunk == 0 {
			b.StopTimer()
			now := time.Now()
			for j := range min(benchChunk, b.N-i) {
				evs[j] = prepare(i+j, now)
			}
			b.StartTimer()
		}
		failures, err := handle(evs[i%benchChunk])
		if err != nil || len(failures) > 0 {
			b.Fatalf("event %d: %v %v", i, err, failures)
		}
	}
}

// TestInProcessHandlers checks that the benchmarks' setup does what they
// claim to measure: the claim creates a claimed row, the dispatch sends and
// records accepted.
func TestInProcessHandlers(t *testing.T) {
	ctx := context.Background()
	sealer := handlertest.Sealer()
	cases := inProcessService()
	in, _, body := handlertest.WireIntent(t, sealer, 1, time.Now())
	claim := &handler.Claim{Deps: handler.Deps{Log: quietLog()}, UseCase: built(cases.Claimer()), Seals: handlertest.Seals()}
	if resp, err := claim.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{sqsRecord(1, body)}}); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("claim: %v %v", err, resp)
	}
	if e, err := cases.Store.Get(ctx, in.Key()); err != nil || e.State != ledger.Claimed {
		t.Fatalf("after claim: %v %v", e.State, err)
	}
	dispatch := handler.NewDispatch(handler.Deps{Log: quietLog()}, built(cases.Dispatcher()), dynamostore.Records{})
	if resp, err := dispatch.Handle(ctx, streamRecord(1, in.Key())); err != nil || len(resp.BatchItemFailures) > 0 {
		t.Fatalf("dispatch: %v %v", err, resp)
	}
	if e, err := cases.Store.Get(ctx, in.Key()); err != nil || e.State != ledger.Accepted || e.AckID == "" {
		t.Fatalf("after dispatch: %v %q %v", e.State, e.AckID, err)
	}
}

// inProcessReport runs the in-process benchmarks with testing.Benchmark, for
// go test's -benchtime (1s unless set), or sc.benchtime if set.
func inProcessReport(t *testing.T, rep *Report, sc scale) {
	if sc.benchtime != "" {
		f := flag.Lookup("test.benchtime")
		old := f.Value.String()
		if err := f.Value.Set(sc.benchtime); err != nil {
			t.Fatal(err)
		}
		defer f.Value.Set(old)
	}
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
