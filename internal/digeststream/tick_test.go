package digeststream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/digest"
)

// scheduled is an EventBridge Scheduled Event as Lambda receives it.
const scheduled = `{"version":"0","id":"53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa","detail-type":"Scheduled Event","source":"aws.events",` +
	`"account":"123456789012","time":"2026-12-01T09:05:00Z","region":"us-east-1",` +
	`"resources":["arn:aws:events:us-east-1:123456789012:rule/ledger-digest-tick"],"detail":{}}`

// TestTick (issue 43 item 1): the function takes the schedule's tick as
// well as stream batches, routed by shape; on a quiet table a tick writes
// a digest of no rows chained to the newest, once the newest is older
// than half the interval; anything else is refused and writes nothing.
func TestTick(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	store := digest.NewMemStore()
	signer := digest.NewLocalSigner("local:digest")
	var out bytes.Buffer
	h := &Digest{
		Writer:  &digest.Writer{Store: store, Signer: signer, Clock: func() time.Time { return now }, Retention: time.Hour},
		Streams: &fakeStreams{arn: testStream}, Interval: 5 * time.Minute,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: &metrics.Emitter{W: &out}, Clock: func() time.Time { return now },
	}
	ctx := context.Background()
	tick := func() error { _, err := h.Invoke(ctx, json.RawMessage(scheduled)); return err }
	if err := tick(); err != nil {
		t.Fatal(err)
	}
	if n, _ := digest.Latest(ctx, store, 0); n != 1 || !strings.Contains(out.String(), `"DigestsWritten":1`) {
		t.Fatalf("the first tick: %d digests, metrics %s", n, out.String())
	}
	now = now.Add(2 * time.Minute)
	if err := tick(); err != nil {
		t.Fatal(err)
	}
	if n, _ := digest.Latest(ctx, store, 0); n != 1 {
		t.Fatalf("a tick 2m after a digest wrote one: %d digests", n)
	}
	now = now.Add(3 * time.Minute)
	if err := tick(); err != nil {
		t.Fatal(err)
	}
	c, err := digest.LoadWith(ctx, store, signer.Verifier(), digest.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if c.Digests != 2 || len(c.Findings) != 0 || !c.NewestAt.Equal(now) {
		t.Fatalf("after 5 quiet minutes: %d digests, newest at %v, findings %v", c.Digests, c.NewestAt, c.Findings)
	}
	for _, bad := range []string{
		`{}`, `[]`, `"tick"`,
		`{"source":"aws.events","detail-type":"Object Created"}`,
		`{"source":"aws.s3","detail-type":"Scheduled Event"}`,
		`{"Records":[{"eventSource":"aws:sqs"}]}`,
		`{"Records":[{"eventSource":"aws:dynamodb"}],"source":"aws.events","detail-type":"Scheduled Event"}`,
	} {
		now = now.Add(time.Hour)
		if _, err := h.Invoke(ctx, json.RawMessage(bad)); !errors.Is(err, errUnknownEvent) {
			t.Errorf("Invoke(%s): %v, want it refused", bad, err)
		}
	}
	if n, _ := digest.Latest(ctx, store, 0); n != 2 {
		t.Fatalf("a refused invocation wrote a digest: %d digests", n)
	}
	if got := HeartbeatAge(5 * time.Second); got != 30*time.Second {
		t.Errorf("HeartbeatAge(5s) = %s, want half the 1-minute floor", got)
	}
}
