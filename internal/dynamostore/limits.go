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
//   - "lim#<rule>#<key>": one counter item per rule and key, holding the
//     counters of its recent windows (ledger.Counters) as attributes named
//     by their window's start (Unix seconds), each the sends counted in
//     that window and the one before (ledger.Cap). An admission counts in
//     two of them, its window's and the next one's, in one write of the
//     item, and removes the attributes no worker reads any more (counterItem).
//     With ShareSMSCaps, the SMS country caps of a few regions are kept in
//     the global SMS cap's item, as attributes named "<region><window start>".
//   - "admit#<dedupe key>": the message's admission, written in the same
//     transaction as its counts: what it counted in (each item's key and
//     its attribute names, "cnt") and when. Its condition makes a repeat
//     count nothing, in any window, and a release reads it to take back
//     exactly those counters. It lives as long as the longest of them.
//   - "limit#<rule>#<key>#<window start>" (attribute n) and markers that
//     list them ("counters"): the form before issue 44. No admission
//     writes them; a release of such a marker still takes back exactly what
//     it names (releaseOld), and the items age out with their TTL.
//   - "newest#<purpose>#<channel>#<subject>": the newest challenge of a
//     subject, by issue time.
//
// An admission is one TransactWriteItems: one update per counter item and
// the marker, or none. A release is one strongly consistent GetItem of the
// marker and one TransactWriteItems that deletes it and takes one from each
// counter it names. The fingerprint that keys the destination counter
// appears in nothing else (the marker names the item by it, and the marker
// is in the same table).
type Limits struct {
	client LimitsClient
	table  string
	// shared holds the regions whose SMS country cap counts in the global
	// SMS cap's item (ShareSMSCaps).
	shared map[string]bool
}

var (
	_ ledger.Limiter    = (*Limits)(nil)
	_ ledger.Challenges = (*Limits)(nil)
)

// NewLimits returns the limit store on table.
func NewLimits(client LimitsClient, table string) *Limits {
	return &Limits{client: client, table: table}
}

// MaxSharedRegions is how many regions ShareSMSCaps keeps in the global SMS
// cap's item. Every SMS writes that item, so it must stay under 1 KB (one
// write unit, two in a transaction): three to four window attributes of
// about 16 bytes per region, and as many of the global cap, stay below
// 700 bytes for 8 regions.
const MaxSharedRegions = 8

// ShareSMSCaps keeps the SMS country cap of each of regions in the global
// SMS cap's item, so that an SMS admission writes one item for the two caps
// instead of two. It is meant for the SMS country allow-list
// (SMS_ALLOWED_COUNTRIES), and shares nothing if regions is empty or longer
// than MaxSharedRegions: every admission of the shared item also removes
// the stale attributes of every shared region, so the item stays small
// whatever the traffic. A region outside regions keeps an item of its own.
// Changing the shared regions moves their counts (docs/deploy.md). Call it
// before the store is used; it returns l.
func (l *Limits) ShareSMSCaps(regions []string) *Limits {
	l.shared = nil
	if len(regions) == 0 || len(regions) > MaxSharedRegions {
		return l
	}
	l.shared = map[string]bool{}
	for _, r := range regions {
		if len(r) == 2 && r[0] >= 'A' && r[0] <= 'Z' && r[1] >= 'A' && r[1] <= 'Z' {
			l.shared[r] = true
		}
	}
	return l
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
	attrCounted   = "cnt"
	attrCountedAt = "at"
	// maxLimitRaces bounds retries of a transaction another one conflicted with.
	maxLimitRaces = 8
)

func markerKey(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("admit#" + key)}
}

// Admit implements ledger.Limiter: one transaction of an update per counter
// item (counterItem) and the marker. A cancelled transaction is read from
// its cancellation reasons: the marker's (a repeat), an item whose TTL has
// passed (its stale attributes are removed with the next try), a full
// counter (limited).
func (l *Limits) Admit(ctx context.Context, key string, counts []ledger.Count, now, until time.Time) (ledger.Admission, error) {
	if len(counts) == 0 {
		return ledger.Admission{Limited: -1, CountedAt: now}, nil
	}
	items := l.counterItems(counts, now)
	for range maxLimitRaces {
		tx := make([]types.TransactWriteItem, 0, len(items)+1)
		for _, it := range items {
			tx = append(tx, types.TransactWriteItem{Update: l.admitUpdate(it, counts, now)})
		}
		tx = append(tx, types.TransactWriteItem{Put: l.marker(key, items, now, until)})
		_, err := l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
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
		a, retry, err := l.decide(items, counts, tce.CancellationReasons, now)
		if !retry {
			return a, err
		}
	}
	return ledger.Admission{}, fmt.Errorf("limits: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

// marker is the admission marker of key: what items counts in (each item's
// key and its attribute names) and when, kept until the later of until and
// the items' own TTL.
func (l *Limits) marker(key string, items []*counterItem, now, until time.Time) *types.Put {
	counted := map[string]types.AttributeValue{}
	keep := until
	for _, it := range items {
		names := make([]string, 0, 2*len(it.cells))
		for _, c := range it.cells {
			names = append(names, c.attr)
		}
		counted[it.pk] = &types.AttributeValueMemberL{Value: sList(names)}
		keep = latest(keep, it.ttl)
	}
	item := markerKey(key)
	item[attrCounted] = &types.AttributeValueMemberM{Value: counted}
	item[attrCountedAt] = n(now.UnixMilli())
	item[AttrTTL] = n(keep.Unix())
	return &types.Put{
		TableName:                           &l.table,
		Item:                                item,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
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

// decide reads the failed conditions of an admission (the counter items',
// then the marker's): a marker that exists makes a repeat; an item whose
// TTL has passed is planned again with its stale attributes (retry);
// otherwise the first full counter, in the order of the counts, limits.
func (l *Limits) decide(items []*counterItem, counts []ledger.Count, reasons []types.CancellationReason, now time.Time) (_ ledger.Admission, retry bool, _ error) {
	failed := func(i int) bool {
		return i < len(reasons) && aws.ToString(reasons[i].Code) == "ConditionalCheckFailed"
	}
	if failed(len(items)) {
		a, err := repeatOf(reasons[len(items)].Item)
		return a, false, err
	}
	for i, it := range items {
		if failed(i) && it.replan(l, counts, reasons[i].Item, now) {
			retry = true
		}
	}
	if retry {
		return ledger.Admission{}, true, nil
	}
	full := map[int]cellFull{}
	for i, it := range items {
		if !failed(i) {
			continue
		}
		for _, c := range it.cells {
			if got := numberOf(reasons[i].Item[c.attr]); got >= int64(counts[c.count].Cap.Max) {
				if _, ok := full[c.count]; !ok {
					full[c.count] = cellFull{got, c.from}
				}
			}
		}
	}
	for i := range counts {
		if f, ok := full[i]; ok {
			return ledger.Admission{Limited: i, Count: int(f.n), Window: f.from}, false, nil
		}
	}
	return ledger.Admission{}, false, errors.New("limits: admission cancelled without a failed condition")
}

// cellFull is a full counter: what it holds and the first window it counts.
type cellFull struct {
	n    int64
	from time.Time
}

// repeatOf reads the admission marker a repeat found.
func repeatOf(old map[string]types.AttributeValue) (ledger.Admission, error) {
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

// numberOf reads a number attribute; anything else (absent) is 0.
func numberOf(v types.AttributeValue) int64 {
	nv, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	x, _ := strconv.ParseInt(nv.Value, 10, 64)
	return x
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
	return newestOf(out.Item)
}

// newestOf decodes a newest-challenge item (Limits.Note); an item without
// one, or one an older release wrote (no issue time), is none.
func newestOf(item map[string]types.AttributeValue) (ledger.Challenge, bool, error) {
	c, ok := item[attrChallengeID].(*types.AttributeValueMemberS)
	if !ok || item[attrNewestIssued] == nil {
		return ledger.Challenge{}, false, nil
	}
	newest := ledger.Challenge{ID: c.Value}
	for _, f := range []struct {
		attr string
		dst  *time.Time
	}{{attrNewestIssued, &newest.IssuedAt}, {attrNewestExp, &newest.ExpiresAt}} {
		v, ok := item[f.attr].(*types.AttributeValueMemberN)
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
