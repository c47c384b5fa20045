package handler

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/dynamostore"
)

// Digest writes one signed digest per batch of the ledger table's stream:
// every INSERT, MODIFY and REMOVE (its event source has no filter). The
// event source gathers records for DIGEST_INTERVAL (its batching window),
// so a quiet ledger costs one digest per interval at most. Any failure
// fails the whole batch: Lambda retries it, in order, and no later record
// of the shard is digested before it.
type Digest struct {
	Writer  *digest.Writer
	Log     *slog.Logger
	Metrics *metrics.Emitter
	Clock   func() time.Time
}

// ttlPrincipal is the principal a stream record names when the table's
// TTL removed the item.
const ttlPrincipal = "dynamodb.amazonaws.com"

// Handle digests one batch. It takes the tumbling-window event shape, so
// the shard id is known where the event source sets a tumbling window;
// without one, the shard is named by the stream's ARN.
func (h *Digest) Handle(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	_, log := invocation(ctx, settings.Digest, h.Log)
	if len(ev.Records) == 0 {
		return events.DynamoDBTimeWindowEventResponse{}, nil
	}
	shard := ev.ShardID
	if shard == "" {
		shard = ev.Records[0].EventSourceArn
	}
	records := make([]digest.Record, 0, len(ev.Records))
	for _, r := range ev.Records {
		records = append(records, recordOf(shard, r))
	}
	b := digest.Collect(records, h.Clock())
	d, err := h.Writer.Write(ctx, b)
	if err != nil {
		_ = h.Metrics.Count(metrics.DigestFailures, nil, 1)
		log.Error("digest not written; the batch is retried", "records", len(records), "error", err.Error())
		return events.DynamoDBTimeWindowEventResponse{}, err
	}
	_ = h.Metrics.Emit(nil, "Count", map[string]float64{
		metrics.DigestsWritten: 1, metrics.DigestRows: float64(len(d.Rows)), metrics.DigestGaps: float64(len(d.Gaps)),
	})
	for _, g := range d.Gaps {
		log.Warn("digest records a gap", "seq", d.Seq, "kind", g.Kind, "key", g.Key, "detail", g.Detail)
	}
	log.Info("digest written", "seq", d.Seq, "rows", len(d.Rows), "records", len(records), "gaps", len(d.Gaps))
	return events.DynamoDBTimeWindowEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}, nil
}

// recordOf decodes a stream record. A record it cannot decode becomes a
// record marked unreadable (a gap), never one left out.
func recordOf(shard string, r events.DynamoDBEventRecord) digest.Record {
	out := digest.Record{
		Shard: shard, Seq: r.Change.SequenceNumber, Event: r.EventName,
		At: r.Change.ApproximateCreationDateTime.Time,
	}
	if k, ok := r.Change.Keys[dynamostore.AttrPK]; ok && k.DataType() == events.DataTypeString {
		out.Key = k.String()
	}
	image := func(m map[string]events.DynamoDBAttributeValue) *digest.Image {
		if m == nil {
			return nil
		}
		e, err := dynamostore.DecodeItem(itemOf(m))
		if err != nil {
			out.Unreadable = "an image does not decode as a ledger row"
			return nil
		}
		img := &digest.Image{RetainUntil: e.RetainUntil, Hashes: make([]string, len(e.History))}
		for i, ev := range e.History {
			img.Hashes[i] = ev.Hash
		}
		return img
	}
	out.Old, out.New = image(r.Change.OldImage), image(r.Change.NewImage)
	if r.EventName == digest.Remove {
		out.Removal = digest.RemovedDelete
		if u := r.UserIdentity; u != nil && u.Type == "Service" && u.PrincipalID == ttlPrincipal {
			out.Removal = digest.RemovedTTL
		}
	}
	return out
}
