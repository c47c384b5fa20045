package digeststream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/digest"
)

const testStream = "arn:aws:dynamodb:eu-west-1:111122223333:table/ledger/stream/2026-12-06T00:00:00.000"

// fakeShard is one shard of fakeStreams: its records, as the event source
// would hand them to the function.
type fakeShard struct {
	id      string
	records []events.DynamoDBEventRecord
	closed  bool
}

// fakeStreams serves shards through the DynamoDB Streams API as AWS does:
// an iterator at a sequence number the shard lacks is refused, GetRecords
// pages by its limit. fail, if set, fails calls (a throttled read).
type fakeStreams struct {
	arn    string
	shards []*fakeShard
	fail   error
	calls  map[string]int
	// onePerPage has DescribeStream list one shard a page.
	onePerPage bool
}

func (f *fakeStreams) count(op string) error {
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
	return f.fail
}

func (f *fakeStreams) DescribeStream(_ context.Context, in *dynamodbstreams.DescribeStreamInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error) {
	if err := f.count("DescribeStream"); err != nil {
		return nil, err
	}
	if aws.ToString(in.StreamArn) != f.arn {
		return nil, &smithy.GenericAPIError{Code: "ResourceNotFoundException", Message: "Requested resource not found"}
	}
	var shards []streamtypes.Shard
	for _, s := range f.shards {
		r := &streamtypes.SequenceNumberRange{StartingSequenceNumber: &s.records[0].Change.SequenceNumber}
		if s.closed {
			r.EndingSequenceNumber = &s.records[len(s.records)-1].Change.SequenceNumber
		}
		shards = append(shards, streamtypes.Shard{ShardId: aws.String(s.id), SequenceNumberRange: r})
	}
	d := &streamtypes.StreamDescription{StreamArn: in.StreamArn, Shards: shards}
	if f.onePerPage {
		i := 0
		for i < len(shards) && in.ExclusiveStartShardId != nil && aws.ToString(shards[i].ShardId) != *in.ExclusiveStartShardId {
			i++
		}
		if in.ExclusiveStartShardId != nil {
			i++
		}
		d.Shards = shards[i : i+1]
		if i+1 < len(shards) {
			d.LastEvaluatedShardId = shards[i].ShardId
		}
	}
	return &dynamodbstreams.DescribeStreamOutput{StreamDescription: d}, nil
}

func (f *fakeStreams) GetShardIterator(_ context.Context, in *dynamodbstreams.GetShardIteratorInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error) {
	if err := f.count("GetShardIterator"); err != nil {
		return nil, err
	}
	for _, s := range f.shards {
		if s.id != aws.ToString(in.ShardId) {
			continue
		}
		for i, r := range s.records {
			if r.Change.SequenceNumber == aws.ToString(in.SequenceNumber) {
				return &dynamodbstreams.GetShardIteratorOutput{ShardIterator: aws.String(s.id + "/" + strconv.Itoa(i))}, nil
			}
		}
	}
	return nil, &smithy.GenericAPIError{Code: "TrimmedDataAccessException", Message: "Sequence number not found on stream"}
}

func (f *fakeStreams) GetRecords(_ context.Context, in *dynamodbstreams.GetRecordsInput, _ ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error) {
	if err := f.count("GetRecords"); err != nil {
		return nil, err
	}
	id, pos, _ := strings.Cut(aws.ToString(in.ShardIterator), "/")
	at, _ := strconv.Atoi(pos)
	for _, s := range f.shards {
		if s.id != id {
			continue
		}
		end := min(len(s.records), at+int(aws.ToInt32(in.Limit)))
		out := &dynamodbstreams.GetRecordsOutput{NextShardIterator: aws.String(s.id + "/" + strconv.Itoa(end))}
		if s.closed && end == len(s.records) {
			out.NextShardIterator = nil
		}
		for _, r := range s.records[at:end] {
			out.Records = append(out.Records, toStream(r))
		}
		return out, nil
	}
	return nil, &smithy.GenericAPIError{Code: "ValidationException", Message: "ShardIterator is not valid"}
}

// toStream is the Streams API's form of a record the event source hands on.
func toStream(r events.DynamoDBEventRecord) streamtypes.Record {
	out := streamtypes.Record{EventName: streamtypes.OperationType(r.EventName), Dynamodb: &streamtypes.StreamRecord{
		SequenceNumber: aws.String(r.Change.SequenceNumber), Keys: streamImageOf(r.Change.Keys),
		OldImage: streamImageOf(r.Change.OldImage), NewImage: streamImageOf(r.Change.NewImage),
	}}
	if t := r.Change.ApproximateCreationDateTime; !t.IsZero() {
		out.Dynamodb.ApproximateCreationDateTime = aws.Time(t.Time)
	}
	if u := r.UserIdentity; u != nil {
		out.UserIdentity = &streamtypes.Identity{Type: aws.String(u.Type), PrincipalId: aws.String(u.PrincipalID)}
	}
	return out
}

func streamImageOf(m map[string]events.DynamoDBAttributeValue) map[string]streamtypes.AttributeValue {
	if m == nil {
		return nil
	}
	out := map[string]streamtypes.AttributeValue{}
	for k, v := range m {
		out[k] = streamValue(v)
	}
	return out
}

func streamValue(v events.DynamoDBAttributeValue) streamtypes.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &streamtypes.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &streamtypes.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &streamtypes.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &streamtypes.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeList:
		var l []streamtypes.AttributeValue
		for _, x := range v.List() {
			l = append(l, streamValue(x))
		}
		return &streamtypes.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &streamtypes.AttributeValueMemberM{Value: streamImageOf(v.Map())}
	case events.DataTypeStringSet:
		return &streamtypes.AttributeValueMemberSS{Value: v.StringSet()}
	}
	return &streamtypes.AttributeValueMemberNULL{Value: true}
}

// genuine returns n records of one shard as the stream holds them: rows
// k0, k1, ... inserted, then each modified (one more entry), with creation
// times, sequence numbers from first.
func genuine(first, n int) []events.DynamoDBEventRecord {
	var out []events.DynamoDBEventRecord
	for i := range n {
		key := fmt.Sprintf("k%d", i/2)
		r := events.DynamoDBEventRecord{EventName: "INSERT", EventSource: "aws:dynamodb", EventSourceArn: testStream,
			Change: events.DynamoDBStreamRecord{
				SequenceNumber: fmt.Sprintf("%021d", first+i*10), Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(key)},
				NewImage:                    streamImage(key, "aa"),
				ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Now().Truncate(time.Second)},
			}}
		if i%2 == 1 {
			r.EventName, r.Change.OldImage, r.Change.NewImage = "MODIFY", streamImage(key, "aa"), streamImage(key, "aa", "bb")
		}
		out = append(out, r)
	}
	return out
}

// confirmRig is a handler over fakeStreams, its store and its metrics.
type confirmRig struct {
	h       *Digest
	streams *fakeStreams
	store   *digest.MemStore
	metrics *bytes.Buffer
}

func newConfirmRig(shards ...*fakeShard) *confirmRig {
	r := &confirmRig{streams: &fakeStreams{arn: testStream, shards: shards}, store: digest.NewMemStore(), metrics: &bytes.Buffer{}}
	r.h = &Digest{
		Writer:  &digest.Writer{Store: r.store, Signer: digest.NewLocalSigner("local:digest"), Clock: time.Now, Retention: time.Hour},
		Streams: r.streams, Table: "ledger",
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), Metrics: &metrics.Emitter{W: r.metrics}, Clock: time.Now,
	}
	return r
}

func batch(recs []events.DynamoDBEventRecord) events.DynamoDBTimeWindowEvent {
	var ev events.DynamoDBTimeWindowEvent
	ev.Records = recs
	return ev
}

// clone deep-copies records, so a case may alter its batch freely.
func clone(recs []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
	out := make([]events.DynamoDBEventRecord, len(recs))
	for i, r := range recs {
		c := toStream(r)
		out[i] = r
		out[i].Change.Keys, out[i].Change.OldImage, out[i].Change.NewImage =
			emulator.StreamImage(c.Dynamodb.Keys), emulator.StreamImage(c.Dynamodb.OldImage), emulator.StreamImage(c.Dynamodb.NewImage)
	}
	return out
}

// TestContradictedBatchIsNotSigned: a batch the stream does not hold as
// handed (a record made up, altered in any field the digest reads, left
// out, reordered or appended; another table's stream; another shard) is
// not digested: no digest is written, the batch fails, and its records are
// counted in ContradictedRecords. The genuine batch is then digested.
func TestContradictedBatchIsNotSigned(t *testing.T) {
	stream := genuine(100, 6)
	for _, c := range contradictions() {
		t.Run(c.name, func(t *testing.T) {
			rig := newConfirmRig(&fakeShard{id: "shardId-1", records: stream})
			ev := batch(c.alter(clone(stream)))
			ev.ShardID = c.shardID
			_, err := rig.h.Handle(context.Background(), ev)
			if !errors.Is(err, ErrContradicted) {
				t.Fatalf("Handle: %v, want ErrContradicted", err)
			}
			if rig.store.Puts != 0 {
				t.Fatalf("%d digests written of a contradicted batch", rig.store.Puts)
			}
			if want := fmt.Sprintf(`"ContradictedRecords":%d`, len(ev.Records)); !strings.Contains(rig.metrics.String(), want) {
				t.Errorf("metrics %s, want %s", rig.metrics.String(), want)
			}
			// The genuine batch is confirmed and digested.
			rig.metrics.Reset()
			if _, err := rig.h.Handle(context.Background(), batch(clone(stream))); err != nil || rig.store.Puts != 1 {
				t.Fatalf("genuine batch: %v, %d digests", err, rig.store.Puts)
			}
			if strings.Contains(rig.metrics.String(), "ContradictedRecords") {
				t.Errorf("a genuine batch counted contradicted: %s", rig.metrics.String())
			}
		})
	}
}

// contradiction is a batch the stream contradicts: the genuine records
// (genuine(100, 6)) altered, handed with shardID.
type contradiction struct {
	name    string
	shardID string
	alter   func([]events.DynamoDBEventRecord) []events.DynamoDBEventRecord
}

// contradictions are the ways a batch can differ from what the stream holds.
func contradictions() []contradiction {
	return []contradiction{
		{"made-up MODIFY at a sequence number the stream lacks", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			f := r[1]
			f.Change.SequenceNumber, f.Change.OldImage, f.Change.NewImage = "999999", streamImage("k0", "aa"), streamImage("k0", "aa", "ff")
			return []events.DynamoDBEventRecord{f}
		}},
		{"new image altered at a genuine sequence number", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[3].Change.NewImage = streamImage("k1", "aa", "ff")
			return r
		}},
		{"old image altered", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[1].Change.OldImage = streamImage("k0", "ff")
			return r
		}},
		{"keys altered", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[2].Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("k9")}
			return r
		}},
		{"event name altered", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[0].EventName = "REMOVE"
			return r
		}},
		{"a deletion claimed as a TTL removal", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[4].UserIdentity = &events.DynamoDBUserIdentity{Type: "Service", PrincipalID: ttlPrincipal}
			return r
		}},
		{"creation time moved back a day", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[0].Change.ApproximateCreationDateTime.Time = r[0].Change.ApproximateCreationDateTime.Add(-25 * time.Hour)
			return r
		}},
		{"a record left out", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			return append(r[:2:2], r[3:]...)
		}},
		{"two records swapped", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[2], r[3] = r[3], r[2]
			return r
		}},
		{"a made-up record after the stream's last", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			f := r[5]
			f.Change.SequenceNumber = fmt.Sprintf("%021d", 1000)
			return append(r, f)
		}},
		{"another table's stream", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			for i := range r {
				r[i].EventSourceArn = strings.Replace(testStream, "table/ledger/", "table/other/", 1)
			}
			return r
		}},
		{"not a stream", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[0].EventSourceArn = "arn:aws:sqs:eu-west-1:111122223333:queue"
			return r
		}},
		{"records of two streams", "", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord {
			r[5].EventSourceArn = testStream + "x"
			return r
		}},
		{"a shard the stream lacks", "shardId-forged", func(r []events.DynamoDBEventRecord) []events.DynamoDBEventRecord { return r }},
	}
}

// TestUnconfirmedBatchIsRetried: a batch the check cannot read back (a
// throttled or failed call) is not digested and fails, counted as a
// digest failure, not as contradicted; its retry is digested.
func TestUnconfirmedBatchIsRetried(t *testing.T) {
	stream := genuine(100, 4)
	rig := newConfirmRig(&fakeShard{id: "shardId-1", records: stream})
	rig.streams.fail = &smithy.GenericAPIError{Code: "LimitExceededException", Message: "throttled"}
	_, err := rig.h.Handle(context.Background(), batch(clone(stream)))
	if err == nil || errors.Is(err, ErrContradicted) || rig.store.Puts != 0 {
		t.Fatalf("Handle: %v, %d digests", err, rig.store.Puts)
	}
	if m := rig.metrics.String(); !strings.Contains(m, `"DigestFailures":1`) || strings.Contains(m, "ContradictedRecords") {
		t.Errorf("metrics %s", m)
	}
	rig.streams.fail = nil
	if _, err := rig.h.Handle(context.Background(), batch(clone(stream))); err != nil || rig.store.Puts != 1 {
		t.Fatalf("retry: %v, %d digests", err, rig.store.Puts)
	}
	rig.h.Streams = nil
	if _, err := rig.h.Handle(context.Background(), batch(clone(stream))); err == nil || rig.store.Puts != 1 {
		t.Fatalf("without a stream reader: %v, %d digests", err, rig.store.Puts)
	}
}

// TestConfirmReadsWhatTheBatchNeeds: the batch is found in whichever
// shard holds it, shards overlapping in sequence numbers as concurrent
// shards do, and a batch of 2,500 records costs one DescribeStream, one
// GetShardIterator per shard tried and three GetRecords calls.
func TestConfirmReadsWhatTheBatchNeeds(t *testing.T) {
	closed := &fakeShard{id: "shardId-1", records: genuine(100, 40), closed: true}
	open := &fakeShard{id: "shardId-2", records: genuine(105, 2500)}
	rig := newConfirmRig(closed, open)
	if _, err := rig.h.Handle(context.Background(), batch(clone(open.records))); err != nil || rig.store.Puts != 1 {
		t.Fatalf("Handle: %v, %d digests", err, rig.store.Puts)
	}
	want := map[string]int{"DescribeStream": 1, "GetShardIterator": 2, "GetRecords": 3}
	if fmt.Sprint(rig.streams.calls) != fmt.Sprint(want) {
		t.Errorf("calls %v, want %v", rig.streams.calls, want)
	}
	// Listed one shard a page, the shard holding the batch is still found.
	rig.streams.onePerPage, rig.streams.calls = true, nil
	if _, err := rig.h.Handle(context.Background(), batch(clone(open.records[:5]))); err != nil || rig.streams.calls["DescribeStream"] != 2 {
		t.Fatalf("shards listed a page each: %v, calls %v", err, rig.streams.calls)
	}
	// The closed shard's whole run; then the same run less its last record
	// handed as the end of the shard's: confirmed (a batch may end anywhere).
	for _, recs := range [][]events.DynamoDBEventRecord{closed.records, closed.records[10:30]} {
		if _, err := rig.h.Handle(context.Background(), batch(clone(recs))); err != nil {
			t.Fatalf("closed shard: %v", err)
		}
	}
	// A batch running past the closed shard's end is contradicted.
	past := append(clone(closed.records[30:]), clone(open.records[:1])...)
	if _, err := rig.h.Handle(context.Background(), batch(past)); !errors.Is(err, ErrContradicted) {
		t.Fatalf("past the shard's end: %v", err)
	}
}

// TestSameImage: the canonical comparison of the two forms of an image
// agrees on equal values (sets in any order) and tells every difference.
func TestSameImage(t *testing.T) {
	img := streamImage("k1", "aa01", "bb02")
	img["flags"] = events.NewStringSetAttribute([]string{"a", "b"})
	img["ok"] = events.NewBooleanAttribute(true)
	img["none"] = events.NewNullAttribute()
	s := streamImageOf(img)
	s["flags"] = &streamtypes.AttributeValueMemberSS{Value: []string{"b", "a"}}
	if !sameImage(img, s) {
		t.Fatal("equal images differ")
	}
	for name, change := range map[string]func(map[string]streamtypes.AttributeValue){
		"number": func(m map[string]streamtypes.AttributeValue) {
			m["ttl"] = &streamtypes.AttributeValueMemberN{Value: "1900000001"}
		},
		"type": func(m map[string]streamtypes.AttributeValue) {
			m["ttl"] = &streamtypes.AttributeValueMemberS{Value: "1900000000"}
		},
		"extra":   func(m map[string]streamtypes.AttributeValue) { m["x"] = &streamtypes.AttributeValueMemberS{Value: ""} },
		"missing": func(m map[string]streamtypes.AttributeValue) { delete(m, "ok") },
		"bool": func(m map[string]streamtypes.AttributeValue) {
			m["ok"] = &streamtypes.AttributeValueMemberBOOL{Value: false}
		},
		"history": func(m map[string]streamtypes.AttributeValue) {
			m["history"] = streamValue(streamImage("k1", "aa01")["history"])
		},
		"unknown type": func(m map[string]streamtypes.AttributeValue) { m["ok"] = &streamtypes.UnknownUnionMember{Tag: "X"} },
	} {
		c := streamImageOf(img)
		c["flags"] = s["flags"]
		change(c)
		if sameImage(img, c) {
			t.Errorf("%s: a changed image compares equal", name)
		}
	}
	if !sameImage(nil, nil) || sameImage(img, nil) || sameImage(nil, s) {
		t.Error("absent images")
	}
}
