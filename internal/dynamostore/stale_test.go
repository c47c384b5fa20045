package dynamostore_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// movedOn reads the rows it names as having moved on to accepted while the
// open-row index still lists them: the index is eventually consistent.
type movedOn struct {
	dynamostore.Client
	keys map[string]bool
}

func (c movedOn) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.Client.BatchGetItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	for table, items := range out.Responses {
		for i, it := range items {
			if pk, ok := it[dynamostore.AttrPK].(*types.AttributeValueMemberS); ok && c.keys[pk.Value] {
				moved := maps.Clone(it)
				moved[dynamostore.AttrState] = &types.AttributeValueMemberS{Value: string(ledger.Accepted)}
				out.Responses[table][i] = moved
			}
		}
	}
	return out, nil
}

// TestListOpenLooksPastStaleEntries: when the soonest due index entries
// name rows that have moved on, ListOpen reads further instead of coming
// back short (a listing of limit 1 came back empty with due rows behind
// them, and the surge's drain check took an empty listing for drained).
func TestListOpenLooksPastStaleEntries(t *testing.T) {
	ctx := context.Background()
	client, table, _ := newTables(t)
	moved := movedOn{Client: client, keys: map[string]bool{}}
	store := dynamostore.New(moved, table, 1)
	env := ledgertest.NewEnv(store)
	now := env.Clock.Now()
	var keys []string
	for i := range 5 { // expiring at 10..14 minutes: listed in that order
		in, sealed := ledgertest.Intent(700+i, ledger.Email, now, time.Duration(10+i)*time.Minute)
		if _, err := env.Cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, in.Key())
	}
	for _, k := range keys[:3] {
		moved.keys[k] = true
	}
	for _, tc := range []struct {
		limit int
		want  []string
	}{{1, keys[3:4]}, {2, keys[3:5]}, {5, keys[3:5]}, {0, keys[3:5]}} {
		rows, err := store.ListOpen(ctx, ledger.Claimed, time.Time{}, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range rows {
			got = append(got, e.Key)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("limit %d: %d rows, want %d (the first three index entries are stale)", tc.limit, len(got), len(tc.want))
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("limit %d: row %d is %s, want %s", tc.limit, i, got[i], tc.want[i])
			}
		}
	}
}
