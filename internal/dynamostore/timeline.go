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

// The timeline indexes: two KEYS_ONLY global secondary indexes of the
// ledger table that list one subject's or one destination's rows by
// creation time (ledger.Timeline). Their keys are written once, when a row
// is created, and never change, so a transition writes neither index.
// Only rows whose intent carried a subject_ref are in SubjectIndex (the
// attribute is sparse); every row is in DestinationIndex.
const (
	// AttrSubjectRef is a row's subject_ref, stored only when it has one.
	AttrSubjectRef = "subject_ref"
	// AttrDestinationRef is a row's destination_ref.
	AttrDestinationRef = attrDestinationRef
	// AttrCreatedAt is a row's creation time: the timeline indexes' sort
	// key. Its fixed-width UTC form (timeLayout) sorts as time does.
	AttrCreatedAt = attrCreatedAt

	// SubjectIndex is keyed on subject_ref and created_at.
	SubjectIndex = "subject"
	// DestinationIndex is keyed on destination_ref and created_at.
	DestinationIndex = "destination"
)

var _ ledger.Timeline = (*Store)(nil)

// timelineIndex returns the index and its partition key for kind.
func timelineIndex(kind ledger.RefKind) (index, attr string) {
	if kind == ledger.BySubject {
		return SubjectIndex, AttrSubjectRef
	}
	return DestinationIndex, AttrDestinationRef
}

// ListByRef implements ledger.Timeline: a Query of kind's index, newest
// first, for the keys (the index projects nothing else), then a consistent
// BatchGetItem of those rows. It never scans. A key whose row is gone (its
// retention ended between the two reads) is left out.
func (st *Store) ListByRef(ctx context.Context, kind ledger.RefKind, ref string, since time.Time, limit int) ([]ledger.Entry, error) {
	if err := kind.Check(ref); err != nil {
		return nil, err
	}
	index, attr := timelineIndex(kind)
	cond := expression.Key(attr).Equal(expression.Value(s(ref)))
	if !since.IsZero() {
		cond = cond.And(expression.Key(AttrCreatedAt).GreaterThanEqual(expression.Value(s(fmtTime(since)))))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("list by %s: %w", kind, err)
	}
	in := &dynamodb.QueryInput{
		TableName: &st.table, IndexName: aws.String(index), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ScanIndexForward: aws.Bool(false),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	var keys []string
	for {
		out, err := st.client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list by %s: query %s: %w", kind, index, err)
		}
		for _, it := range out.Items {
			if k, ok := it[AttrPK].(*types.AttributeValueMemberS); ok {
				keys = append(keys, k.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(keys) >= limit) {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if limit > 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	rows, err := st.batchGet(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("list by %s: %w", kind, err)
	}
	ledger.SortTimeline(rows)
	return rows, nil
}
