package bench

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// rig is a pair of fresh ledger and content tables on the emulator, a
// DynamoDB client whose requests are counted, an uncounted one, and a Meter
// sizing the writes made through it.
type rig struct {
	cfg     aws.Config
	counter *Counter
	db      *dynamodb.Client // counted
	raw     *dynamodb.Client // not counted
	meter   *Meter           // sizes writes made through db
	ledger  string           // table names
	content string
	budget  string            // "" until addBudget
	extra   map[string]string // further tables' labels (label)
}

func newRig(t testing.TB, prefix string) *rig {
	t.Helper()
	cfg := emulator.Config(t)
	r := &rig{cfg: cfg, counter: &Counter{}}
	r.db = dynamodb.NewFromConfig(cfg, r.counter.Option)
	r.raw = dynamodb.NewFromConfig(cfg)
	r.meter = &Meter{Client: r.db, Raw: r.raw, IndexHash: dynamostore.AttrOpenPK, IndexRange: dynamostore.AttrOpenDue}
	r.ledger = emulator.UniqueName(t, prefix+"-ledger")
	r.content = emulator.UniqueName(t, prefix+"-content")
	ctx := context.Background()
	t.Cleanup(func() {
		for _, name := range []string{r.ledger, r.content} {
			_, _ = r.raw.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	if err := dynamostore.CreateTables(ctx, r.raw, r.ledger, r.content); err != nil {
		t.Fatalf("create tables: %v", err)
	}
	w := dynamodb.NewTableExistsWaiter(r.raw)
	for _, name := range []string{r.ledger, r.content} {
		if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
			t.Fatalf("wait for %s: %v", name, err)
		}
	}
	return r
}

// addBudget creates a send-rate budget table for the rig (r.budget).
func (r *rig) addBudget(t testing.TB, prefix string) {
	t.Helper()
	ctx := context.Background()
	r.budget = emulator.UniqueName(t, prefix+"-budget")
	t.Cleanup(func() {
		_, _ = r.raw.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(r.budget)})
	})
	if err := dynamostore.CreateBudgetTable(ctx, r.raw, r.budget); err != nil {
		t.Fatalf("create budget table: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(r.raw).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(r.budget)}, time.Minute); err != nil {
		t.Fatalf("wait for %s: %v", r.budget, err)
	}
}

// labels names the rig's tables in request breakdowns.
func (r *rig) labels() map[string]string {
	l := map[string]string{r.ledger: "ledger", r.content: "content"}
	if r.budget != "" {
		l[r.budget] = "budget"
	}
	for table, label := range r.extra {
		l[table] = label
	}
	return l
}

// service returns a ledger service on the rig's tables through client
// (r.db, or r.meter to size writes).
func (r *rig) service(client dynamostore.Client, clk *ledgertest.Clock, opener ledger.Opener, tr ledger.Transport) *ledgertest.UseCases {
	return &ledgertest.UseCases{Ports: assemble.Ports{
		Store:      dynamostore.New(client, r.ledger, dynamostore.DefaultShards),
		Content:    dynamostore.NewContent(client, r.content),
		Opener:     opener,
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
		Clock:      clk.Now,
		Policy:     ledger.DefaultPolicy(),
		// A stream record's row and content in one request, as the
		// dispatch function reads them (no limits table here).
		FirstReads: dynamostore.NewFirstReads(client, r.ledger, "", r.content),
	}}
}

// newClock is a manual clock that starts at the wall clock, so TTLs the
// emulator may enforce stay in the future.
func newClock() *ledgertest.Clock {
	return ledgertest.NewClockAt(time.Now().UTC().Truncate(time.Millisecond))
}

// ackTransport accepts every send, like a provider that answers at once.
type ackTransport struct{}

func (ackTransport) Capabilities() ledger.Capabilities { return ledger.Capabilities{} }
func (ackTransport) Send(context.Context, ledger.Send) (ledger.Ack, error) {
	return ledger.Ack{ID: "0100019a1b2c3d4e-5f607182-93a4-4b5c-8d9e-0f1a2b3c4d5e-000000"}, nil
}
