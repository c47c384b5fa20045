package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/pkg/envelope/wireform"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/intentseal"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Claim turns SQS records into claims. It never fails the whole batch:
// each record that should be retried (or, after the queue's receive count,
// dead-lettered) is reported by message id.
//
// Before any row exists, an intent's seal must verify: its intent_mac over
// every field the claim decides on and, from version 3, its envelope
// (intent.Binding). An intent whose fields or sealed content were changed
// after the producer sealed them (a copy read from the queue or its DLQ
// and replayed, through the queue or by invoking the function) is refused
// and dead-lettered with reason intent_mac: a row would let a tampered
// copy that arrives first block the genuine one.
type Claim struct {
	Deps
	UseCase ClaimUseCase
	// Seals verifies intent seals (intentseal.KMS under the intent key).
	// Required: without it every sealed intent is reported failed, never
	// claimed unchecked.
	Seals intentseal.Verifier
	// AcceptV1 admits intents of wire version 1, which seal nothing but
	// their content (ACCEPT_INTENT_V1): only while producers migrate.
	AcceptV1 bool
	// AcceptV2 admits intents of wire version 2, whose seal leaves the
	// envelope out (ACCEPT_INTENT_V2): only while producers migrate. A
	// version 2 copy with a changed envelope is claimed, then quarantined.
	AcceptV2 bool
	// Dictionaries are the preset dictionaries this stage's dispatch
	// opens with (internal/dictionaries). An envelope naming another is
	// dead-lettered with reason sealed_content.dict: claimed, it could
	// never be sent.
	Dictionaries wireform.Dictionaries
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
	d, err := intent.Decode([]byte(rec.Body))
	if err == nil {
		err = h.checkSeal(ctx, d)
	}
	if err == nil && !h.Dictionaries.Admits(d.Dict) {
		err = &ledger.FieldError{Field: "sealed_content.dict", Reason: "names a content dictionary this stage does not hold"}
	}
	var unverified *sealUnavailable
	if errors.As(err, &unverified) {
		log.Error("intent seal not checked; will retry", "error", err.Error())
		return err
	}
	if err != nil {
		return h.reject(log, err, "decode")
	}
	in, sealed := d.Intent, d.Sealed
	log = log.With("challenge_id", in.ChallengeID, "channel", string(in.Channel), "dedupe_key", in.Key(), "content_hash", in.ContentHash,
		"schema_version", d.Version)
	res, err := h.UseCase.Claim(ctx, in, sealed, worker)
	switch {
	case errors.Is(err, ledger.ErrInvalidIntent):
		// A refusal the claim's own time decides (a challenge that would
		// outlive MAX_CHALLENGE_LIFETIME, one issued after the claim):
		// no row, dead-lettered like poison input.
		return h.reject(log, err, "validation")
	case err != nil:
		log.Error("claim failed; will retry", "error", err.Error())
		return err
	}
	log.Info("intent handled", "outcome", string(res.Outcome), "state", string(res.Entry.State))
	if res.Outcome == ledger.OutcomeMismatch {
		_ = h.Metrics.Count(metrics.ContentMismatch, nil, 1)
	}
	return nil
}

// ClaimUseCase is the claim use case (*claim.Claimer).
type ClaimUseCase interface {
	Claim(ctx context.Context, in ledger.Intent, sealed []byte, w ledger.Worker) (claim.Result, error)
}

// sealUnavailable is a seal that could not be checked (KMS unreachable, no
// verifier): the message is retried, never claimed unchecked.
type sealUnavailable struct{ err error }

func (e *sealUnavailable) Error() string { return "intent seal: " + e.err.Error() }
func (e *sealUnavailable) Unwrap() error { return e.err }

// checkSeal refuses a sealed intent whose seal does not verify, and a
// version 1 or 2 intent where the stage does not accept it, each as a
// *ledger.FieldError (dead-lettered with its field as the reason). It
// never says which field differs: it cannot know, and the caller must not
// learn more than "not what was sealed".
func (h *Claim) checkSeal(ctx context.Context, d intent.Decoded) error {
	if d.Version == intent.SchemaVersionV1 {
		if h.AcceptV1 {
			return nil
		}
		return fmt.Errorf("%w: %w", intent.ErrUnsupportedVersion, &ledger.FieldError{Field: "schema_version",
			Reason: "version 1 seals nothing but the content and this stage does not accept it (ACCEPT_INTENT_V1)"})
	}
	if d.Version == intent.SchemaVersionV2 && !h.AcceptV2 {
		return fmt.Errorf("%w: %w", intent.ErrUnsupportedVersion, &ledger.FieldError{Field: "schema_version",
			Reason: "version 2 seals the fields but not the envelope and this stage does not accept it (ACCEPT_INTENT_V2)"})
	}
	if h.Seals == nil {
		return &sealUnavailable{errors.New("no verifier configured")}
	}
	err := h.Seals.Verify(ctx, d.Binding, d.Seal)
	switch {
	case errors.Is(err, intentseal.ErrMismatch):
		return &ledger.FieldError{Field: "intent_mac", Reason: "is not the seal of this intent (changed after sealing, or sealed with another key)"}
	case err != nil:
		return &sealUnavailable{err}
	}
	return nil
}

// reject reports an intent refused before any row: poison input, a seal
// that does not verify, or a claim-time refusal. It is never half-applied
// and never acknowledged; the queue's redrive policy moves it to the DLQ
// after the receive count, and this line is the recorded reason. The
// metric's Reason is the field at fault, or fallback when none is named.
func (h *Claim) reject(log *slog.Logger, err error, fallback string) error {
	log.Warn("intent rejected", "reason", err.Error(), "will_dead_letter", true)
	reason := fallback
	var fe *ledger.FieldError
	if errors.As(err, &fe) {
		reason = fe.Field
	}
	_ = h.Metrics.Count(metrics.RejectedIntents, map[string]string{metrics.DimReason: reason}, 1)
	return err
}
