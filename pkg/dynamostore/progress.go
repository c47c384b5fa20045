package dynamostore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Progress is the DynamoDB ledger.Progress: one item in the budget table
// (key "progress#dispatch") with the two marks and the last hand-back, in
// Unix milliseconds. A mark moves with one conditional UpdateItem that only
// ever moves it forward; a write that finds it already further is not an
// error. Reconcile reads it with one GetItem per re-drive pass.
type Progress struct {
	client Client
	table  string
}

var _ ledger.Progress = (*Progress)(nil)

// NewProgress returns the Progress kept in table (the budget table).
func NewProgress(client Client, table string) *Progress {
	return &Progress{client: client, table: table}
}

const (
	attrStreamThrough = "stream_through"
	attrStreamAt      = "stream_at"
	attrQueueThrough  = "queue_through"
	attrQueueAt       = "queue_at"
	attrRedriven      = "redriven_at"
)

func progressKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("progress#dispatch")}
}

// Advance implements ledger.Progress.
func (p *Progress) Advance(ctx context.Context, src ledger.Source, through, at time.Time) error {
	th, a := attrStreamThrough, attrStreamAt
	if src == ledger.FromQueue {
		th, a = attrQueueThrough, attrQueueAt
	}
	_, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(p.table),
		Key:                      progressKey(),
		UpdateExpression:         aws.String("SET #th = :th, #at = :at"),
		ConditionExpression:      aws.String("attribute_not_exists(#th) OR #th < :th"),
		ExpressionAttributeNames: map[string]string{"#th": th, "#at": a},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":th": n(through.UnixMilli()), ":at": n(at.UnixMilli()),
		},
	})
	if err := conditionFailed(err); err != nil {
		return fmt.Errorf("progress %s: %w", src, err)
	}
	return nil
}

// Redriven implements ledger.Progress.
func (p *Progress) Redriven(ctx context.Context, at time.Time) error {
	_, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(p.table),
		Key:                       progressKey(),
		UpdateExpression:          aws.String("SET #r = :r"),
		ExpressionAttributeNames:  map[string]string{"#r": attrRedriven},
		ExpressionAttributeValues: map[string]types.AttributeValue{":r": n(at.UnixMilli())},
	})
	if err != nil {
		return fmt.Errorf("progress redriven: %w", err)
	}
	return nil
}

// Marks implements ledger.Progress with a strongly consistent read.
func (p *Progress) Marks(ctx context.Context) (ledger.Marks, error) {
	out, err := p.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(p.table), Key: progressKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.Marks{}, fmt.Errorf("progress: %w", err)
	}
	ms := func(name string) time.Time {
		v, ok := out.Item[name].(*types.AttributeValueMemberN)
		if !ok {
			return time.Time{}
		}
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return time.Time{}
		}
		return time.UnixMilli(i).UTC()
	}
	return ledger.Marks{
		Stream:   ledger.Mark{Through: ms(attrStreamThrough), At: ms(attrStreamAt)},
		Queue:    ledger.Mark{Through: ms(attrQueueThrough), At: ms(attrQueueAt)},
		Redriven: ms(attrRedriven),
	}, nil
}
