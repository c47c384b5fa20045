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
//   - "limit#<rule>#<key>#<window start>": one counter per rule, key and
//     window, n the sends counted, expiring an hour after its window ends.
//     The counter the message counts in first, if its cap is small (at most
//     memberCap), also holds the set of messages it counted (ids, the first
//     16 hex digits of each dedupe key): its condition makes a repeat
//     count nothing. Without such a counter, a marker item
//     "admit#<dedupe key>" does that, at one more write.
//   - "newest#<purpose>#<channel>#<subject>": the newest challenge of a
//     subject, by expiry.
//
// A message that counts in one counter is one conditional UpdateItem; in
// more, one TransactWriteItems: all count it or none does. The fingerprint
// that keys the destination counter appears in nothing else.
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
	attrCount   = "n"
	attrMembers = "ids"
	// memberCap is the largest cap whose counter keeps its members: 64
	// ids of 16 characters keep the item near 1 KB, one write unit.
	memberCap = 64
	// counterSlack keeps a counter an hour past its window.
	counterSlack = time.Hour
	// maxLimitRaces bounds retries of a transaction another one conflicted with.
	maxLimitRaces = 8
)

func memberID(key string) string { return key[:min(len(key), 16)] }

// Admit implements ledger.Limiter.
func (l *Limits) Admit(ctx context.Context, key string, counts []ledger.Count, now, until time.Time) (ledger.Admission, error) {
	if len(counts) == 0 {
		return ledger.Admission{Limited: -1}, nil
	}
	anchor := slices.IndexFunc(counts, func(c ledger.Count) bool { return c.Cap.Max <= memberCap })
	items := make([]types.TransactWriteItem, 0, len(counts)+1)
	for i, c := range counts {
		items = append(items, types.TransactWriteItem{Update: l.counter(c, now, i == anchor, key)})
	}
	if anchor < 0 {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName:                &l.table,
			Item:                     map[string]types.AttributeValue{AttrPK: s("admit#" + key), AttrTTL: n(until.Unix())},
			ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
			ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		}})
	}
	for range maxLimitRaces {
		a, retry, err := l.admitOnce(ctx, key, counts, items, anchor, now)
		if !retry {
			return a, err
		}
	}
	return ledger.Admission{}, fmt.Errorf("limits: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

// counter is the conditional increment of c's counter in its window at now.
func (l *Limits) counter(c ledger.Count, now time.Time, members bool, key string) *types.Update {
	end := ledger.WindowStart(c.Cap, now).Add(c.Cap.Window)
	u := &types.Update{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{AttrPK: s("limit#" + ledger.CounterID(c, now))},
		UpdateExpression:                    aws.String("ADD #n :one SET #ttl = :ttl"),
		ConditionExpression:                 aws.String("attribute_not_exists(#n) OR #n < :max"),
		ExpressionAttributeNames:            map[string]string{"#n": attrCount, "#ttl": AttrTTL},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":one": n(1), ":max": n(int64(c.Cap.Max)), ":ttl": n(end.Add(counterSlack).Unix())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if members {
		u.UpdateExpression = aws.String("ADD #n :one, #ids :id SET #ttl = :ttl")
		u.ConditionExpression = aws.String("(attribute_not_exists(#n) OR #n < :max) AND NOT contains(#ids, :mid)")
		u.ExpressionAttributeNames["#ids"] = attrMembers
		u.ExpressionAttributeValues[":id"] = &types.AttributeValueMemberSS{Value: []string{memberID(key)}}
		u.ExpressionAttributeValues[":mid"] = s(memberID(key))
	}
	return u
}

// admitOnce makes one try; retry reports a transaction conflict.
func (l *Limits) admitOnce(ctx context.Context, key string, counts []ledger.Count, items []types.TransactWriteItem, anchor int, now time.Time) (_ ledger.Admission, retry bool, _ error) {
	var olds []map[string]types.AttributeValue
	if len(items) == 1 {
		_, err := l.client.UpdateItem(ctx, updateInput(items[0].Update))
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return ledger.Admission{Limited: -1}, false, nil
		case !errors.As(err, &ccf):
			return ledger.Admission{}, false, fmt.Errorf("limits: %w", err)
		}
		olds = []map[string]types.AttributeValue{ccf.Item}
	} else {
		_, err := l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		var tce *types.TransactionCanceledException
		switch {
		case err == nil:
			return ledger.Admission{Limited: -1}, false, nil
		case !errors.As(err, &tce):
			return ledger.Admission{}, false, fmt.Errorf("limits: %w", err)
		}
		olds = make([]map[string]types.AttributeValue, len(items))
		failed := false
		for i, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				failed = true
				if i < len(olds) {
					olds[i] = r.Item
					if olds[i] == nil {
						olds[i] = map[string]types.AttributeValue{}
					}
				}
			case "TransactionConflict":
				return ledger.Admission{}, true, nil
			}
		}
		if !failed {
			return ledger.Admission{}, false, fmt.Errorf("limits: %w", err)
		}
	}
	return decide(key, counts, olds, anchor, now), false, nil
}

// decide reads the failed conditions: a counter or marker that already
// holds the message is a repeat; otherwise the first full counter limits.
func decide(key string, counts []ledger.Count, olds []map[string]types.AttributeValue, anchor int, now time.Time) ledger.Admission {
	if anchor < 0 && len(olds) > len(counts) && olds[len(counts)] != nil {
		return ledger.Admission{Limited: -1, Repeat: true}
	}
	if anchor >= 0 && olds[anchor] != nil {
		if ss, ok := olds[anchor][attrMembers].(*types.AttributeValueMemberSS); ok && slices.Contains(ss.Value, memberID(key)) {
			return ledger.Admission{Limited: -1, Repeat: true}
		}
	}
	for i, old := range olds {
		if old == nil || i >= len(counts) {
			continue
		}
		var cnt int
		if v, ok := old[attrCount].(*types.AttributeValueMemberN); ok {
			cnt, _ = strconv.Atoi(v.Value)
		}
		return ledger.Admission{Limited: i, Count: cnt, Window: ledger.WindowStart(counts[i].Cap, now)}
	}
	return ledger.Admission{Limited: 0, Window: ledger.WindowStart(counts[0].Cap, now)}
}

// Release implements ledger.Limiter: the counters of counts in their
// windows at admittedAt each lose one, in the one step that removes the
// message from the first small counter's members (or deletes its marker).
// That step's condition (the message is a member, the marker exists) makes a
// repeated release, or the release of a message never counted there,
// change nothing.
func (l *Limits) Release(ctx context.Context, key string, counts []ledger.Count, admittedAt time.Time) error {
	if len(counts) == 0 {
		return nil
	}
	anchor := slices.IndexFunc(counts, func(c ledger.Count) bool { return c.Cap.Max <= memberCap })
	items := make([]types.TransactWriteItem, 0, len(counts)+1)
	for i, c := range counts {
		u := &types.Update{
			TableName:                 &l.table,
			Key:                       map[string]types.AttributeValue{AttrPK: s("limit#" + ledger.CounterID(c, admittedAt))},
			UpdateExpression:          aws.String("ADD #n :minus"),
			ConditionExpression:       aws.String("#n > :zero"),
			ExpressionAttributeNames:  map[string]string{"#n": attrCount},
			ExpressionAttributeValues: map[string]types.AttributeValue{":minus": n(-1), ":zero": n(0)},
		}
		if i == anchor {
			u.UpdateExpression = aws.String("ADD #n :minus DELETE #ids :id")
			u.ConditionExpression = aws.String("#n > :zero AND contains(#ids, :mid)")
			u.ExpressionAttributeNames["#ids"] = attrMembers
			u.ExpressionAttributeValues[":id"] = &types.AttributeValueMemberSS{Value: []string{memberID(key)}}
			u.ExpressionAttributeValues[":mid"] = s(memberID(key))
		}
		items = append(items, types.TransactWriteItem{Update: u})
	}
	if anchor < 0 {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{
			TableName: &l.table, Key: map[string]types.AttributeValue{AttrPK: s("admit#" + key)},
			ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		}})
	}
	for range maxLimitRaces {
		var err error
		if len(items) == 1 {
			_, err = l.client.UpdateItem(ctx, updateInput(items[0].Update))
		} else {
			_, err = l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		}
		var ccf *types.ConditionalCheckFailedException
		var tce *types.TransactionCanceledException
		switch {
		case err == nil, errors.As(err, &ccf):
			return nil // released, or nothing to release
		case !errors.As(err, &tce):
			return fmt.Errorf("limits: release: %w", err)
		case !slices.ContainsFunc(tce.CancellationReasons, func(r types.CancellationReason) bool { return aws.ToString(r.Code) == "TransactionConflict" }):
			return nil // a condition failed: nothing to release
		}
	}
	return fmt.Errorf("limits: release: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

// updateInput is the one update of a transaction that has only one, made
// as a plain UpdateItem: a transaction would cost twice the write units.
func updateInput(u *types.Update) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression, ConditionExpression: u.ConditionExpression,
		ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure,
	}
}

func newestKey(ref ledger.SubjectStream) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("newest#" + string(ref.Purpose) + "#" + string(ref.Channel) + "#" + ref.Subject)}
}

const (
	attrChallengeID = "challenge"
	attrNewestExp   = "exp"
	// newestKeep keeps the newest challenge a day past its expiry.
	newestKeep = 24 * time.Hour
)

// Note implements ledger.Challenges: one conditional UpdateItem.
func (l *Limits) Note(ctx context.Context, ref ledger.SubjectStream, challenge string, expiresAt time.Time) error {
	_, err := l.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &l.table,
		Key:                      newestKey(ref),
		UpdateExpression:         aws.String("SET #c = :c, #exp = :exp, #ttl = :ttl"),
		ConditionExpression:      aws.String("attribute_not_exists(#exp) OR #exp < :exp OR (#exp = :exp AND #c = :c)"),
		ExpressionAttributeNames: map[string]string{"#c": attrChallengeID, "#exp": attrNewestExp, "#ttl": AttrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": s(challenge), ":exp": n(expiresAt.UnixMilli()), ":ttl": n(expiresAt.Add(newestKeep).Unix()),
		},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) { // a newer challenge is recorded: nothing to do
		return fmt.Errorf("newest challenge: %w", err)
	}
	return nil
}

// Newest implements ledger.Challenges: one strongly consistent GetItem.
func (l *Limits) Newest(ctx context.Context, ref ledger.SubjectStream) (string, time.Time, bool, error) {
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: newestKey(ref), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("newest challenge: %w", err)
	}
	c, ok := out.Item[attrChallengeID].(*types.AttributeValueMemberS)
	e, ok2 := out.Item[attrNewestExp].(*types.AttributeValueMemberN)
	if !ok || !ok2 {
		return "", time.Time{}, false, nil
	}
	ms, err := strconv.ParseInt(e.Value, 10, 64)
	if err != nil {
		return "", time.Time{}, false, fmt.Errorf("newest challenge: expiry %q: %w", e.Value, err)
	}
	return c.Value, time.UnixMilli(ms).UTC(), true, nil
}
