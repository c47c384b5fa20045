package digeststream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/digest"
)

// The scheduled event's source and detail type (an EventBridge schedule
// rule's "Scheduled Event").
const (
	scheduleSource     = "aws.events"
	scheduleDetailType = "Scheduled Event"
)

// errUnknownEvent: an invocation that is neither a stream batch nor a
// scheduled tick.
var errUnknownEvent = errors.New("digeststream: the event is neither a stream batch nor a scheduled event")

// Invoke routes an invocation by its shape: a batch of the ledger table's
// stream (Records with eventSource aws:dynamodb) to Handle, an EventBridge
// Scheduled Event (source aws.events) to Tick. Anything else is refused
// and writes nothing.
func (h *Digest) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, errUnknownEvent
	}
	switch {
	case len(probe.Records) > 0 && probe.Source == "" && probe.DetailType == "":
		for _, r := range probe.Records {
			if r.EventSource != "aws:dynamodb" {
				return nil, fmt.Errorf("%w: a record from %q", errUnknownEvent, clip(r.EventSource))
			}
		}
		var ev events.DynamoDBTimeWindowEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("digeststream: stream batch: %w", err)
		}
		return h.Handle(ctx, ev)
	case probe.Records == nil && probe.Source == scheduleSource && probe.DetailType == scheduleDetailType:
		return nil, h.Tick(ctx)
	}
	return nil, errUnknownEvent
}

// Tick is the heartbeat: on the schedule's tick (every DIGEST_INTERVAL, at
// least a minute) it writes a digest of no rows, chained to the newest,
// if the newest digest is older than half the tick's period; so a signed
// digest arrives every interval even when the table is quiet, and a
// verifier tells "nothing happened" from "the digests stopped" (stale).
// A tick while the newest is fresh writes nothing. A stream invocation
// racing it is safe: each digest takes its number with a conditional put,
// and the loser re-reads the newest and decides again.
//
// A tick carries nothing the digest records: a forged one (someone who may
// invoke the function) writes at most an empty digest per half period.
func (h *Digest) Tick(ctx context.Context) error {
	log := h.Log
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		log = log.With("request_id", lc.AwsRequestID)
	}
	d, err := h.Writer.Heartbeat(ctx, HeartbeatAge(h.Interval))
	switch {
	case errors.Is(err, digest.ErrFresh):
		log.Info("heartbeat: the newest digest is recent; nothing written", "detail", err.Error())
		return nil
	case err != nil:
		_ = h.Metrics.Count(metrics.DigestFailures, nil, 1)
		log.Error("heartbeat digest not written", "error", err.Error())
		return err
	}
	_ = h.Metrics.Emit(nil, "Count", map[string]float64{metrics.DigestsWritten: 1, metrics.DigestRows: 0, metrics.DigestGaps: 0})
	log.LogAttrs(ctx, slog.LevelInfo, "heartbeat digest written", slog.Uint64("seq", d.Seq))
	return nil
}

// HeartbeatAge is how old the newest digest must be for a tick to write
// one: half the tick's period (digest.TickPeriod: the interval in whole
// minutes, at least one), so a tick that comes a little early does not
// skip.
func HeartbeatAge(interval time.Duration) time.Duration {
	return digest.TickPeriod(interval) / 2
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
