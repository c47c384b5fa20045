package bench

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/internal/emulator"
	"github.com/resetledger/resetledger/pkg/dynamostore"
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

// labels names the rig's tables in request breakdowns.
func (r *rig) labels() map[string]string {
	return map[string]string{r.ledger: "ledger", r.content: "content"}
}

// service returns a ledger service on the rig's tables through client
// (r.db, or r.meter to size writes).
func (r *rig) service(client dynamostore.Client, clk *clock, opener ledger.Opener, tr ledger.Transport) *ledger.Service {
	return &ledger.Service{
		Store:      dynamostore.New(client, r.ledger, dynamostore.DefaultShards),
		Content:    dynamostore.NewContent(client, r.content),
		Opener:     opener,
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
		Clock:      clk.Now,
		Policy:     ledger.DefaultPolicy(),
	}
}

// newKMSKey creates a symmetric key in the emulator and returns its ARN.
func newKMSKey(t testing.TB, client *kms.Client) string {
	t.Helper()
	out, err := client.CreateKey(context.Background(), &kms.CreateKeyInput{
		Description: aws.String(emulator.UniqueName(t, "bench")),
		KeySpec:     kmstypes.KeySpecSymmetricDefault,
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	arn := aws.ToString(out.KeyMetadata.Arn)
	t.Cleanup(func() {
		_, _ = client.ScheduleKeyDeletion(context.Background(), &kms.ScheduleKeyDeletionInput{KeyId: aws.String(arn), PendingWindowInDays: aws.Int32(7)})
	})
	return arn
}

// clock is a manual clock that starts at the wall clock, so TTLs the
// emulator may enforce stay in the future.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now().UTC().Truncate(time.Millisecond)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// ackTransport accepts every send, like a provider that answers at once.
type ackTransport struct{}

func (ackTransport) Capabilities() ledger.Capabilities { return ledger.Capabilities{} }
func (ackTransport) Send(context.Context, ledger.Send) (ledger.Ack, error) {
	return ledger.Ack{ID: "0100019a1b2c3d4e-5f607182-93a4-4b5c-8d9e-0f1a2b3c4d5e-000000"}, nil
}
