package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// ScanClient lists the DynamoDB call Scanner makes.
type ScanClient interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Scanner reads the whole ledger table page by page, for evidence exports
// and audits. Unlike ledger.Store.ListOpen its cost follows the table, not
// the open rows: it is an operator tool, never part of a sweep.
type Scanner struct {
	client ScanClient
	table  string
}

// NewScanner returns a Scanner on the ledger table.
func NewScanner(client ScanClient, table string) *Scanner {
	return &Scanner{client: client, table: table}
}

// ScanFilter selects the rows a scan returns. The zero value selects every row.
type ScanFilter struct {
	// UpdatedSince, if set, keeps rows whose last write is at or after it.
	UpdatedSince time.Time
	// UpdatedUntil, if set, keeps rows whose last write is before it, so
	// adjacent windows [a, b) and [b, c) neither overlap nor leave a gap.
	UpdatedUntil time.Time
	// PageSize is how many items DynamoDB evaluates per page (its Limit,
	// counted before the filter); zero lets DynamoDB fill 1 MB pages.
	PageSize int32
}

// condition is the filter on the time of a row's last write, and false for
// the zero window. A row in form 2 holds it in u (Unix ms), one in form 1
// in updated_at (text); a row holds one of them, so the filter is the
// window on either.
func (f ScanFilter) condition() (expression.ConditionBuilder, bool) {
	if f.UpdatedSince.IsZero() && f.UpdatedUntil.IsZero() {
		return expression.ConditionBuilder{}, false
	}
	window := func(name string, v func(time.Time) types.AttributeValue) expression.ConditionBuilder {
		attr := expression.Name(name)
		since := attr.GreaterThanEqual(expression.Value(v(f.UpdatedSince)))
		until := attr.LessThan(expression.Value(v(f.UpdatedUntil)))
		switch {
		case f.UpdatedSince.IsZero():
			return until
		case f.UpdatedUntil.IsZero():
			return since
		}
		return since.And(until)
	}
	form2 := window(f2UpdatedAt, func(t time.Time) types.AttributeValue { return n(ms(t)) })
	form1 := window(attrUpdatedAt, func(t time.Time) types.AttributeValue { return s(fmtTime(t)) })
	return form2.Or(form1), true
}

// Page reads one page of the table, starting after startKey ("" for the
// first page), and calls fn for every row on it that matches f, in the
// order DynamoDB returns them. The filter runs in DynamoDB (a
// FilterExpression on the time of the last write), so a page may hold no matching row.
//
// nextKey is the key to pass to the next call, or "" when the scan is
// complete. Because the table's key is the dedupe key alone, nextKey is a
// plain string that can be stored in a checkpoint and resumed from later.
// An error from fn stops the page and is returned as is.
func (sc *Scanner) Page(ctx context.Context, startKey string, f ScanFilter, fn func(ledger.Entry) error) (nextKey string, err error) {
	in := &dynamodb.ScanInput{TableName: &sc.table, ConsistentRead: aws.Bool(true)}
	if f.PageSize > 0 {
		in.Limit = aws.Int32(f.PageSize)
	}
	if startKey != "" {
		in.ExclusiveStartKey = keyOf(startKey)
	}
	if cond, ok := f.condition(); ok {
		expr, err := expression.NewBuilder().WithFilter(cond).Build()
		if err != nil {
			return "", fmt.Errorf("scan %s: %w", sc.table, err)
		}
		in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues = expr.Filter(), expr.Names(), expr.Values()
	}
	out, err := sc.client.Scan(ctx, in)
	if err != nil {
		return "", fmt.Errorf("scan %s: %w", sc.table, err)
	}
	for _, it := range out.Items {
		e, err := decode(it)
		if err != nil {
			key := "?"
			if v, ok := it[AttrPK].(*types.AttributeValueMemberS); ok {
				key = v.Value
			}
			return "", fmt.Errorf("scan %s: row %s: %w", sc.table, key, err)
		}
		if err := fn(e); err != nil {
			return "", err
		}
	}
	if len(out.LastEvaluatedKey) == 0 {
		return "", nil
	}
	v, ok := out.LastEvaluatedKey[AttrPK].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" {
		return "", fmt.Errorf("scan %s: last evaluated key has no string %s", sc.table, AttrPK)
	}
	return v.Value, nil
}

// All scans the whole table from the beginning, calling fn for every row
// that matches f. It is Page in a loop, for callers that need no checkpoint.
func (sc *Scanner) All(ctx context.Context, f ScanFilter, fn func(ledger.Entry) error) error {
	key := ""
	for {
		next, err := sc.Page(ctx, key, f, fn)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		key = next
	}
}
