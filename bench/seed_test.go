package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Seeding writes many rows fast: the rows are made by the ledger's use cases on the
// in-memory store (so their history is what the service writes), encoded by
// dynamostore's own Create into a capturing client (so the item format is
// the store's, not a copy of it), and written with BatchWriteItem.

// rowKind says which state seeded rows end in.
type rowKind int

const (
	closedRow      rowKind = iota // accepted: claim, dispatching, accepted
	dispatchingRow                // stuck in dispatching (the outcome was never recorded)
	claimedRow                    // claimed, never dispatched
)

// captureClient is a dynamostore.Client that records PutItem items and
// finds nothing; other calls are not made by Create.
type captureClient struct {
	dynamostore.Client
	mu    sync.Mutex
	items []map[string]types.AttributeValue
}

func (c *captureClient) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = append(c.items, in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

// lostOutcome is a store on which the outcome write of a dispatch never
// lands: the worker crashed after the send.
type lostOutcome struct{ *memstore.Store }

func (s lostOutcome) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if c.Next.State != ledger.Dispatching {
		return ledger.Entry{}, fmt.Errorf("worker crashed before recording %s", c.Next.State)
	}
	return s.Store.Apply(ctx, c)
}

// items returns the table items of count rows of kind, for challenges
// first..first+count-1, claimed at t0.
func items(t testing.TB, kind rowKind, first, count int, t0 time.Time) []map[string]types.AttributeValue {
	t.Helper()
	ctx := context.Background()
	mem := &memstore.Store{}
	var store ledger.Store = mem
	if kind == dispatchingRow {
		store = lostOutcome{mem}
	}
	cases := &ledgertest.UseCases{Ports: assemble.Ports{
		Store: store, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: ackTransport{}},
		Clock:      func() time.Time { return t0 }, Policy: ledger.DefaultPolicy(),
	}}
	capture := &captureClient{}
	enc := dynamostore.New(capture, "capture", dynamostore.DefaultShards)
	for i := first; i < first+count; i++ {
		in, sealed := ledgertest.Intent(i, ledger.Email, t0, 10*time.Minute)
		if _, err := cases.Claim(ctx, in, sealed, claimWorker); err != nil {
			t.Fatal(err)
		}
		if kind != claimedRow {
			_, err := cases.Dispatch(ctx, in.Key(), dispatchWorker)
			if err != nil && kind != dispatchingRow {
				t.Fatal(err)
			}
		}
		e, err := mem.Get(ctx, in.Key())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := enc.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	return capture.items
}

// batchWrite writes items to table with BatchWriteItem, 25 at a time, from
// a few goroutines, retrying unprocessed items.
func batchWrite(t testing.TB, client *dynamodb.Client, table string, items []map[string]types.AttributeValue) {
	t.Helper()
	ctx := context.Background()
	chunks := make(chan []map[string]types.AttributeValue)
	errs := make(chan error, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for chunk := range chunks {
				reqs := make([]types.WriteRequest, len(chunk))
				for i, it := range chunk {
					reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
				}
				pending := map[string][]types.WriteRequest{table: reqs}
				for try := 0; len(pending) > 0; try++ {
					if try > 10 {
						errs <- fmt.Errorf("batch write: unprocessed items after %d tries", try)
						return
					}
					out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						errs <- fmt.Errorf("batch write: %w", err)
						return
					}
					pending = out.UnprocessedItems
				}
			}
		})
	}
	for start := 0; start < len(items); start += 25 {
		select {
		case chunks <- items[start:min(start+25, len(items))]:
		case err := <-errs:
			close(chunks)
			wg.Wait()
			t.Fatal(err)
		}
	}
	close(chunks)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
