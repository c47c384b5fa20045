package kmsseal_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestClaimRetriesEveryKMSFailureButAnInvalidMAC runs the claim function's
// handler with the production verifier (kmsseal on the SDK's KMS client)
// against the KMS double, failing in each way of verifyFailures, on a
// genuine intent sealed under the double's key:
//
//   - an invalid MAC (KMSInvalidMacException, MacValid false) refuses the
//     intent as tampered: reported failed (the queue dead-letters it),
//     counted as RejectedIntents with reason intent_mac, no row;
//   - every other failure reports the message failed for a retry, counts
//     no rejection, leaves no row (never claimed unchecked), and the same
//     message redelivered once KMS answers again is claimed.
//
// Nothing is sent either way.
func TestClaimRetriesEveryKMSFailureButAnInvalidMAC(t *testing.T) {
	now := time.Now()
	_, _, body := handlertest.WireIntent(t, handlertest.Sealer(), 1, now)
	in, _ := ledgertest.Intent(1, ledger.Email, now, time.Hour)
	for _, f := range verifyFailures() {
		t.Run(f.name, func(t *testing.T) {
			d := newDouble(t, handlertest.IntentKey)
			d.setFault(f.answer)
			tr := &ledgertest.Transport{}
			cases := &ledgertest.UseCases{Ports: assemble.Ports{
				Store: &memstore.Store{}, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
				Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
				Clock:      func() time.Time { return now }, Policy: ledger.DefaultPolicy(),
			}}
			var logs, counts bytes.Buffer
			h := &handler.Claim{
				Deps:    handler.Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil)), Metrics: &metrics.Emitter{W: &counts}},
				UseCase: cases,
				Seals:   &kmsseal.KMS{Client: d.client(), KeyARN: keyARN},
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if f.ctx != nil {
				ctx, cancel = f.ctx()
			}
			defer cancel()
			resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-1", body)}})
			if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-1" {
				t.Fatalf("first delivery: %+v %v, want m-1 reported failed", resp, err)
			}
			if _, err := cases.Store.Get(context.Background(), in.Key()); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("a row exists after a seal KMS did not confirm (get: %v)", err)
			}
			refused := strings.Contains(counts.String(), `"RejectedIntents":1`) && strings.Contains(counts.String(), `"Reason":"intent_mac"`)
			retried := strings.Contains(logs.String(), "intent seal not checked; will retry")
			switch {
			case f.mismatch && (!refused || retried):
				t.Fatalf("an invalid MAC: refused as intent_mac %v, logged for a retry %v; metrics %s", refused, retried, counts.String())
			case !f.mismatch && (refused || strings.Contains(counts.String(), "RejectedIntents")):
				t.Fatalf("a KMS failure refused the intent as tampered: %s", counts.String())
			case !f.mismatch && !retried:
				t.Fatalf("a KMS failure not logged for a retry: %s", logs.String())
			}
			if !f.mismatch {
				d.setFault(nil)
				again := handlertest.SQSMessage("m-1", body)
				again.Attributes["ApproximateReceiveCount"] = "2"
				resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{again}})
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("redelivered once KMS answers: %+v %v", resp, err)
				}
				if row, err := cases.Store.Get(context.Background(), in.Key()); err != nil || row.State != ledger.Claimed {
					t.Fatalf("redelivered once KMS answers: row %v, %v; want claimed", row.State, err)
				}
			}
			if tr.Calls() != 0 {
				t.Fatal("the claim sent something")
			}
		})
	}
}
