package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Budget is the DynamoDB ledger.Budget: a generic cell rate algorithm
// (GCRA, "virtual scheduling") per channel. One item per channel holds the
// theoretical arrival time (tat): the earliest free send time, in Unix
// microseconds. A booking is one conditional UpdateItem, with no read and no
// compare-and-set loop between instances:
//
//   - backlog: tat >= now and tat <= deadline: SET tat = tat + interval,
//     the booking is the old tat (ReturnValues UPDATED_OLD);
//   - idle: tat absent or tat < now: SET tat = now + interval, the booking
//     is now.
//
// The condition of each case excludes the other, so concurrent instances
// never get the same send time. When both fail, a consistent read tells a
// race (try again) from a budget full up to the deadline (ErrNoBudget,
// nothing booked).
//
// Every booking writes one item, so one channel's rate is bounded by the
// write rate of one partition key (1,000 writes per second in DynamoDB):
// enough for any SES or SMS quota this system targets.
type Budget struct {
	client   Client
	table    string
	interval map[ledger.Channel]time.Duration
	// idle remembers, per channel, which case won last, to try it first.
	idle map[ledger.Channel]*atomic.Bool
}

var _ ledger.Budget = (*Budget)(nil)

const attrTAT = "tat"

// NewBudget returns a Budget on table with rates in sends per second per
// channel; channels without a positive rate are not paced.
func NewBudget(client Client, table string, rates map[ledger.Channel]float64) *Budget {
	b := &Budget{client: client, table: table, interval: map[ledger.Channel]time.Duration{}, idle: map[ledger.Channel]*atomic.Bool{}}
	for ch, r := range rates {
		if r > 0 {
			b.interval[ch] = ledger.Interval(r)
			b.idle[ch] = &atomic.Bool{}
		}
	}
	return b
}

// BudgetTable returns the budget table definition: key pk, no stream.
func BudgetTable(name string) *dynamodb.CreateTableInput { return ContentTable(name) }

// CreateBudgetTable creates the budget table; one that already exists (a
// retried create whose first attempt landed) is left as it is.
func CreateBudgetTable(ctx context.Context, c TableClient, name string) error {
	var inUse *types.ResourceInUseException
	if _, err := c.CreateTable(ctx, BudgetTable(name)); err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", name, err)
	}
	return nil
}

func budgetKey(ch ledger.Channel) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("rate#" + string(ch))}
}

func micros(t time.Time) types.AttributeValue { return n(t.UnixMicro()) }

// maxBookingRaces bounds the rounds of both cases losing to each other.
const maxBookingRaces = 8

// Reserve implements ledger.Budget.
func (b *Budget) Reserve(ctx context.Context, ch ledger.Channel, now, notAfter time.Time) (time.Time, error) {
	iv, ok := b.interval[ch]
	if !ok {
		return now, nil
	}
	now = now.Truncate(time.Microsecond)
	if now.After(notAfter) {
		return time.Time{}, fmt.Errorf("%s budget: deadline already passed: %w", ch, ledger.ErrNoBudget)
	}
	for range maxBookingRaces {
		first, second := b.backlog, b.idleNow
		if b.idle[ch].Load() {
			first, second = second, first
		}
		for _, try := range []func(context.Context, ledger.Channel, time.Time, time.Time, time.Duration) (time.Time, bool, error){first, second} {
			at, booked, err := try(ctx, ch, now, notAfter, iv)
			if err != nil {
				return time.Time{}, fmt.Errorf("%s budget: %w", ch, err)
			}
			if booked {
				b.idle[ch].Store(at.Equal(now))
				return at, nil
			}
		}
		tat, err := b.tat(ctx, ch)
		if err != nil {
			return time.Time{}, fmt.Errorf("%s budget: %w", ch, err)
		}
		if tat.After(notAfter) && !tat.Before(now) {
			return time.Time{}, fmt.Errorf("%s budget: next send at %s: %w", ch, tat.UTC().Format(time.RFC3339Nano), ledger.ErrNoBudget)
		}
	}
	return time.Time{}, fmt.Errorf("%s budget: %d booking races lost: %w", ch, maxBookingRaces, ledger.ErrConflict)
}

// backlog books the send at tat when tat is in [now, notAfter].
func (b *Budget) backlog(ctx context.Context, ch ledger.Channel, now, notAfter time.Time, iv time.Duration) (time.Time, bool, error) {
	in := b.booking(ch, "SET #tat = #tat + :iv", "#tat >= :now AND #tat <= :limit", map[string]types.AttributeValue{
		":iv": n(iv.Microseconds()), ":now": micros(now), ":limit": micros(notAfter),
	})
	in.ReturnValues = types.ReturnValueUpdatedOld
	out, err := b.client.UpdateItem(ctx, in)
	if err != nil {
		return time.Time{}, false, conditionFailed(err)
	}
	old, ok := out.Attributes[attrTAT].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, false, errors.New("booking returned no previous tat")
	}
	us, err := strconv.ParseInt(old.Value, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("previous tat %q: %w", old.Value, err)
	}
	return time.UnixMicro(us).UTC(), true, nil
}

// idleNow books the send at now when the budget is idle (tat before now).
// Reserve has already refused a deadline before now.
func (b *Budget) idleNow(ctx context.Context, ch ledger.Channel, now, _ time.Time, iv time.Duration) (time.Time, bool, error) {
	_, err := b.client.UpdateItem(ctx, b.booking(ch, "SET #tat = :next", "attribute_not_exists(#tat) OR #tat < :now",
		map[string]types.AttributeValue{":next": micros(now.Add(iv)), ":now": micros(now)}))
	if err != nil {
		return time.Time{}, false, conditionFailed(err)
	}
	return now, true, nil
}

// booking is the conditional update of ch's tat that books one send: update
// under cond, with values; "#tat" names the tat attribute.
func (b *Budget) booking(ch ledger.Channel, update, cond string, values map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 &b.table,
		Key:                       budgetKey(ch),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#tat": attrTAT},
		ExpressionAttributeValues: values,
	}
}

// conditionFailed returns nil for a failed condition (the case did not
// apply) and err otherwise.
func conditionFailed(err error) error {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return err
}

func (b *Budget) tat(ctx context.Context, ch ledger.Channel) (time.Time, error) {
	out, err := b.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &b.table, Key: budgetKey(ch), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return time.Time{}, err
	}
	v, ok := out.Item[attrTAT].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, nil
	}
	us, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("tat %q: %w", v.Value, err)
	}
	return time.UnixMicro(us).UTC(), nil
}
