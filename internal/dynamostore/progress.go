package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Progress is the DynamoDB ledger.Progress: one item in the budget table
// (key "progress#dispatch") with the stream's lateness, the queue's mark and
// the last hand-back, in milliseconds. Each is one conditional UpdateItem
// (the lateness only grows within its window, the mark only moves forward);
// a write its condition refuses is not an error. Reconcile reads the item
// with one GetItem per re-drive pass.
//
// Lagging's answer and Marks' read are kept as what Seen returns: the newest
// by when its request started, so that a slow answer does not replace a
// newer one.
type Progress struct {
	client Client
	table  string

	mu        sync.Mutex
	seen      ledger.Marks
	seenSince time.Time // when the request that read seen started (monotonic)
}

var _ ledger.Progress = (*Progress)(nil)

// NewProgress returns the Progress kept in table (the budget table).
func NewProgress(client Client, table string) *Progress {
	return &Progress{client: client, table: table}
}

const (
	attrStreamBehind = "stream_behind"
	attrStreamAt     = "stream_at"
	attrStreamHeard  = "stream_heard"
	attrQueueThrough = "queue_through"
	attrQueueAt      = "queue_at"
	attrRedriven     = "redriven_at"
)

func progressKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s("progress#dispatch")}
}

// Lagging implements ledger.Progress. The stored lag comes back with the
// write: the new item when it was written, the old one when its condition
// kept it (no read of its own). A lateness kept out still records that the
// stream was heard, with a second write when the stored Heard is more than
// ledger.HeardEvery old: a second, small UpdateItem at most about this
// often, however many batches the window keeps out.
func (p *Progress) Lagging(ctx context.Context, behind time.Duration, at, staleBefore time.Time) (ledger.Lag, error) {
	started := time.Now()
	out, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(p.table),
		Key:                      progressKey(),
		UpdateExpression:         aws.String("SET #b = :b, #at = :at, #h = :at"),
		ConditionExpression:      aws.String("attribute_not_exists(#b) OR #b <= :b OR #at < :stale"),
		ExpressionAttributeNames: map[string]string{"#b": attrStreamBehind, "#at": attrStreamAt, "#h": attrStreamHeard},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":b": n(behind.Milliseconds()), ":at": n(at.UnixMilli()), ":stale": n(staleBefore.UnixMilli()),
		},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		m := marksOf(ccf.Item)
		if at.Sub(m.Stream.Heard) > ledger.HeardEvery {
			if err := p.heard(ctx, at); err != nil {
				return ledger.Lag{}, err
			}
			m.Stream.Heard = at
		}
		return p.saw(started, m).Stream, nil
	case err != nil:
		return ledger.Lag{}, fmt.Errorf("progress stream: %w", err)
	}
	return p.saw(started, marksOf(out.Attributes)).Stream, nil
}

// heard moves the stream's Heard to at, never back.
func (p *Progress) heard(ctx context.Context, at time.Time) error {
	_, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(p.table),
		Key:                       progressKey(),
		UpdateExpression:          aws.String("SET #h = :at"),
		ConditionExpression:       aws.String("attribute_not_exists(#h) OR #h < :at"),
		ExpressionAttributeNames:  map[string]string{"#h": attrStreamHeard},
		ExpressionAttributeValues: map[string]types.AttributeValue{":at": n(at.UnixMilli())},
	})
	if err := conditionFailed(err); err != nil {
		return fmt.Errorf("progress stream heard: %w", err)
	}
	return nil
}

// saw keeps m, read by a request that started at started, as what Seen
// returns unless a later request's answer is kept already. It returns m.
func (p *Progress) saw(started time.Time, m ledger.Marks) ledger.Marks {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !started.Before(p.seenSince) {
		p.seen, p.seenSince = m, started
	}
	return m
}

// Seen implements ledger.Progress.
func (p *Progress) Seen() ledger.Marks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// Advance implements ledger.Progress.
func (p *Progress) Advance(ctx context.Context, through, at time.Time) error {
	_, err := p.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(p.table),
		Key:                      progressKey(),
		UpdateExpression:         aws.String("SET #th = :th, #at = :at"),
		ConditionExpression:      aws.String("attribute_not_exists(#th) OR #th < :th"),
		ExpressionAttributeNames: map[string]string{"#th": attrQueueThrough, "#at": attrQueueAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":th": n(through.UnixMilli()), ":at": n(at.UnixMilli()),
		},
	})
	if err := conditionFailed(err); err != nil {
		return fmt.Errorf("progress queue: %w", err)
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
	started := time.Now()
	out, err := p.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(p.table), Key: progressKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.Marks{}, fmt.Errorf("progress: %w", err)
	}
	return p.saw(started, marksOf(out.Item)), nil
}

// marksOf decodes the progress item; an attribute missing or unreadable is
// a zero mark.
func marksOf(item map[string]types.AttributeValue) ledger.Marks {
	num := func(name string) (int64, bool) {
		v, ok := item[name].(*types.AttributeValueMemberN)
		if !ok {
			return 0, false
		}
		i, err := strconv.ParseInt(v.Value, 10, 64)
		return i, err == nil
	}
	ms := func(name string) time.Time {
		if i, ok := num(name); ok {
			return time.UnixMilli(i).UTC()
		}
		return time.Time{}
	}
	behind, _ := num(attrStreamBehind)
	return ledger.Marks{
		Stream:   ledger.Lag{Behind: time.Duration(behind) * time.Millisecond, At: ms(attrStreamAt), Heard: ms(attrStreamHeard)},
		Queue:    ledger.Mark{Through: ms(attrQueueThrough), At: ms(attrQueueAt)},
		Redriven: ms(attrRedriven),
	}
}
