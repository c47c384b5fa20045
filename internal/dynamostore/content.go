package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Content is the DynamoDB ledger.ContentStore. Its table has no stream and
// no point-in-time recovery; items expire (TTL) at the challenge's expiry
// and are deleted at every terminal state.
type Content struct {
	client Client
	table  string
}

var _ ledger.ContentStore = (*Content)(nil)

// NewContent returns a Content store on table.
func NewContent(client Client, table string) *Content { return &Content{client: client, table: table} }

// Put implements ledger.ContentStore with a conditional PutItem.
func (c *Content) Put(ctx context.Context, key string, sealed []byte, expiresAt time.Time) (bool, error) {
	_, err := c.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &c.table,
		Item: map[string]types.AttributeValue{
			AttrPK:   s(key),
			"sealed": &types.AttributeValueMemberB{Value: sealed},
			AttrTTL:  n(expiresAt.Unix()),
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("put content %s: %w", key, err)
	}
	return true, nil
}

// Get implements ledger.ContentStore.
func (c *Content) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := c.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("get content %s: %w", key, err)
	}
	b, ok := out.Item["sealed"].(*types.AttributeValueMemberB)
	if !ok {
		return nil, fmt.Errorf("get content %s: %w", key, ledger.ErrNotFound)
	}
	return b.Value, nil
}

// Delete implements ledger.ContentStore.
func (c *Content) Delete(ctx context.Context, key string) error {
	if _, err := c.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &c.table, Key: keyOf(key)}); err != nil {
		return fmt.Errorf("delete content %s: %w", key, err)
	}
	return nil
}
