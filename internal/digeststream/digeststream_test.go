package digeststream

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/digest"
)

// streamImage is a ledger item image whose history has the entries hashes.
func streamImage(key string, hashes ...string) map[string]events.DynamoDBAttributeValue {
	var hist []events.DynamoDBAttributeValue
	for i, h := range hashes {
		b, _ := hex.DecodeString(h)
		hist = append(hist, events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{
			"id": events.NewStringAttribute("ev-" + h), "to": events.NewStringAttribute("claimed"),
			"at": events.NewStringAttribute(time.Unix(1_800_000_000+int64(i), 0).UTC().Format("2006-01-02T15:04:05.000Z")),
			"by": events.NewStringAttribute("claim/req"), "hash": events.NewBinaryAttribute(b),
		}))
	}
	return map[string]events.DynamoDBAttributeValue{
		"pk": events.NewStringAttribute(key), "state": events.NewStringAttribute("claimed"),
		"version": events.NewNumberAttribute("1"), "ttl": events.NewNumberAttribute("1900000000"),
		"history": events.NewListAttribute(hist),
	}
}

func removeRecord(seq, key string, ttl bool) events.DynamoDBEventRecord {
	r := events.DynamoDBEventRecord{EventName: "REMOVE", EventSourceArn: testStream, Change: events.DynamoDBStreamRecord{
		SequenceNumber: seq, Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key)},
		OldImage: streamImage(key, "aa", "bb"),
	}}
	if ttl {
		r.UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: "dynamodb.amazonaws.com"}
	}
	return r
}

type failingStore struct{ digest.Store }

func (failingStore) Exists(context.Context, uint64) (bool, error) {
	return false, errors.New("s3 down")
}

// TestDigestHandler: TTL removals and deletions are told apart by the
// stream's user identity; an unreadable record is a gap in the digest,
// counted in DigestGaps; a failure to write fails the whole batch.
func TestDigestHandler(t *testing.T) {
	store := digest.NewMemStore()
	signer := digest.NewLocalSigner("local:digest")
	var out bytes.Buffer
	unreadable := removeRecord("300", "k3", false)
	unreadable.EventName = "MODIFY"
	unreadable.Change.NewImage = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("k3"), "history": events.NewStringAttribute("x")}
	ev := events.DynamoDBTimeWindowEvent{}
	ev.ShardID = "shardId-1"
	ev.Records = []events.DynamoDBEventRecord{removeRecord("100", "k1", true), removeRecord("200", "k2", false), unreadable}
	h := &Digest{
		Writer:  &digest.Writer{Store: store, Signer: signer, Clock: time.Now, Retention: time.Hour},
		Streams: &fakeStreams{arn: testStream, shards: []*fakeShard{{id: "shardId-1", records: ev.Records}}},
		Log:     slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: &metrics.Emitter{W: &out}, Clock: time.Now,
	}
	resp, err := h.Handle(context.Background(), ev)
	if err != nil || resp.BatchItemFailures == nil {
		t.Fatalf("Handle: %v, failures %v", err, resp.BatchItemFailures)
	}
	raw, err := store.Get(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := signer.Verifier().Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rows) != 2 || d.Rows[0].Removed != digest.RemovedTTL || d.Rows[1].Removed != digest.RemovedDelete || d.Rows[0].Head != "bb" || d.Rows[0].Count != 2 {
		t.Errorf("rows %+v", d.Rows)
	}
	if len(d.Gaps) != 1 || d.Gaps[0].Kind != digest.GapUnreadable || d.Gaps[0].Key != "k3" {
		t.Errorf("gaps %+v", d.Gaps)
	}
	if p := d.Positions; len(p) != 1 || p[0].Shard != "shardId-1" || p[0].First != "100" || p[0].Last != "300" {
		t.Errorf("positions %+v", p)
	}
	if !strings.Contains(out.String(), `"DigestGaps":1`) {
		t.Errorf("metrics: %s", out.String())
	}

	h.Writer = &digest.Writer{Store: failingStore{store}, Signer: signer, Clock: time.Now}
	out.Reset()
	if _, err := h.Handle(context.Background(), ev); err == nil || !strings.Contains(out.String(), `"DigestFailures":1`) {
		t.Fatalf("a failed write: err %v, metrics %s", err, out.String())
	}
}

// TestImageReadsWhatTheStoreDecodes: the handler's own reader of a stream
// image finds the key, hashes and retention dynamostore's decoder finds.
func TestImageReadsWhatTheStoreDecodes(t *testing.T) {
	if attrPK != dynamostore.AttrPK || attrTTL != dynamostore.AttrTTL {
		t.Fatalf("attribute names differ from dynamostore's")
	}
	m := streamImage("k1", "aa01", "bb02")
	e, err := dynamostore.DecodeImage(m)
	if err != nil {
		t.Fatal(err)
	}
	img, bad := imageOf(m)
	if bad || len(img.Hashes) != len(e.History) || !img.RetainUntil.Equal(e.RetainUntil) {
		t.Fatalf("image %+v bad %v; store %d entries, retain %v", img, bad, len(e.History), e.RetainUntil)
	}
	for i, ev := range e.History {
		if img.Hashes[i] != ev.Hash {
			t.Errorf("entry %d: %s, store %s", i, img.Hashes[i], ev.Hash)
		}
	}
	if _, bad := imageOf(map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("k"), "history": events.NewStringAttribute("x")}); !bad {
		t.Error("a history that is not a list is read")
	}
}
