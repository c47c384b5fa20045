package handler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Dispatch dispatches newly claimed rows from the ledger table's stream.
// Duplicate records and duplicate invocations are harmless: the conditional
// claimed -> dispatching write in the ledger decides who sends.
type Dispatch struct {
	Svc     *ledger.Service
	Log     *slog.Logger
	Metrics *metrics.Emitter
}

func (h *Dispatch) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	// An empty list, never nil (see Claim.Handle).
	resp := events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	worker, log := invocation(ctx, "dispatch", h.Log)
	for _, rec := range ev.Records {
		key, ok, err := claimedKey(rec)
		if err != nil {
			// A record we cannot read is not ours to drop silently: fail it so
			// the event source retries, then sends it to the on-failure queue.
			log.Error("unreadable stream record", "sequence_number", rec.Change.SequenceNumber, "reason", err.Error())
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			return resp, nil
		}
		if !ok {
			continue
		}
		if err := h.dispatch(ctx, key, rec.Change.NewImage, worker, log); err != nil {
			// Stream order matters: report the first failure; the records
			// after it are redelivered with it.
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: rec.Change.SequenceNumber})
			return resp, nil
		}
	}
	return resp, nil
}

// dispatch starts from the record's new image when it decodes to the row
// (saving a read), and from the key otherwise.
func (h *Dispatch) dispatch(ctx context.Context, key string, image map[string]events.DynamoDBAttributeValue, worker ledger.Worker, log *slog.Logger) error {
	log = log.With("dedupe_key", key)
	var res ledger.DispatchResult
	row, derr := dynamostore.DecodeItem(itemOf(image))
	var err error
	if derr == nil && row.Key == key {
		res, err = h.Svc.DispatchRow(ctx, row, worker)
	} else {
		log.Debug("stream image not decodable; reading the row", "reason", fmt.Sprint(derr))
		res, err = h.Svc.Dispatch(ctx, key, worker)
	}
	if res.Entry.Key != "" {
		log = log.With("challenge_id", res.Entry.Identity.ChallengeID, "channel", string(res.Entry.Identity.Channel),
			"content_hash", res.Entry.ContentHash, "attempt", res.Entry.Attempts)
	}
	if err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			log.Warn("stream record for a row that no longer exists; skipped")
			return nil
		}
		log.Error("dispatch failed; will retry", "error", err.Error())
		return err
	}
	log.Info("dispatch handled", "outcome", string(res.Outcome), "state", string(res.Entry.State), "ack_id", res.Entry.AckID, "reason", res.Entry.Reason)
	return nil
}

// claimedKey returns the dedupe key of a record that made a row claimed (an
// INSERT of a claimed row, or a MODIFY that moved a held fallback row to
// claimed), ok=false for any other record (the event source's filter should
// already have dropped those), and an error for a record that cannot be read.
func claimedKey(rec events.DynamoDBEventRecord) (string, bool, error) {
	if rec.EventName != "INSERT" && rec.EventName != "MODIFY" {
		return "", false, nil
	}
	pk, ok := rec.Change.Keys["pk"]
	if !ok || pk.DataType() != events.DataTypeString {
		return "", false, errors.New("record has no string key pk")
	}
	key := pk.String()
	if !ledger.IsDedupeKey(key) {
		return "", false, errors.New("record key is not a dedupe key")
	}
	state, ok := rec.Change.NewImage["state"]
	if !ok || state.DataType() != events.DataTypeString {
		return "", false, errors.New("record new image has no string state")
	}
	if state.String() != string(ledger.Claimed) {
		return key, false, nil
	}
	if rec.EventName == "MODIFY" {
		old, ok := rec.Change.OldImage["state"]
		if !ok || old.DataType() != events.DataTypeString || old.String() != string(ledger.Held) {
			return key, false, nil
		}
	}
	return key, true, nil
}
