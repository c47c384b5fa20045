package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// BatchGetter is the one DynamoDB call FirstReads makes.
type BatchGetter interface {
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// FirstReads is the DynamoDB ledger.FirstReads: one strongly consistent
// BatchGetItem over the ledger, limits and content tables, where three
// GetItems would cost the same read units and two more requests.
type FirstReads struct {
	client                  BatchGetter
	ledger, limits, content string
}

var _ ledger.FirstReads = (*FirstReads)(nil)

// NewFirstReads returns the first reads over the three tables; limits may
// be empty when no query names a subject stream.
func NewFirstReads(client BatchGetter, ledgerTable, limitsTable, contentTable string) *FirstReads {
	return &FirstReads{client: client, ledger: ledgerTable, limits: limitsTable, content: contentTable}
}

// ReadFirst implements ledger.FirstReads.
func (f *FirstReads) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	pending := map[string]types.KeysAndAttributes{}
	want := func(table string, key map[string]types.AttributeValue) {
		ka := pending[table]
		ka.Keys, ka.ConsistentRead = append(ka.Keys, key), aws.Bool(true)
		pending[table] = ka
	}
	want(f.ledger, keyOf(q.Key))
	var newest string // the newest-challenge item's key
	if q.Stream != nil {
		if f.limits == "" {
			return ledger.FirstRead{}, fmt.Errorf("first reads %s: a subject stream, and no limits table", q.Key)
		}
		key := newestKey(*q.Stream)
		newest = key[AttrPK].(*types.AttributeValueMemberS).Value
		want(f.limits, key)
	}
	if q.ContentKey != "" {
		want(f.content, keyOf(q.ContentKey))
	}
	items, err := batchGetAll(ctx, f.client, pending)
	if err != nil {
		return ledger.FirstRead{}, fmt.Errorf("first reads %s: %w", q.Key, err)
	}
	row, ok := items[itemAt(f.ledger, q.Key)]
	if !ok {
		return ledger.FirstRead{}, fmt.Errorf("get %s: %w", q.Key, ledger.ErrNotFound)
	}
	var out ledger.FirstRead
	if out.Entry, err = decode(row); err != nil {
		return ledger.FirstRead{}, fmt.Errorf("get %s: %w", q.Key, err)
	}
	if q.Stream != nil {
		c, ok, err := newestOf(items[itemAt(f.limits, newest)])
		if err != nil {
			return ledger.FirstRead{}, err
		}
		out.Newest = &ledger.Found[ledger.Challenge]{Value: c, OK: ok}
	}
	if q.ContentKey != "" {
		b, ok := items[itemAt(f.content, q.ContentKey)]["sealed"].(*types.AttributeValueMemberB)
		out.Content = &ledger.Found[[]byte]{OK: ok}
		if ok {
			out.Content.Value = b.Value
		}
	}
	return out, nil
}

// batchGetAll reads every key of pending, retrying unprocessed keys with
// backoff, and returns the items found, by itemAt(table, partition key).
func batchGetAll(ctx context.Context, client BatchGetter, pending map[string]types.KeysAndAttributes) (map[string]map[string]types.AttributeValue, error) {
	found := map[string]map[string]types.AttributeValue{}
	for tries := 0; len(pending) > 0; tries++ {
		if tries > 10 {
			return nil, fmt.Errorf("batch get: unprocessed keys after %d tries", tries)
		}
		out, err := client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
		if err != nil {
			return nil, fmt.Errorf("batch get: %w", err)
		}
		for table, items := range out.Responses {
			for _, it := range items {
				if pk, ok := it[AttrPK].(*types.AttributeValueMemberS); ok {
					found[itemAt(table, pk.Value)] = it
				}
			}
		}
		pending = out.UnprocessedKeys
		if len(pending) > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Duration(10<<min(tries, 6)) * time.Millisecond):
			}
		}
	}
	return found, nil
}

// itemAt is where batchGetAll files the item of table with partition key
// pk.
func itemAt(table, pk string) string { return table + "\x00" + pk }
