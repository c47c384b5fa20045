// Package digeststream is the digest function's handler: it reads batches
// of the ledger table's stream into signed digests (package digest,
// docs/digests.md). It reads the stream images itself, knowing only the
// few attributes a digest needs (the key, each history entry's hash, the
// TTL), and imports no DynamoDB table client: the digest function reads
// the table only through its stream.
//
// It signs only what the stream holds: before a batch is digested, its
// records are read back from the stream they name (the DynamoDB Streams
// API, see confirm), and a batch the stream contradicts is never digested.
// A record made up and handed to the function directly therefore never
// becomes a signed digest (issue 42).
package digeststream

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/digest"
)

// The ledger item's attributes a digest reads (internal/dynamostore writes them;
// a test holds the names equal to its own).
const (
	attrPK      = "pk"      // the dedupe key
	attrTTL     = "ttl"     // the retention deadline, Unix seconds
	attrHistory = "history" // the history entries, oldest first
	attrHash    = "hash"    // an entry's hash: bytes, or hex text
)

// Digest writes one signed digest per batch of the ledger table's stream:
// every INSERT, MODIFY and REMOVE (its event source has no filter). The
// event source gathers records for DIGEST_INTERVAL (its batching window),
// so a quiet ledger costs one digest per interval at most. Any failure
// fails the whole batch: Lambda retries it, in order, and no later record
// of the shard is digested before it.
//
// A batch is digested only once the stream confirms it: the stream its
// records name (a stream of Table) holds exactly these records,
// consecutive and in order, field for field. A batch it contradicts is
// counted in ContradictedRecords, logged, not digested, and failed (a
// genuine batch is never contradicted; should one be, failing keeps it
// retried and then alarmed, never dropped). A batch the check cannot read
// back (throttling, a network error) fails and is retried.
type Digest struct {
	Writer *digest.Writer
	// Streams reads the stream back; required.
	Streams Streams
	// Table is the ledger table's name: a batch naming another table's
	// stream is contradicted. "" accepts a stream of any table (what the
	// role may read is then the only bound).
	Table   string
	Log     *slog.Logger
	Metrics *metrics.Emitter
	Clock   func() time.Time
	// Interval is DIGEST_INTERVAL: a scheduled tick writes a digest of no
	// rows if the newest is older than HeartbeatAge(Interval) (Tick).
	Interval time.Duration
}

// ttlPrincipal is the principal a stream record names when the table's
// TTL removed the item.
const ttlPrincipal = "dynamodb.amazonaws.com"

// Handle digests one batch. It takes the tumbling-window event shape, so
// the shard id is known where the event source sets a tumbling window;
// without one, the shard is named by the stream's ARN.
func (h *Digest) Handle(ctx context.Context, ev events.DynamoDBTimeWindowEvent) (events.DynamoDBTimeWindowEventResponse, error) {
	log := h.Log
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		log = log.With("request_id", lc.AwsRequestID)
	}
	// An empty list, never null: ministack iterates it without a null check.
	ok := events.DynamoDBTimeWindowEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{}}
	if len(ev.Records) == 0 {
		return ok, nil
	}
	if err := h.confirmed(ctx, log, ev); err != nil {
		return events.DynamoDBTimeWindowEventResponse{}, err
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
	if errors.Is(err, digest.ErrDigested) {
		log.Info("the batch is digested already: nothing written", "records", len(records), "detail", err.Error())
		return ok, nil
	}
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
	return ok, nil
}

// errNoStreams: the handler was built without a stream reader.
var errNoStreams = errors.New("digeststream: no stream reader: a batch cannot be confirmed")

// confirmed returns nil if the stream confirms the batch (confirm); else it
// counts and logs why not and returns the error that fails the batch.
func (h *Digest) confirmed(ctx context.Context, log *slog.Logger, ev events.DynamoDBTimeWindowEvent) error {
	err := errNoStreams
	if h.Streams != nil {
		err = h.confirm(ctx, ev.ShardID, ev.Records)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrContradicted):
		_ = h.Metrics.Count(metrics.ContradictedRecords, nil, float64(len(ev.Records)))
		log.Error("the stream contradicts the batch: nothing is digested", "records", len(ev.Records), "error", err.Error())
	default:
		_ = h.Metrics.Count(metrics.DigestFailures, nil, 1)
		log.Error("the batch could not be confirmed against the stream; it is retried", "records", len(ev.Records), "error", err.Error())
	}
	return err
}

// recordOf decodes a stream record. A record it cannot decode becomes a
// record marked unreadable (a gap), never one left out.
func recordOf(shard string, r events.DynamoDBEventRecord) digest.Record {
	out := digest.Record{
		Shard: shard, Seq: r.Change.SequenceNumber, Event: r.EventName,
		At: r.Change.ApproximateCreationDateTime.Time,
	}
	if k, ok := r.Change.Keys[attrPK]; ok && k.DataType() == events.DataTypeString {
		out.Key = k.String()
	}
	var bad bool
	out.Old, bad = imageOf(r.Change.OldImage)
	if bad {
		out.Unreadable = "the old image is not a ledger row"
	}
	out.New, bad = imageOf(r.Change.NewImage)
	if bad {
		out.Unreadable = "the new image is not a ledger row"
	}
	if r.EventName == digest.Remove {
		out.Removal = digest.RemovedDelete
		if u := r.UserIdentity; u != nil && u.Type == "Service" && u.PrincipalID == ttlPrincipal {
			out.Removal = digest.RemovedTTL
		}
	}
	return out
}

// imageOf reads the hashes of an image's history entries and its TTL; nil
// for no image, and bad if the image is not a ledger row.
func imageOf(m map[string]events.DynamoDBAttributeValue) (img *digest.Image, bad bool) {
	if m == nil {
		return nil, false
	}
	if pk, ok := m[attrPK]; !ok || pk.DataType() != events.DataTypeString || pk.String() == "" {
		return nil, true
	}
	img = &digest.Image{}
	if ttl, ok := m[attrTTL]; ok {
		if ttl.DataType() != events.DataTypeNumber {
			return nil, true
		}
		n, err := strconv.ParseInt(ttl.Number(), 10, 64)
		if err != nil {
			return nil, true
		}
		if n != 0 {
			img.RetainUntil = time.Unix(n, 0).UTC()
		}
	}
	hist, ok := m[attrHistory]
	if !ok || hist.DataType() != events.DataTypeList {
		return nil, true
	}
	for _, ev := range hist.List() {
		if ev.DataType() != events.DataTypeMap {
			return nil, true
		}
		switch h := ev.Map()[attrHash]; h.DataType() {
		case events.DataTypeBinary:
			img.Hashes = append(img.Hashes, hex.EncodeToString(h.Binary()))
		case events.DataTypeString:
			img.Hashes = append(img.Hashes, h.String())
		default:
			return nil, true
		}
	}
	return img, false
}
