package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/envelope"
)

// throughputReport runs the real claim handler over sc.throughputMsgs
// messages in SQS batches of 10 built in memory (intents sealed with the emulator's KMS beforehand), and in the
// same run the raw conditional PutItem rate on the same endpoint, both from
// one goroutine as one Lambda instance would (sc.rawPuts per round, a round
// before and one after the claims).
func throughputReport(t *testing.T, rep *Report, sc scale) {
	throughputMsgs, rawPuts := sc.throughputMsgs, sc.rawPuts
	ctx := context.Background()
	r := newRig(t, "bench-tput")
	kc := kms.NewFromConfig(r.cfg)
	sealer := &envelope.Sealer{KMS: kc, KeyID: emulator.KMSKey(t, kc, "bench")}
	now := time.Now()
	batches := make([]events.SQSEvent, 0, throughputMsgs/10)
	for i := 0; i < throughputMsgs; i += 10 {
		var ev events.SQSEvent
		for j := i; j < i+10; j++ {
			_, _, body := handlertest.WireIntent(t, sealer, j, now)
			ev.Records = append(ev.Records, sqsRecord(j, body))
		}
		batches = append(batches, ev)
	}
	cases := r.service(r.db, nil, nil, nil)
	cases.Clock = time.Now
	h := &handler.Claim{Deps: handler.Deps{Log: quietLog(), Metrics: &metrics.Emitter{W: io.Discard}}, UseCase: built(cases.Claimer()), Seals: handlertest.Seals()}

	// The raw put writes an item shaped like a claim (same store encoding).
	template := items(t, claimedRow, 1<<20, 1, now)[0]
	raw := func() (int, time.Duration) {
		start := time.Now()
		for range rawPuts {
			it := maps.Clone(template)
			var k [32]byte
			_, _ = rand.Read(k[:])
			it["pk"] = &types.AttributeValueMemberS{Value: hex.EncodeToString(k[:])}
			if _, err := r.raw.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: &r.ledger, Item: it,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": "pk"},
			}); err != nil {
				t.Fatal(err)
			}
		}
		return rawPuts, time.Since(start)
	}

	n1, d1 := raw()
	r.counter.Reset()
	start := time.Now()
	for _, ev := range batches {
		resp, err := h.Handle(ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			t.Fatalf("claim batch: %v, %d failures", err, len(resp.BatchItemFailures))
		}
	}
	claimTime := time.Since(start)
	counts := r.counter.Snapshot()
	n2, d2 := raw()

	rawRate := float64(n1+n2) / (d1 + d2).Seconds()
	msgRate := float64(throughputMsgs) / claimTime.Seconds()
	perMsg := float64(counts.Total()) / float64(throughputMsgs)
	ratio := msgRate * perMsg / rawRate
	rep.Add(Figure{
		Name:     "Claim throughput vs raw conditional PutItem (emulator, batches of 10)",
		Measured: fmt.Sprintf("%.2f", ratio),
		Target:   "≥ 0.8",
		Verdict:  Check(ratio >= 0.8),
		Note: fmt.Sprintf("(messages/s × requests per message) / raw requests/s = (%.0f × %s) / %.0f. "+
			"Claim: %d messages through handler.Claim (intent.Decode, claim.Claimer, dynamostore, JSON logs to io.Discard) in %s; requests: %s. "+
			"Raw: %d conditional PutItems of a claim-shaped item, half before and half after the claims, %.0f requests/s. "+
			"One goroutine each; SDK retries during the claims: %d.",
			msgRate, trimFloat(perMsg), rawRate, throughputMsgs, claimTime.Round(time.Millisecond),
			counts.Format(map[string]string{r.ledger: "ledger", r.content: "content"}), n1+n2, rawRate,
			r.counter.Attempts()-counts.Total()),
	})
}
