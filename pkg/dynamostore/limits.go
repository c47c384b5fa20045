package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// LimitsClient is the part of the DynamoDB API the limit store uses.
type LimitsClient interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Limits is the DynamoDB ledger.Limiter and ledger.Challenges, on the
// limits table (key pk, TTL on ttl, no stream):
//
//   - "limit#<rule>#<key>#<window start>": one counter item per rule, key
//     and window, n the sends counted in that window and the one before
//     (ledger.Cap), expiring an hour after its window ends. An admission
//     counts in two of them per rule: its window's and the next one's.
//   - "admit#<dedupe key>": the message's admission, written in the same
//     transaction as its counts: the counters it counted in (their keys,
//     window included) and when. Its condition makes a repeat count
//     nothing, in any window, and a release reads it to take back exactly
//     those counters. It lives as long as the longest of them.
//   - "newest#<purpose>#<channel>#<subject>": the newest challenge of a
//     subject, by expiry.
//
// An admission is one TransactWriteItems: every counter and the marker, or
// none. A release is one strongly consistent GetItem of the marker and one
// TransactWriteItems that deletes it and takes one from each counter it
// names. The fingerprint that keys the destination counter appears in
// nothing else.
type Limits struct {
	client LimitsClient
	table  string
}

var (
	_ ledger.Limiter    = (*Limits)(nil)
	_ ledger.Challenges = (*Limits)(nil)
)

// NewLimits returns the limit store on table.
func NewLimits(client LimitsClient, table string) *Limits {
	return &Limits{client: client, table: table}
}

// LimitsTable returns the limits table definition: key pk, no stream (TTL
// is turned on by CreateLimitsTable).
func LimitsTable(name string) *dynamodb.CreateTableInput { return ContentTable(name) }

// CreateLimitsTable creates the limits table with TTL on; one that already
// exists is left as it is.
func CreateLimitsTable(ctx context.Context, c TableClient, name string) error {
	var inUse *types.ResourceInUseException
	if _, err := c.CreateTable(ctx, LimitsTable(name)); err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	if _, err := c.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(AttrTTL), Enabled: aws.Bool(true)},
	}); err != nil {
		return fmt.Errorf("enable ttl on %s: %w", name, err)
	}
	return nil
}

const (
	attrCount     = "n"
	attrCounters  = "counters"
	attrCountedAt = "at"
	// counterSlack keeps a counter an hour past its window.
	counterSlack = time.Hour
	// maxLimitRaces bounds retries of a transaction another one conflicted with.
	maxLimitRaces = 8
)

func markerKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("admit#" + key)}
}

// Admit implements ledger.Limiter.
func (l *Limits) Admit(ctx context.Context, key string, counts []ledger.Count, now, until time.Time) (ledger.Admission, error) {
	if len(counts) == 0 {
		return ledger.Admission{Limited: -1, CountedAt: now}, nil
	}
	items := make([]types.TransactWriteItem, 0, 2*len(counts)+1)
	var ids []string
	var of []itemOf // the count and counter item of each transaction item
	keep := until
	for i, c := range counts {
		for _, item := range ledger.Counters(c, now) {
			id := "limit#" + item.ID
			end := item.To.Add(counterSlack)
			keep = latest(keep, end)
			ids, of = append(ids, id), append(of, itemOf{i, item})
			items = append(items, types.TransactWriteItem{Update: &types.Update{
				TableName:                           &l.table,
				Key:                                 map[string]types.AttributeValue{AttrPK: s(id)},
				UpdateExpression:                    aws.String("ADD #n :one SET #ttl = :ttl"),
				ConditionExpression:                 aws.String("attribute_not_exists(#n) OR #n < :max"),
				ExpressionAttributeNames:            map[string]string{"#n": attrCount, "#ttl": AttrTTL},
				ExpressionAttributeValues:           map[string]types.AttributeValue{":one": n(1), ":max": n(int64(c.Cap.Max)), ":ttl": n(end.Unix())},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}})
		}
	}
	marker := markerKey(key)
	marker[attrCounters] = &types.AttributeValueMemberL{Value: sList(ids)}
	marker[attrCountedAt] = n(now.UnixMilli())
	marker[AttrTTL] = n(keep.Unix())
	items = append(items, types.TransactWriteItem{Put: &types.Put{
		TableName:                           &l.table,
		Item:                                marker,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	for range maxLimitRaces {
		_, err := l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		switch {
		case err == nil:
			return ledger.Admission{Limited: -1, CountedAt: now}, nil
		case !errors.As(err, &tce):
			return ledger.Admission{}, fmt.Errorf("limits: %w", err)
		case hasReason(tce, "TransactionConflict"):
			continue
		case !hasReason(tce, "ConditionalCheckFailed"):
			return ledger.Admission{}, fmt.Errorf("limits: %w", err)
		}
		return decide(of, tce.CancellationReasons)
	}
	return ledger.Admission{}, fmt.Errorf("limits: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

func hasReason(tce *types.TransactionCanceledException, code string) bool {
	return slices.ContainsFunc(tce.CancellationReasons, func(r types.CancellationReason) bool { return aws.ToString(r.Code) == code })
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func sList(vs []string) []types.AttributeValue {
	out := make([]types.AttributeValue, len(vs))
	for i, v := range vs {
		out[i] = s(v)
	}
	return out
}

// itemOf is what one counter update of an admission's transaction is: a
// counter item of the count at index count.
type itemOf struct {
	count int
	item  ledger.Counter
}

// decide reads the failed conditions of an admission (the counter items',
// then the marker's): a marker that exists makes a repeat; otherwise the
// first full counter item limits, naming its count.
func decide(of []itemOf, reasons []types.CancellationReason) (ledger.Admission, error) {
	failed := func(i int) bool {
		return i < len(reasons) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
	}
	if failed(len(of)) {
		old := reasons[len(of)].Item
		v, ok := old[attrCountedAt].(*types.AttributeValueMemberN)
		if !ok {
			return ledger.Admission{}, fmt.Errorf("limits: admission marker without %s", attrCountedAt)
		}
		ms, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return ledger.Admission{}, fmt.Errorf("limits: admission marker %s %q: %w", attrCountedAt, v.Value, err)
		}
		return ledger.Admission{Limited: -1, Repeat: true, CountedAt: time.UnixMilli(ms).UTC()}, nil
	}
	for i, o := range of {
		if !failed(i) {
			continue
		}
		var cnt int
		if v, ok := reasons[i].Item[attrCount].(*types.AttributeValueMemberN); ok {
			cnt, _ = strconv.Atoi(v.Value)
		}
		return ledger.Admission{Limited: o.count, Count: cnt, Window: o.item.From}, nil
	}
	return ledger.Admission{}, errors.New("limits: admission cancelled without a failed condition")
}

// Release implements ledger.Limiter: it reads the message's marker and,
// in one transaction conditioned on the marker still being there, deletes
// it and takes one from each counter it names. A counter that is gone (its
// window ended more than an hour ago) is left out; a marker that is gone
// (never counted, or released by another worker) makes it a no-op.
func (l *Limits) Release(ctx context.Context, key string) error {
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: markerKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("limits: release: %w", err)
	}
	list, ok := out.Item[attrCounters].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	var ids []string
	for _, v := range list.Value {
		if id, ok := v.(*types.AttributeValueMemberS); ok {
			ids = append(ids, id.Value)
		}
	}
	for range maxLimitRaces + len(ids) {
		items := make([]types.TransactWriteItem, 0, len(ids)+1)
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{
			TableName: &l.table, Key: markerKey(key),
			ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		}})
		for _, id := range ids {
			items = append(items, types.TransactWriteItem{Update: &types.Update{
				TableName:                 &l.table,
				Key:                       map[string]types.AttributeValue{AttrPK: s(id)},
				UpdateExpression:          aws.String("ADD #n :minus"),
				ConditionExpression:       aws.String("#n > :zero"),
				ExpressionAttributeNames:  map[string]string{"#n": attrCount},
				ExpressionAttributeValues: map[string]types.AttributeValue{":minus": n(-1), ":zero": n(0)},
			}})
		}
		_, err := l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &tce):
			return fmt.Errorf("limits: release: %w", err)
		case hasReason(tce, "TransactionConflict"):
			continue
		}
		r := tce.CancellationReasons
		if len(r) == 0 || aws.ToString(r[0].Code) == "ConditionalCheckFailed" {
			return nil // released meanwhile
		}
		kept := ids[:0:0]
		for i, id := range ids {
			if i+1 >= len(r) || aws.ToString(r[i+1].Code) != "ConditionalCheckFailed" {
				kept = append(kept, id)
			}
		}
		if len(kept) == len(ids) {
			return fmt.Errorf("limits: release: %w", err)
		}
		ids = kept // counters gone with their windows: nothing to take back there
	}
	return fmt.Errorf("limits: release: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

func newestKey(ref ledger.SubjectStream) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("newest#" + string(ref.Purpose) + "#" + string(ref.Channel) + "#" + ref.Subject)}
}

const (
	attrChallengeID = "challenge"
	// attrNewestIssued is when the newest challenge was issued (Unix ms):
	// what supersession orders by. An item an older release wrote orders
	// by expiry ("exp") instead; it has no "iss", and the next note
	// replaces it.
	attrNewestIssued = "iss"
	attrNewestExp    = "exp"
	// newestKeep keeps the newest challenge a day past its expiry.
	newestKeep = 24 * time.Hour
)

// Note implements ledger.Challenges: one conditional UpdateItem, which
// lands only if no newer challenge is recorded (ledger.Challenge.Newer:
// a later issue time, or the same one and a greater id).
func (l *Limits) Note(ctx context.Context, ref ledger.SubjectStream, c ledger.Challenge) error {
	_, err := l.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           &l.table,
		Key:                 newestKey(ref),
		UpdateExpression:    aws.String("SET #c = :c, #iss = :iss, #exp = :exp, #ttl = :ttl"),
		ConditionExpression: aws.String("attribute_not_exists(#iss) OR #iss < :iss OR (#iss = :iss AND #c <= :c)"),
		ExpressionAttributeNames: map[string]string{
			"#c": attrChallengeID, "#iss": attrNewestIssued, "#exp": attrNewestExp, "#ttl": AttrTTL,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": s(c.ID), ":iss": n(c.IssuedAt.UnixMilli()), ":exp": n(c.ExpiresAt.UnixMilli()),
			":ttl": n(c.ExpiresAt.Add(newestKeep).Unix()),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // a newer challenge is recorded: nothing to do
		return fmt.Errorf("newest challenge: %w", err)
	}
	return nil
}

// Newest implements ledger.Challenges: one strongly consistent GetItem.
func (l *Limits) Newest(ctx context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: newestKey(ref), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.Challenge{}, false, fmt.Errorf("newest challenge: %w", err)
	}
	c, ok := out.Item[attrChallengeID].(*types.AttributeValueMemberS)
	if !ok || out.Item[attrNewestIssued] == nil {
		return ledger.Challenge{}, false, nil
	}
	newest := ledger.Challenge{ID: c.Value}
	for _, f := range []struct {
		attr string
		dst  *time.Time
	}{{attrNewestIssued, &newest.IssuedAt}, {attrNewestExp, &newest.ExpiresAt}} {
		v, ok := out.Item[f.attr].(*types.AttributeValueMemberN)
		if !ok {
			return ledger.Challenge{}, false, fmt.Errorf("newest challenge: %s is not a number", f.attr)
		}
		ms, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return ledger.Challenge{}, false, fmt.Errorf("newest challenge: %s: %w", f.attr, err)
		}
		*f.dst = time.UnixMilli(ms).UTC()
	}
	return newest, true, nil
}
