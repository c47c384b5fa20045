package dynamostore_test

import (
	"context"
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
)

// firstReadsPorts is the three stores on fresh tables and FirstReads over
// them, its client wrapped by wrap.
func firstReadsPorts(t *testing.T, wrap func(dynamostore.BatchGetter) dynamostore.BatchGetter) ledgertest.FirstReadsPorts {
	client, ledgerTable, contentTable := newTables(t)
	limitsTable := emulator.UniqueName(t, "limits")
	if err := dynamostore.CreateLimitsTable(context.Background(), client, limitsTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &limitsTable})
	})
	return ledgertest.FirstReadsPorts{
		FirstReads: dynamostore.NewFirstReads(wrap(client), ledgerTable, limitsTable, contentTable),
		Store:      dynamostore.New(client, ledgerTable, dynamostore.DefaultShards),
		Challenges: dynamostore.NewLimits(client, limitsTable),
		Content:    dynamostore.NewContent(client, contentTable),
	}
}

func TestFirstReadsContract(t *testing.T) {
	ledgertest.RunFirstReadsContract(t, func(t *testing.T) ledgertest.FirstReadsPorts {
		return firstReadsPorts(t, func(c dynamostore.BatchGetter) dynamostore.BatchGetter { return c })
	})
}

// TestFirstReadsRetryUnprocessedKeys: a BatchGetItem may leave keys
// unprocessed (throttling, or a response over its size); the emulator
// never does, so the first answer is cut to one table and the rest handed
// back as unprocessed.
func TestFirstReadsRetryUnprocessedKeys(t *testing.T) {
	ledgertest.RunFirstReadsContract(t, func(t *testing.T) ledgertest.FirstReadsPorts {
		return firstReadsPorts(t, func(c dynamostore.BatchGetter) dynamostore.BatchGetter { return &partialBatches{BatchGetter: c} })
	})
}

// partialBatches answers each request with one table's items and leaves
// the others' keys unprocessed.
type partialBatches struct {
	dynamostore.BatchGetter
}

func (p *partialBatches) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if len(in.RequestItems) < 2 {
		return p.BatchGetter.BatchGetItem(ctx, in, opts...)
	}
	rest := maps.Clone(in.RequestItems)
	var first string
	for table := range rest {
		first = table
		break
	}
	one := map[string]types.KeysAndAttributes{first: rest[first]}
	delete(rest, first)
	out, err := p.BatchGetter.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: one}, opts...)
	if err != nil {
		return out, err
	}
	out.UnprocessedKeys = rest
	return out, nil
}
