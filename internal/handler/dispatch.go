package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/dispatchqueue"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/outcome"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Dispatch dispatches newly claimed rows from the ledger table's stream, and
// the rows the dispatch queue hands back (wake-ups of deferred rows and
// reconcile's re-drives). Duplicate records, messages and invocations are
// harmless: the conditional write to dispatching decides who sends.
type Dispatch struct {
	Deps
	UseCase DispatchUseCase
	records RowStream
}

// NewDispatch returns the dispatch handler of use case uc, reading the
// ledger table's stream records with records (dynamostore.Records).
func NewDispatch(d Deps, uc DispatchUseCase, records RowStream) *Dispatch {
	return &Dispatch{Deps: d, UseCase: uc, records: records}
}

// RowStream reads the ledger table's stream records: which row a record is
// of and whether it triggers dispatch, and the row its new image holds. The
// store that writes the table knows its attribute names
// (dynamostore.Records); the handler imports no store.
type RowStream interface {
	DispatchKey(rec events.DynamoDBEventRecord) (key string, trigger bool, err error)
	Row(image map[string]events.DynamoDBAttributeValue) (ledger.Entry, error)
}

// DispatchUseCase is the dispatch use case (*dispatch.Dispatcher).
type DispatchUseCase interface {
	Dispatch(ctx context.Context, key string, w ledger.Worker) (ledger.DispatchResult, error)
	DispatchRow(ctx context.Context, row ledger.Entry, w ledger.Worker) (ledger.DispatchResult, error)
	RescheduleNotDue(ctx context.Context, res ledger.DispatchResult) error
	Read(ctx context.Context, src ledger.Source, t time.Time) error
}

// Handle dispatches the claimed rows of one batch of stream records, in
// order, and reports the first record that failed. It then records how late
// the oldest claim it handled arrived (dispatch.Dispatcher.Read), so reconcile
// does not hand back rows the stream is still delivering.
func (h *Dispatch) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	worker, log := invocation(ctx, settings.Dispatch, h.Log)
	var oldest time.Time
	defer func() { h.read(ctx, ledger.FromStream, oldest, log) }()
	for _, rec := range ev.Records {
		key, ok, err := h.records.DispatchKey(rec)
		if err != nil {
			// A record we cannot read is not ours to drop silently: fail it so
			// the event source retries, then sends it to the on-failure queue.
			log.Error("unreadable stream record", "sequence_number", rec.Change.SequenceNumber, "reason", err.Error())
			return streamFailedAt(rec), nil
		}
		if !ok {
			continue
		}
		res, written, err := h.dispatch(ctx, key, rec.Change.NewImage, worker, log)
		if err != nil {
			// Stream order matters: report the first failure; the records
			// after it are redelivered with it.
			return streamFailedAt(rec), nil
		}
		if res.Outcome == ledger.OutcomeContradicted {
			continue // not the stream's: it moves no mark
		}
		if !written.IsZero() && (oldest.IsZero() || written.Before(oldest)) {
			oldest = written
		}
	}
	// An empty list, never nil (see sqsBatch).
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}, nil
}

// streamFailedAt reports rec, by its sequence number, as the batch's first
// failed record.
func streamFailedAt(rec events.DynamoDBEventRecord) events.DynamoDBEventResponse {
	return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: rec.Change.SequenceNumber}}}
}

// HandleQueue dispatches the rows named by dispatch queue messages. A
// message that is not one (it names no dedupe key) is reported failed, so
// that it ends in the queue's DLQ as evidence rather than being dropped.
func (h *Dispatch) HandleQueue(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	worker, log := invocation(ctx, settings.Dispatch, h.Log)
	var through time.Time
	defer func() { h.read(ctx, ledger.FromQueue, through, log) }()
	return sqsBatch(ev.Records, func(m events.SQSMessage) error {
		key, due, err := dispatchqueue.ParseDue(m.Body)
		if err != nil {
			log.Error("unreadable dispatch queue message; kept for the DLQ", "message_id", m.MessageId, "reason", err.Error())
			return err
		}
		res, _, err := h.dispatch(ctx, key, nil, worker, log.With("source", "queue"))
		if err != nil {
			return err
		}
		if due.After(through) {
			through = due
		}
		// A wake-up that came early (a delay longer than SQS allows) goes
		// back on the queue; failing to is a retry of this one.
		return h.UseCase.RescheduleNotDue(ctx, res)
	}), nil
}

// read moves src's mark; a failure only costs hand-backs, so it is logged.
func (h *Dispatch) read(ctx context.Context, src ledger.Source, through time.Time, log *slog.Logger) {
	if err := h.UseCase.Read(ctx, src, through); err != nil {
		log.Warn("dispatch mark not moved; reconcile may hand back rows the source still delivers", "source", string(src), "error", err.Error())
	}
}

// Invoke routes one invocation by its event source: DynamoDB stream
// records to Handle, SQS messages to HandleQueue. The function has both
// event sources; anything else is refused whole.
func (h *Dispatch) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil || len(probe.Records) == 0 {
		return nil, errors.New("dispatch: event is neither a stream batch nor a queue batch")
	}
	switch src := probe.Records[0].EventSource; src {
	case "aws:dynamodb":
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("dispatch: stream batch: %w", err)
		}
		return h.Handle(ctx, ev)
	case "aws:sqs":
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("dispatch: queue batch: %w", err)
		}
		return h.HandleQueue(ctx, ev)
	default:
		return nil, fmt.Errorf("dispatch: unexpected event source %q", outcomeSafe(src))
	}
}

// dispatch hands the use case the record's new image when it decodes, to
// be checked against the row (a contradicted image writes nothing, and is
// counted and logged by the fields that differ, never their values), and
// the key otherwise. written is when the image was written (zero without
// one).
func (h *Dispatch) dispatch(ctx context.Context, key string, image map[string]events.DynamoDBAttributeValue,
	worker ledger.Worker, log *slog.Logger) (res ledger.DispatchResult, written time.Time, err error) {
	log = log.With("dedupe_key", key)
	switch row, derr := h.records.Row(image); {
	case image == nil:
		res, err = h.UseCase.Dispatch(ctx, key, worker)
	case derr != nil || row.Key != key:
		// The table writes only images that decode, under their own key:
		// this one is not the table's.
		res = ledger.DispatchResult{Outcome: ledger.OutcomeContradicted, Contradicted: []string{"image"}}
		log = log.With("reason", fmt.Sprint(derr))
	default:
		written = row.UpdatedAt
		res, err = h.UseCase.DispatchRow(ctx, row, worker)
	}
	h.observe(res, log)
	if res.Outcome == ledger.OutcomeContradicted {
		_ = h.Metrics.Count(metrics.ContradictedRecords, nil, 1)
		if res.Entry.Key != "" {
			log = log.With("row_version", res.Entry.Version, "row_state", string(res.Entry.State))
		}
		log.Error("stream record contradicts the table; nothing written", "fields", res.Contradicted)
		return res, written, nil
	}
	if res.Entry.Key != "" {
		log = log.With("challenge_id", res.Entry.Identity.ChallengeID, "channel", string(res.Entry.Identity.Channel),
			"content_hash", res.Entry.ContentHash, "attempt", res.Entry.Attempts)
	}
	if err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			log.Warn("record or message for a row that no longer exists; skipped")
			return res, written, nil
		}
		log.Error("dispatch failed; will retry", "error", err.Error())
		return res, written, err
	}
	log.Info("dispatch handled", "outcome", string(res.Outcome), "state", string(res.Entry.State), "ack_id", res.Entry.AckID, "reason", res.Entry.Reason)
	return res, written, nil
}

// observe counts what operations watch during a surge: not-sent answers by
// channel and code, waits for the send-rate budget, rows deferred to it,
// and wake-ups that could not be scheduled.
func (h *Dispatch) observe(res ledger.DispatchResult, log *slog.Logger) {
	ch := map[string]string{metrics.DimChannel: string(res.Entry.Identity.Channel)}
	if res.NotSent != nil {
		_ = h.Metrics.Count(metrics.NotSent, map[string]string{metrics.DimChannel: ch[metrics.DimChannel], metrics.DimCode: outcomeSafe(res.NotSent.Code)}, 1)
	}
	if res.BudgetWait > 0 {
		_ = h.Metrics.Emit(ch, "Milliseconds", map[string]float64{metrics.BudgetWait: float64(res.BudgetWait.Milliseconds())})
	}
	// Deferrals to the budget only: a hand-off near the invocation's deadline
	// or a provider's own wait are not budget waits.
	if res.Outcome == ledger.OutcomeDeferred && res.NotSent == nil && res.Entry.NotSentCode == ledger.BudgetCode {
		_ = h.Metrics.Count(metrics.BudgetDeferrals, ch, 1)
	}
	if res.ScheduleErr != nil {
		_ = h.Metrics.Count(metrics.WakeFailures, nil, 1)
		log.Warn("wake-up not scheduled; reconcile will re-drive the row", "error", res.ScheduleErr.Error())
	}
}

// outcomeSafe keeps a provider code or event source fit for a log line or a
// metric dimension.
func outcomeSafe(s string) string {
	if v := outcome.SafeToken(strings.ReplaceAll(s, " ", "_")); v != "" {
		return v
	}
	return "unrecognised"
}
