package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// countingClient counts the UpdateItem requests made through the real
// client it wraps.
type countingClient struct {
	*dynamodb.Client
	updates atomic.Int64
}

func (c *countingClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	return c.Client.UpdateItem(ctx, in, opts...)
}

// indexEntry is a row's entry in the open-row index: its partition and sort key.
type indexEntry struct{ pk, due string }

// indexEntries reads the open-row index of table: every entry by row key.
func indexEntries(t *testing.T, client *dynamodb.Client, table string) map[string]indexEntry {
	t.Helper()
	out := map[string]indexEntry{}
	for _, st := range []ledger.State{ledger.Claimed, ledger.Dispatching} {
		for shard := range dynamostore.DefaultShards {
			q, err := client.Query(context.Background(), &dynamodb.QueryInput{
				TableName: &table, IndexName: aws.String(dynamostore.IndexName),
				KeyConditionExpression:    aws.String("#p = :p"),
				ExpressionAttributeNames:  map[string]string{"#p": dynamostore.AttrOpenPK},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: fmt.Sprintf("%s#%d", st, shard)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range q.Items {
				key := it[dynamostore.AttrPK].(*types.AttributeValueMemberS).Value
				out[key] = indexEntry{it[dynamostore.AttrOpenPK].(*types.AttributeValueMemberS).Value, it[dynamostore.AttrOpenDue].(*types.AttributeValueMemberS).Value}
			}
		}
	}
	return out
}

// TestClaimEntryKeptWhileDispatching: the move from claimed to dispatching
// is one UpdateItem that leaves the claim's index entry as it is (its
// partition and its open_due), so the index is written at the claim and
// at the end only; the end removes the entry.
func TestClaimEntryKeptWhileDispatching(t *testing.T) {
	raw, table, _ := newTables(t)
	client := &countingClient{Client: raw}
	env := ledgertest.NewEnv(dynamostore.New(client, table, dynamostore.DefaultShards))
	ctx := context.Background()
	in, sealed := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	if _, err := env.Cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
		t.Fatal(err)
	}
	claimed := indexEntries(t, raw, table)[in.Key()]
	if !strings.HasPrefix(claimed.pk, "claimed#") {
		t.Fatalf("claim's index entry %+v, want one in a claimed partition", claimed)
	}
	var during indexEntry
	var updatesAtSend int64
	env.Transport.Script = func(ledger.Send) ledgertest.Behavior {
		during, updatesAtSend = indexEntries(t, raw, table)[in.Key()], client.updates.Load()
		return ledgertest.Accept
	}
	res, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/test")
	if err != nil || res.Entry.State != ledger.Accepted {
		t.Fatalf("dispatch: %v %v", res.Entry.State, err)
	}
	if during != claimed || updatesAtSend != 1 {
		t.Fatalf("while dispatching: index entry %+v after %d UpdateItems, want the claim's %+v after 1", during, updatesAtSend, claimed)
	}
	if left, ok := indexEntries(t, raw, table)[in.Key()]; ok {
		t.Fatalf("accepted row still indexed: %+v", left)
	}
}

// TestClaimEntryMovedWhenDueAfterLease: with a lease shorter than the
// claim's wait for a re-drive, the kept entry would be due after the
// lease; the write that keeps it fails its condition and the move is
// written with the row's own entry, at its lease.
func TestClaimEntryMovedWhenDueAfterLease(t *testing.T) {
	raw, table, _ := newTables(t)
	client := &countingClient{Client: raw}
	env := ledgertest.NewEnv(dynamostore.New(client, table, dynamostore.DefaultShards))
	env.Cases.Policy.Lease, env.Cases.Policy.RedriveAfter = 10*time.Second, time.Minute
	ctx := context.Background()
	in, sealed := ledgertest.Intent(2, ledger.Email, env.Clock.Now(), 10*time.Minute)
	if _, err := env.Cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
		t.Fatal(err)
	}
	var during indexEntry
	var row ledger.Entry
	env.Transport.Script = func(ledger.Send) ledgertest.Behavior {
		during = indexEntries(t, raw, table)[in.Key()]
		row, _ = env.Store.Get(ctx, in.Key())
		return ledgertest.FailBeforeReach
	}
	if _, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/test"); err != nil {
		t.Fatal(err)
	}
	want := row.LeaseUntil.UTC().Format("2006-01-02T15:04:05.000Z")
	if row.State != ledger.Dispatching || !strings.HasPrefix(during.pk, "dispatching#") || during.due != want {
		t.Fatalf("while dispatching (%s): index entry %+v, want one in a dispatching partition at %s", row.State, during, want)
	}
	if n := client.updates.Load(); n < 2 {
		t.Fatalf("%d UpdateItems, want the kept entry's refused write and the move", n)
	}
}

// TestOwnDispatchingEntryStillListed: a dispatching row indexed in the
// dispatching partitions at its lease, as every move to dispatching was
// before claims kept their entry, is listed at its lease as before.
func TestOwnDispatchingEntryStillListed(t *testing.T) {
	raw, table, _ := newTables(t)
	st := dynamostore.New(raw, table, dynamostore.DefaultShards)
	env := ledgertest.NewEnv(st)
	ctx := context.Background()
	in, sealed := ledgertest.Intent(3, ledger.SMS, env.Clock.Now(), 10*time.Minute)
	res, err := env.Cases.Claim(ctx, in, sealed, "claim/test")
	if err != nil {
		t.Fatal(err)
	}
	now := env.Clock.Now().Add(time.Second)
	next := res.Entry
	next.State, next.Version, next.UpdatedAt, next.Attempts = ledger.Dispatching, next.Version+1, now, 1
	next.RedriveAt, next.LeaseUntil = time.Time{}, now.Add(2*time.Minute)
	next.History = append(next.History, ledger.Event{ID: "ev-own", Kind: ledger.KindTransition, From: ledger.Claimed, To: ledger.Dispatching, At: now})
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: st.Item(next)}); err != nil {
		t.Fatal(err)
	}
	if e := indexEntries(t, raw, table)[in.Key()]; !strings.HasPrefix(e.pk, "dispatching#") {
		t.Fatalf("index entry %+v, want one in a dispatching partition", e)
	}
	for _, c := range []struct {
		by   time.Time
		want int
	}{{next.LeaseUntil.Add(-time.Millisecond), 0}, {next.LeaseUntil, 1}} {
		rows, err := st.ListOpen(ctx, ledger.Dispatching, c.by, 0)
		times, err2 := st.DueTimes(ctx, ledger.Dispatching, c.by)
		if err != nil || err2 != nil || len(rows) != c.want || len(times) != c.want {
			t.Fatalf("due by %s: %d rows, %d due times, want %d (%v %v)", c.by, len(rows), len(times), c.want, err, err2)
		}
	}
	if rows, _ := st.ListOpen(ctx, ledger.Claimed, time.Time{}, 0); len(rows) != 0 {
		t.Fatalf("listed as claimed: %d rows", len(rows))
	}
}

// rowReads counts the rows BatchGetItem reads through the real client it
// wraps.
type rowReads struct {
	*dynamodb.Client
	rows atomic.Int64
}

func (c *rowReads) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	for _, ka := range in.RequestItems {
		c.rows.Add(int64(len(ka.Keys)))
	}
	return c.Client.BatchGetItem(ctx, in, opts...)
}

// TestDispatchingListingsReadLongWaitingClaimsOnly: the dispatching
// listing and figure read the claimed partitions' rows only for entries
// due a minute (keptLead) before them, so a claim waiting for the stream
// is not read until it has waited REDRIVE_AFTER and a minute; from then on
// each of them reads it once.
func TestDispatchingListingsReadLongWaitingClaimsOnly(t *testing.T) {
	raw, table, _ := newTables(t)
	client := &rowReads{Client: raw}
	st := dynamostore.New(client, table, dynamostore.DefaultShards)
	env := ledgertest.NewEnv(st)
	ctx := context.Background()
	const claims = 8
	for i := range claims {
		in, sealed := ledgertest.Intent(100+i, ledger.Email, env.Clock.Now(), 10*time.Minute)
		if _, err := env.Cases.Claim(ctx, in, sealed, "claim/test"); err != nil {
			t.Fatal(err)
		}
	}
	redrive := env.Cases.Policy.RedriveAfter
	for _, c := range []struct {
		waited time.Duration
		reads  int64
	}{{redrive + 30*time.Second, 0}, {redrive + 61*time.Second, 2 * claims}} {
		now := env.Clock.Now().Add(c.waited)
		client.rows.Store(0)
		rows, err := st.ListOpen(ctx, ledger.Dispatching, now, 500)
		times, err2 := st.DueTimes(ctx, ledger.Dispatching, now)
		if err != nil || err2 != nil || len(rows) != 0 || len(times) != 0 {
			t.Fatalf("claims listed as dispatching: %d rows, %d due times (%v %v)", len(rows), len(times), err, err2)
		}
		if got := client.rows.Load(); got != c.reads {
			t.Fatalf("claims waiting %s: %d rows read, want %d", c.waited, got, c.reads)
		}
	}
}
