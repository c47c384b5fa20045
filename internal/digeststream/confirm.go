package digeststream

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
)

// Streams is the part of the DynamoDB Streams API the digest function calls
// to confirm a batch against the stream it names (dynamodbstreams.Client).
type Streams interface {
	DescribeStream(ctx context.Context, in *dynamodbstreams.DescribeStreamInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.DescribeStreamOutput, error)
	GetShardIterator(ctx context.Context, in *dynamodbstreams.GetShardIteratorInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *dynamodbstreams.GetRecordsInput, opts ...func(*dynamodbstreams.Options)) (*dynamodbstreams.GetRecordsOutput, error)
}

// ErrContradicted: the stream the records name does not hold them as they
// were handed to the function (a record made up or altered, records left
// out or reordered, another table's stream). Only an invocation that did not
// come from the function's event source hands it such a batch.
var ErrContradicted = errors.New("digeststream: the stream contradicts the batch")

// getRecordsLimit is the most records one GetRecords call returns.
const getRecordsLimit = 1000

// maxShardPages bounds the pages of shards DescribeStream is asked for (100
// shards a page; a stream keeps a day of shards).
const maxShardPages = 1000

// maxEmptyPages is how many GetRecords answers in a row without a record
// the check accepts from an open shard before it concludes that the stream
// holds no more records than it read (the batch names more).
const maxEmptyPages = 3

// confirm reads the records of the batch back from the stream they name and
// returns nil only if the stream holds exactly these records, consecutive,
// in this order, each equal in every field the digest reads: its sequence
// number, event name, keys, old and new images, user identity (which tells
// a TTL removal from a deletion) and creation time (to the second). It
// returns an error wrapping ErrContradicted if the stream contradicts the
// batch, and any other error if it could not read the stream (the batch is
// then retried).
//
// Cost: one DescribeStream call (per 100 shards), one GetShardIterator per
// shard whose range holds the first sequence number (one, but where shards
// overlap), and one GetRecords call per 1,000 records (or MB) of the batch.
// None reads the table: no read capacity is consumed.
func (h *Digest) confirm(ctx context.Context, shardID string, recs []events.DynamoDBEventRecord) error {
	arn := recs[0].EventSourceArn
	table, ok := streamTable(arn)
	if !ok {
		return fmt.Errorf("%w: the records name %q, which is not a DynamoDB table's stream", ErrContradicted, arn)
	}
	if h.Table != "" && table != h.Table {
		return fmt.Errorf("%w: the records name a stream of table %q, not the ledger table's", ErrContradicted, table)
	}
	for i, r := range recs {
		if r.EventSourceArn != arn {
			return fmt.Errorf("%w: record %d names another stream than the first record", ErrContradicted, i)
		}
	}
	first, ok := seqNumber(recs[0].Change.SequenceNumber)
	if !ok {
		return fmt.Errorf("%w: record 0's sequence number %q is not a number", ErrContradicted, recs[0].Change.SequenceNumber)
	}
	shards, err := h.shardsHolding(ctx, arn, shardID, first)
	if err != nil {
		return err
	}
	for _, shard := range shards {
		err := h.readBack(ctx, arn, shard, recs)
		if !errors.Is(err, errNotInShard) {
			return err
		}
	}
	return fmt.Errorf("%w: no shard of the stream holds a record with sequence number %s", ErrContradicted, recs[0].Change.SequenceNumber)
}

// errNotInShard: the shard holds no record with the batch's first sequence
// number (another shard may).
var errNotInShard = errors.New("digeststream: not in this shard")

// shardsHolding returns the shards of stream arn whose sequence number range
// holds first: shardID alone if the event named one (a tumbling window).
func (h *Digest) shardsHolding(ctx context.Context, arn, shardID string, first *big.Int) ([]string, error) {
	var out []string
	pages := 0
	in := &dynamodbstreams.DescribeStreamInput{StreamArn: &arn}
	for {
		d, err := h.Streams.DescribeStream(ctx, in)
		if err != nil {
			if absent(err) {
				return nil, fmt.Errorf("%w: the stream the records name does not exist (%s)", ErrContradicted, errorCode(err))
			}
			return nil, fmt.Errorf("digeststream: describe the stream: %w", err)
		}
		if d.StreamDescription == nil {
			return nil, errors.New("digeststream: describe the stream: no description")
		}
		for _, s := range d.StreamDescription.Shards {
			id := deref(s.ShardId)
			if shardID != "" {
				if id == shardID {
					out = append(out, id)
				}
				continue
			}
			if holds(s.SequenceNumberRange, first) {
				out = append(out, id)
			}
		}
		last := d.StreamDescription.LastEvaluatedShardId
		if last == nil || *last == "" {
			break
		}
		if pages++; pages >= maxShardPages || deref(in.ExclusiveStartShardId) == *last {
			return nil, fmt.Errorf("digeststream: describe the stream: the shard list does not end (%d pages)", pages)
		}
		in.ExclusiveStartShardId = last
	}
	if len(out) == 0 {
		if shardID != "" {
			return nil, fmt.Errorf("%w: the stream has no shard %q", ErrContradicted, shardID)
		}
		return nil, fmt.Errorf("%w: no shard of the stream covers sequence number %s", ErrContradicted, first)
	}
	return out, nil
}

// readBack reads shard from the batch's first sequence number on and
// compares each record the stream holds with the batch's, in order.
func (h *Digest) readBack(ctx context.Context, arn, shard string, recs []events.DynamoDBEventRecord) error {
	it, err := h.Streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{
		StreamArn: &arn, ShardId: &shard, ShardIteratorType: streamtypes.ShardIteratorTypeAtSequenceNumber,
		SequenceNumber: &recs[0].Change.SequenceNumber,
	})
	if err != nil {
		if absent(err) {
			return errNotInShard
		}
		return fmt.Errorf("digeststream: shard iterator: %w", err)
	}
	next, i, empty := it.ShardIterator, 0, 0
	for i < len(recs) {
		if next == nil {
			return fmt.Errorf("%w: the shard ends after %d of the batch's %d records", ErrContradicted, i, len(recs))
		}
		limit := int32(min(getRecordsLimit, len(recs)-i))
		page, err := h.Streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next, Limit: &limit})
		if err != nil {
			if i == 0 && absent(err) {
				return errNotInShard
			}
			return fmt.Errorf("digeststream: read the stream after %d of %d records: %w", i, len(recs), err)
		}
		next = page.NextShardIterator
		if len(page.Records) == 0 {
			if empty++; empty > maxEmptyPages {
				if i == 0 {
					return errNotInShard
				}
				return fmt.Errorf("%w: the stream holds %d of the batch's %d records; it has none after record %s", ErrContradicted, i, len(recs), recs[i-1].Change.SequenceNumber)
			}
			continue
		}
		empty = 0
		for _, got := range page.Records {
			if i == len(recs) {
				break
			}
			if i == 0 && (got.Dynamodb == nil || deref(got.Dynamodb.SequenceNumber) != recs[0].Change.SequenceNumber) {
				return errNotInShard
			}
			if field := differs(recs[i], got); field != "" {
				return fmt.Errorf("%w: record %d (sequence number %s): its %s is not the stream's", ErrContradicted, i, recs[i].Change.SequenceNumber, field)
			}
			i++
		}
	}
	return nil
}

// differs names the first field the digest reads in which the handed record
// r and the stream's record s differ, or returns "".
func differs(r events.DynamoDBEventRecord, s streamtypes.Record) string {
	d := s.Dynamodb
	if d == nil {
		d = &streamtypes.StreamRecord{}
	}
	switch {
	case r.Change.SequenceNumber != deref(d.SequenceNumber):
		return "sequence number (the stream holds records the batch leaves out, or not in this order)"
	case r.EventName != string(s.EventName):
		return "event name"
	case !sameImage(r.Change.Keys, d.Keys):
		return "keys"
	case !sameImage(r.Change.OldImage, d.OldImage):
		return "old image"
	case !sameImage(r.Change.NewImage, d.NewImage):
		return "new image"
	case identity(r.UserIdentity) != streamIdentity(s.UserIdentity):
		return "user identity"
	case !sameSecond(r.Change.ApproximateCreationDateTime, d):
		return "creation time"
	}
	return ""
}

func sameSecond(t events.SecondsEpochTime, d *streamtypes.StreamRecord) bool {
	if d.ApproximateCreationDateTime == nil {
		return t.IsZero()
	}
	return !t.IsZero() && t.Unix() == d.ApproximateCreationDateTime.Unix()
}

func identity(u *events.DynamoDBUserIdentity) string {
	if u == nil {
		return ""
	}
	return u.Type + "\x00" + u.PrincipalID
}

func streamIdentity(u *streamtypes.Identity) string {
	if u == nil {
		return ""
	}
	return deref(u.Type) + "\x00" + deref(u.PrincipalId)
}

// sameImage compares an image of the Lambda event with the stream's.
func sameImage(a map[string]events.DynamoDBAttributeValue, b map[string]streamtypes.AttributeValue) bool {
	if len(a) != len(b) {
		return false
	}
	var ca, cb strings.Builder
	writeEventMap(&ca, a)
	if !writeStreamMap(&cb, b) {
		return false
	}
	return ca.String() == cb.String()
}

// The canonical text of an attribute value: its type, then its value; map
// members sorted by name, set members sorted. Both forms of an attribute
// value (the Lambda event's and the Streams API's) write the same text for
// the same value.

func writeEventMap(b *strings.Builder, m map[string]events.DynamoDBAttributeValue) {
	b.WriteString("M{")
	for _, k := range sortedKeys(m) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		writeEvent(b, m[k])
		b.WriteByte(',')
	}
	b.WriteByte('}')
}

func writeEvent(b *strings.Builder, v events.DynamoDBAttributeValue) {
	switch v.DataType() {
	case events.DataTypeString:
		b.WriteString("S" + strconv.Quote(v.String()))
	case events.DataTypeNumber:
		b.WriteString("N" + strconv.Quote(v.Number()))
	case events.DataTypeBinary:
		b.WriteString("B" + base64.StdEncoding.EncodeToString(v.Binary()))
	case events.DataTypeBoolean:
		b.WriteString("BOOL" + strconv.FormatBool(v.Boolean()))
	case events.DataTypeNull:
		b.WriteString("NULL")
	case events.DataTypeList:
		b.WriteString("L[")
		for _, x := range v.List() {
			writeEvent(b, x)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case events.DataTypeMap:
		writeEventMap(b, v.Map())
	case events.DataTypeStringSet:
		writeSet(b, "SS", v.StringSet())
	case events.DataTypeNumberSet:
		writeSet(b, "NS", v.NumberSet())
	case events.DataTypeBinarySet:
		writeSet(b, "BS", binaries(v.BinarySet()))
	default:
		b.WriteString("?")
	}
}

func writeStreamMap(b *strings.Builder, m map[string]streamtypes.AttributeValue) bool {
	b.WriteString("M{")
	for _, k := range sortedKeys(m) {
		b.WriteString(strconv.Quote(k))
		b.WriteByte(':')
		if !writeStream(b, m[k]) {
			return false
		}
		b.WriteByte(',')
	}
	b.WriteByte('}')
	return true
}

func writeStream(b *strings.Builder, v streamtypes.AttributeValue) bool {
	switch v := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		b.WriteString("S" + strconv.Quote(v.Value))
	case *streamtypes.AttributeValueMemberN:
		b.WriteString("N" + strconv.Quote(v.Value))
	case *streamtypes.AttributeValueMemberB:
		b.WriteString("B" + base64.StdEncoding.EncodeToString(v.Value))
	case *streamtypes.AttributeValueMemberBOOL:
		b.WriteString("BOOL" + strconv.FormatBool(v.Value))
	case *streamtypes.AttributeValueMemberNULL:
		b.WriteString("NULL")
	case *streamtypes.AttributeValueMemberL:
		b.WriteString("L[")
		for _, x := range v.Value {
			if !writeStream(b, x) {
				return false
			}
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case *streamtypes.AttributeValueMemberM:
		return writeStreamMap(b, v.Value)
	case *streamtypes.AttributeValueMemberSS:
		writeSet(b, "SS", v.Value)
	case *streamtypes.AttributeValueMemberNS:
		writeSet(b, "NS", v.Value)
	case *streamtypes.AttributeValueMemberBS:
		writeSet(b, "BS", binaries(v.Value))
	default:
		return false // a type this reader does not know: never equal
	}
	return true
}

func writeSet(b *strings.Builder, kind string, members []string) {
	s := slices.Clone(members)
	sort.Strings(s)
	b.WriteString(kind + "[")
	for _, m := range s {
		b.WriteString(strconv.Quote(m) + ",")
	}
	b.WriteByte(']')
}

func binaries(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, x := range bs {
		out[i] = base64.StdEncoding.EncodeToString(x)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// streamTable returns the table whose stream arn is
// (arn:<partition>:dynamodb:<region>:<account>:table/<name>/stream/<label>).
func streamTable(arn string) (string, bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "dynamodb" || parts[3] == "" || parts[4] == "" {
		return "", false
	}
	res := strings.Split(parts[5], "/")
	if len(res) != 4 || res[0] != "table" || res[1] == "" || res[2] != "stream" || res[3] == "" {
		return "", false
	}
	return res[1], true
}

// seqNumber parses a stream sequence number (decimal, up to 40 digits).
func seqNumber(s string) (*big.Int, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return nil, false
	}
	n, ok := new(big.Int).SetString(s, 10)
	return n, ok
}

// holds reports whether a shard's range holds sequence number n.
func holds(r *streamtypes.SequenceNumberRange, n *big.Int) bool {
	if r == nil {
		return false
	}
	start, ok := seqNumber(deref(r.StartingSequenceNumber))
	if !ok || n.Cmp(start) < 0 {
		return false
	}
	if r.EndingSequenceNumber == nil {
		return true // the shard is open
	}
	end, ok := seqNumber(*r.EndingSequenceNumber)
	return ok && n.Cmp(end) <= 0
}

// absent reports whether err says the stream, shard or sequence number does
// not exist (or is no longer kept): an answer about the records, not a
// failure to ask.
func absent(err error) bool {
	switch errorCode(err) {
	case "ResourceNotFoundException", "TrimmedDataAccessException", "ValidationException", "InvalidArgumentException":
		return true
	}
	return false
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
