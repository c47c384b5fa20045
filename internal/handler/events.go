package handler

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/providerevent"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Events records the providers' delivery events (SES event publishing, End
// User Messaging SMS text events, through SNS to the provider-events queue)
// in the ledger. It never fails the whole batch. Per message:
//   - recorded, resolved or duplicate: acknowledged and counted;
//   - not ours (no dedupe key) or a type the ledger does not keep:
//     acknowledged, logged and counted with the reason;
//   - without a valid attempt proof (forged, or older than attempt proofs):
//     acknowledged, logged as a warning and counted, recorded nowhere;
//   - malformed, of an unknown type, for no row or for a row of another
//     channel: reported failed, logged with the reason and counted, so the
//     queue's redrive policy keeps it in the DLQ after its receive count;
//   - a storage error: reported failed and retried by the queue.
//
// EventsUseCase is the provider-events use case (*evidence.Recorder).
type EventsUseCase interface {
	RecordProviderEvent(ctx context.Context, p ledger.ProviderEvent, w ledger.Worker) (ledger.EventResult, error)
}

type Events struct {
	Deps
	UseCase EventsUseCase
}

// Handle records each event of one SQS batch and reports the ones to retry
// or dead-letter.
func (h *Events) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	worker, log := invocation(ctx, settings.Events, h.Log)
	return sqsBatch(ev.Records, func(rec events.SQSMessage) error {
		return h.record(ctx, rec, worker, log)
	}), nil
}

// refusal is why an event was not recorded, as the Reason dimension and log field spell it, and
// whether it is kept (dead-lettered). ok is false for an error that refuses nothing (storage):
// the event is retried.
func refusal(err error) (reason string, keep, ok bool) {
	switch {
	case errors.Is(err, providerevent.ErrNotOurs):
		return metrics.RefusedNotOurs, false, true
	case errors.Is(err, providerevent.ErrIgnored):
		return metrics.RefusedIgnoredType, false, true
	case errors.Is(err, ledger.ErrUnproven):
		return metrics.RefusedUnproven, false, true
	case errors.Is(err, providerevent.ErrUnsupported):
		return metrics.RefusedUnsupported, true, true
	case errors.Is(err, providerevent.ErrMalformed), errors.Is(err, ledger.ErrInvalidProviderEvent):
		return metrics.RefusedMalformed, true, true
	case errors.Is(err, ledger.ErrNotFound):
		return metrics.RefusedUnmatched, true, true
	case errors.Is(err, ledger.ErrEventChannel):
		return metrics.RefusedChannelMismatch, true, true
	}
	return "", false, false
}

// record handles one message; a non-nil error means "report as failed".
func (h *Events) record(ctx context.Context, rec events.SQSMessage, worker ledger.Worker, log *slog.Logger) error {
	receives, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	log = log.With("sqs_message_id", rec.MessageId, "receive_count", receives)
	p, err := providerevent.Decode([]byte(rec.Body))
	if err == nil {
		log = log.With("dedupe_key", p.Key, "channel", string(p.Channel), "event_type", p.Type, "provider_message_id", p.MessageID)
		var res ledger.EventResult
		if res, err = h.UseCase.RecordProviderEvent(ctx, p, worker); err == nil {
			h.count(p, res)
			log.Info("provider event handled", "outcome", string(res.Outcome), "kind", string(p.Kind), "state", string(res.Entry.State))
			return nil
		}
	}
	reason, keep, ok := refusal(err)
	if !ok {
		log.Error("recording the provider event failed; will retry", "error", err.Error())
		return err
	}
	_ = h.Metrics.Count(metrics.ProviderEventsRefused, map[string]string{metrics.DimReason: reason}, 1)
	if reason == metrics.RefusedUnproven {
		log.Warn("provider event refused: it does not prove an attempt of ours", "reason", reason, "detail", err.Error())
		return nil
	}
	if !keep {
		log.Info("provider event not kept", "reason", reason, "detail", err.Error())
		return nil
	}
	log.Warn("provider event refused", "reason", reason, "detail", err.Error(), "will_dead_letter", true)
	return err
}

// count emits the metrics of one handled event.
func (h *Events) count(p ledger.ProviderEvent, res ledger.EventResult) {
	if res.Outcome == ledger.OutcomeDuplicate {
		_ = h.Metrics.Count(metrics.DuplicateProviderEvents, nil, 1)
		return
	}
	_ = h.Metrics.Count(metrics.ProviderEvents, map[string]string{metrics.DimChannel: string(p.Channel), metrics.DimKind: string(p.Kind)}, 1)
	switch p.Kind {
	case ledger.KindBounced:
		bounceType, _, _ := strings.Cut(p.Detail, "/")
		_ = h.Metrics.Count(metrics.Bounces, map[string]string{metrics.DimBounceType: bounceType}, 1)
	case ledger.KindComplained:
		_ = h.Metrics.Count(metrics.Complaints, nil, 1)
	}
	if res.Outcome == ledger.OutcomeResolved {
		_ = h.Metrics.Count(metrics.ResolvedByEvent, map[string]string{metrics.DimChannel: string(p.Channel)}, 1)
	}
}
