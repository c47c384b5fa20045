package dynamostore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// meteredClient asks every write for ReturnConsumedCapacity=INDEXES and
// adds up what the endpoint reports, by operation and by table or index.
type meteredClient struct {
	*dynamodb.Client
	mu    sync.Mutex
	units map[string]float64 // "<op> <table|index name>"
	// updates is the table's units of each UpdateItem, in order.
	updates []float64
}

func (m *meteredClient) add(op string, c *types.ConsumedCapacity) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c == nil {
		m.units[op+" unreported"]++
		return
	}
	if c.Table != nil && c.Table.CapacityUnits != nil {
		m.units[op+" table"] += *c.Table.CapacityUnits
		if op == "UpdateItem" {
			m.updates = append(m.updates, *c.Table.CapacityUnits)
		}
	}
	for name, ix := range c.GlobalSecondaryIndexes {
		if ix.CapacityUnits != nil {
			m.units[op+" index "+name] += *ix.CapacityUnits
		}
	}
}

func (m *meteredClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := m.Client.PutItem(ctx, in, opts...)
	if err == nil {
		m.add("PutItem", out.ConsumedCapacity)
	}
	return out, err
}

func (m *meteredClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	in.ReturnConsumedCapacity = types.ReturnConsumedCapacityIndexes
	out, err := m.Client.UpdateItem(ctx, in, opts...)
	if err == nil {
		m.add("UpdateItem", out.ConsumedCapacity)
	}
	return out, err
}

// TestTimelineIndexWriteCost measures what the two timeline indexes cost
// the writes of a message's life (claim, claimed→dispatching,
// dispatching→accepted) with ReturnConsumedCapacity=INDEXES, for an intent
// with and without subject_ref: the indexes are KEYS_ONLY and their keys
// never change, so only the claim's PutItem writes them (one index write
// each, a keys-only entry being far under 1 KB), and no transition does.
// The workers are named as the functions name them (function/request id),
// so the rows have their deployed size: subject_ref's bytes (its name and
// value) are in every later write of the row, which the log shows.
func TestTimelineIndexWriteCost(t *testing.T) {
	const messages = 10
	for _, subject := range []string{"", "acct-000001"} {
		t.Run(fmt.Sprintf("subject_ref=%q", subject), func(t *testing.T) {
			client, table, _ := newTables(t)
			m := &meteredClient{Client: client, units: map[string]float64{}}
			env := ledgertest.NewEnv(dynamostore.New(m, table, dynamostore.DefaultShards))
			ctx := context.Background()
			for i := range messages {
				in, sealed := ledgertest.Intent(i, ledger.Email, env.Clock.Now(), 10*time.Minute)
				in.SubjectRef = subject
				if _, err := env.Cases.Claim(ctx, in, sealed, "claim/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3b"); err != nil {
					t.Fatal(err)
				}
				if res, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/9c4e1f7a-2b3d-4a5e-8f6c-1d7b3e9a5c2f"); err != nil || res.Outcome != ledger.OutcomeAccepted {
					t.Fatalf("dispatch: %v %v", res.Outcome, err)
				}
				env.Clock.Advance(time.Second)
			}
			per := func(k string) float64 { return m.units[k] / messages }
			t.Logf("in total, as the emulator reports it: %v", m.units)
			if len(m.updates) == 2*messages {
				var toDispatching, toAccepted float64
				for i, u := range m.updates {
					if i%2 == 0 {
						toDispatching += u
					} else {
						toAccepted += u
					}
				}
				t.Logf("table per message: claimed->dispatching %.2f WCU, dispatching->accepted %.2f WCU", toDispatching/messages, toAccepted/messages)
				// The row a send starts from stays under 1 KB with both refs and
				// deployed-size workers: the history stores what it cannot derive
				// (item.go's event), and workers' request ids as bytes.
				if got := toDispatching / messages; got != 1 {
					t.Errorf("claimed->dispatching: %.2f WCU per message, want 1 (the dispatching row under 1 KB)", got)
				}
			} else {
				t.Errorf("%d ledger UpdateItems, want %d", len(m.updates), 2*messages)
			}
			t.Logf("timeline indexes: claim PutItem subject %.2f WCU, destination %.2f WCU; transitions (UpdateItem) subject %.2f, destination %.2f; table: claim %.2f, transitions %.2f",
				per("PutItem index "+dynamostore.SubjectIndex), per("PutItem index "+dynamostore.DestinationIndex),
				per("UpdateItem index "+dynamostore.SubjectIndex), per("UpdateItem index "+dynamostore.DestinationIndex),
				per("PutItem table"), per("UpdateItem table"))
			if n := m.units["PutItem unreported"] + m.units["UpdateItem unreported"]; n > 0 {
				t.Fatalf("%v writes reported no capacity: nothing measured", n)
			}
			wantSubject := 0.0
			if subject != "" {
				wantSubject = 1
			}
			for _, c := range []struct {
				key  string
				want float64
			}{
				{"PutItem index " + dynamostore.SubjectIndex, wantSubject},
				{"PutItem index " + dynamostore.DestinationIndex, 1},
				{"UpdateItem index " + dynamostore.SubjectIndex, 0},
				{"UpdateItem index " + dynamostore.DestinationIndex, 0},
			} {
				if got := per(c.key); got != c.want {
					t.Errorf("%s: %.2f WCU per message, want %.0f", c.key, got, c.want)
				}
			}
			if per("PutItem index "+dynamostore.IndexName) == 0 {
				t.Errorf("the open index reported no write at the claim: the endpoint does not report index capacity")
			}
		})
	}
}
