package handler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Claim turns SQS records into claims. It never fails the whole batch:
// each record that should be retried (or, after the queue's receive count,
// dead-lettered) is reported by message id.
type Claim struct {
	Deps
}

// Handle claims each record of one SQS batch and reports the ones to retry.
func (h *Claim) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	worker, log := invocation(ctx, settings.Claim, h.Log)
	return sqsBatch(ev.Records, func(rec events.SQSMessage) error {
		return h.claim(ctx, rec, worker, log)
	}), nil
}

// sqsBatch handles each message with one and reports the messages it fails
// by message id. The failure list is empty, never nil: nil encodes as
// "batchItemFailures":null, which AWS reads as no failures but some event
// sources (the local emulator among them) fail on, leaving the whole batch
// undeleted.
func sqsBatch(records []events.SQSMessage, one func(events.SQSMessage) error) events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, m := range records {
		if err := one(m); err != nil {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp
}

// claim handles one record; a non-nil error means "report as failed".
func (h *Claim) claim(ctx context.Context, rec events.SQSMessage, worker ledger.Worker, log *slog.Logger) error {
	receives, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	log = log.With("sqs_message_id", rec.MessageId, "receive_count", receives)
	in, sealed, err := intent.Decode([]byte(rec.Body))
	if err != nil {
		// Poison input: never half-applied, never acknowledged. The queue's
		// redrive policy moves it to the DLQ after the receive count; this
		// line is the recorded reason.
		log.Warn("intent rejected", "reason", err.Error(), "will_dead_letter", true)
		var fe *ledger.FieldError
		reason := "decode"
		if errors.As(err, &fe) {
			reason = fe.Field
		}
		_ = h.Metrics.Count(metrics.RejectedIntents, map[string]string{metrics.DimReason: reason}, 1)
		return err
	}
	log = log.With("challenge_id", in.ChallengeID, "channel", string(in.Channel), "dedupe_key", in.Key(), "content_hash", in.ContentHash)
	res, err := h.Svc.Claim(ctx, in, sealed, worker)
	switch {
	case errors.Is(err, ledger.ErrInvalidIntent):
		log.Warn("intent rejected", "reason", err.Error(), "will_dead_letter", true)
		_ = h.Metrics.Count(metrics.RejectedIntents, map[string]string{metrics.DimReason: "validation"}, 1)
		return err
	case err != nil:
		log.Error("claim failed; will retry", "error", err.Error())
		return err
	}
	log.Info("intent handled", "outcome", string(res.Outcome), "state", string(res.Entry.State))
	if res.Outcome == ledger.ClaimMismatch {
		_ = h.Metrics.Count(metrics.ContentMismatch, nil, 1)
	}
	return nil
}
