package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// limitsReport measures what the send limits cost per admitted message under
// the default policy (internal/settings): the counters' admission through
// dynamostore.Limits for an email with and without a subject_ref and an SMS
// with one, and supersession's Note (at claim) and Newest (at dispatch); then
// a limited message and a repeated admission.
func limitsReport(t *testing.T, rep *Report, sc scale) {
	b := newLimitsBench(t)
	n := sc.limitMessages
	shapes := []struct {
		name string
		ch   ledger.Channel
		subj bool
	}{
		{"email with subject_ref", ledger.Email, true},
		{"email without subject_ref", ledger.Email, false},
		{"SMS with subject_ref", ledger.SMS, true},
	}
	var lines []string
	var measured []string
	for s, shape := range shapes {
		tot := b.repeat(n, func(i int) (limitStep, error) {
			key, counts := b.message(s*1000+i, shape.ch, shape.subj, s*1000+i)
			return b.admit(key, counts, false, false)
		})
		lines = append(lines, tot.line(strings.ToUpper(shape.name[:1])+shape.name[1:], len(b.counts(shape.ch, shape.subj, 0, "x"))))
		measured = append(measured, fmt.Sprintf("%s %s req, %s WCU", map[int]string{0: "email+subject", 1: "email", 2: "SMS+subject"}[s], tot.per(tot.reqs), tot.per(tot.wcu)))
	}
	note := b.repeat(n, func(i int) (limitStep, error) {
		return b.measure(func() error {
			return b.limits.Note(b.ctx, b.stream(5000+i), ledger.Challenge{ID: fmt.Sprintf("chal-%06d", 5000+i), IssuedAt: b.now, ExpiresAt: b.now.Add(10 * time.Minute)})
		})
	})
	lines = append(lines, note.line("Note at claim (supersession on, subject_ref set)", 0))
	newest := b.repeat(n, func(i int) (limitStep, error) {
		return b.measure(func() error {
			c, ok, err := b.limits.Newest(b.ctx, b.stream(5000+i))
			id := c.ID
			if err == nil && (!ok || id != fmt.Sprintf("chal-%06d", 5000+i)) {
				err = fmt.Errorf("newest %q %v, want the noted challenge", id, ok)
			}
			return err
		})
	})
	lines = append(lines, newest.line("Newest at dispatch", 0))
	measured = append(measured, fmt.Sprintf("supersession +%s req (Note %s WCU, Newest %s RCU)",
		trimFloat(float64(note.reqs+newest.reqs)/float64(n)), note.per(note.wcu), newest.per(newest.rcu)))

	// A limited message: the sixth email to one destination in its
	// 10-minute window, each with its own subject.
	dest := settings.DefaultLimitDestination.Max
	var limited limitStep
	for i := 0; i <= dest; i++ {
		key, counts := b.message(7000+i, ledger.Email, true, 7000)
		last := i == dest
		st, err := b.admit(key, counts, last, false)
		if err != nil {
			t.Fatalf("limited message, admission %d: %v", i+1, err)
		}
		limited = st
	}
	lines = append(lines, fmt.Sprintf("Limited (email with subject_ref, send %d of a full %d/%s destination counter): %s",
		dest+1, dest, settings.FormatDuration(settings.DefaultLimitDestination.Window), limited.describe()))
	// A repeat: the first email with a subject_ref admitted again.
	key, counts := b.message(0, ledger.Email, true, 0)
	repeat, err := b.admit(key, counts, false, true)
	if err != nil {
		t.Fatalf("repeat admission: %v", err)
	}
	lines = append(lines, "Repeat admission (the same email with subject_ref admitted again, as a redelivered dispatch does): "+repeat.describe())
	measured = append(measured, fmt.Sprintf("limited %d req, ≤ %s WCU (computed)", limited.counts.Total(), trimFloat(limited.wcu)),
		fmt.Sprintf("repeat %d req, ≤ %s WCU (computed)", repeat.counts.Total(), trimFloat(repeat.wcu)))

	addLimitsFigure(rep, n, measured, lines)
}

// addLimitsFigure adds the send limits' figure: what was measured over n
// messages of each kind, and in its note the admissions' lines and what is
// not counted.
func addLimitsFigure(rep *Report, n int, measured, lines []string) {
	rep.Add(Figure{
		Name:     "Send limits' cost per admitted message (default policy)",
		Measured: strings.Join(measured, "; "),
		Target:   "— (reported)",
		Verdict:  NoTarget,
		Note: fmt.Sprintf("dynamostore.Limits on its own table, the default policy (destination %s, subject %s, SMS country %s, SMS global %s, supersession on), "+
			"%d messages of each kind, each to its own address and subject (the SMS country and global counters shared by all), counted by SDK middleware. "+
			"An admission is one TransactWriteItems: one conditional update per counter item (one item per rule and key, holding the counters of its recent windows as attributes named by window start; "+
			"the SMS country cap of an allow-listed region shares the global SMS cap's item, so an SMS writes one item for both) and a Put of the admission marker (admit#<dedupe key>), "+
			"which names the items and attributes it counted in so that a repeat counts nothing and a release takes back exactly those. "+
			"WCU and RCU as ministack reports them for ReturnConsumedCapacity=INDEXES (\"reported\"), and by DynamoDB's rules over the items read back before and after each write (\"computed\": "+
			"1 WCU per started KB of the larger item, 2 per item in a transaction, 1 RCU per strongly consistent 4 KB). "+
			"%s. "+
			"A refused request reports no capacity: its figures are computed, a cancelled transaction charged 2 WCU per KB per item, the item as it stands "+
			"(DynamoDB documents no rate for a cancelled transaction: an upper bound). "+
			"Not counted: the fingerprint's KMS GenerateMac (one per message with the destination limit on), the release of a superseded row's count "+
			"(one more request of the same shape, only for a row superseded after its admission), the second read of the newest challenge "+
			"by a row that waited in process for its send-rate slot (1 RCU), the reclaim of a refused admission with a subject_ref (one Query of the "+
			"KEYS_ONLY subject index and one BatchGetItem of at most admission.ReclaimLookback rows, plus the supersession and release of each older "+
			"unsent challenge of its stream and one more admission), and retries of a transaction another one conflicted with.",
			settings.Limit.Format(settings.DefaultLimitDestination), settings.Limit.Format(settings.DefaultLimitSubject),
			settings.Limit.Format(settings.DefaultLimitSMSCountry), settings.Limit.Format(settings.DefaultLimitSMSGlobal),
			n, strings.Join(lines, ". ")),
	})
}

// limitsBench is dynamostore.Limits on a fresh table through a counted,
// capacity-asking client, and the writes it made sized by a read-back.
type limitsBench struct {
	t       *testing.T
	ctx     context.Context
	counter *Counter
	capac   *capacity
	meter   *limitsMeter
	limits  *dynamostore.Limits
	fp      *fingerprint.Local
	now     time.Time
	labels  map[string]string // names the table in request breakdowns
}

func newLimitsBench(t *testing.T) *limitsBench {
	cfg := emulator.Config(t)
	b := &limitsBench{t: t, ctx: context.Background(), counter: &Counter{}, capac: &capacity{},
		fp: &fingerprint.Local{Key: []byte("bench-fingerprint-key-0123456789")}, now: time.Now().UTC()}
	db := dynamodb.NewFromConfig(cfg, b.counter.Option, b.capac.Option)
	raw := dynamodb.NewFromConfig(cfg)
	table := emulator.UniqueName(t, "bench-limits")
	t.Cleanup(func() {
		_, _ = raw.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	if err := dynamostore.CreateLimitsTable(b.ctx, raw, table); err != nil {
		t.Fatal(err)
	}
	if err := dynamodb.NewTableExistsWaiter(raw).Wait(b.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		t.Fatalf("wait for %s: %v", table, err)
	}
	b.labels = map[string]string{table: "limits"}
	b.meter = &limitsMeter{client: db, raw: raw}
	// As dispatch wires it: the default allow-list's regions share the
	// global SMS cap's item.
	b.limits = dynamostore.NewLimits(b.meter, table).ShareSMSCaps(settings.Defaults().SMSAllowedCountries.Regions())
	return b
}

// counts are the counters a message counts in under the default policy, in
// the order the ledger lists them: destination, subject, SMS country
// cap, SMS global.
func (b *limitsBench) counts(ch ledger.Channel, subject bool, dest int, subj string) []ledger.Count {
	fp, _ := b.fp.Fingerprint(b.ctx, ch, ledgertest.Message(dest, ch).To)
	cs := []ledger.Count{{Rule: ledger.RuleDestination, Key: string(ch) + "#" + fp, Cap: settings.DefaultLimitDestination}}
	if subject {
		cs = append(cs, ledger.Count{Rule: ledger.RuleSubject, Key: subj, Cap: settings.DefaultLimitSubject})
	}
	if ch == ledger.SMS {
		cs = append(cs, ledger.Count{Rule: ledger.RuleSMSCountryCap, Key: "US", Cap: settings.DefaultLimitSMSCountry},
			ledger.Count{Rule: ledger.RuleSMSGlobal, Key: string(ledger.SMS), Cap: settings.DefaultLimitSMSGlobal})
	}
	return cs
}

// message returns message i's dedupe key and counters, sent to address
// dest with subject i.
func (b *limitsBench) message(i int, ch ledger.Channel, subject bool, dest int) (string, []ledger.Count) {
	in, _ := ledgertest.Intent(i, ch, b.now, 10*time.Minute)
	return in.Key(), b.counts(ch, subject, dest, fmt.Sprintf("tenant-7:acct_%06d.eu", i))
}

func (b *limitsBench) stream(i int) ledger.SubjectStream {
	return ledger.SubjectStream{Subject: fmt.Sprintf("tenant-7:acct_%06d.eu", i), Purpose: ledger.PurposePasswordReset, Channel: ledger.Email}
}

// admit measures one Admit; it fails unless the answer is admitted, limited
// (by the destination counter) or a repeat, as wanted.
func (b *limitsBench) admit(key string, counts []ledger.Count, limited, repeat bool) (limitStep, error) {
	return b.measure(func() error {
		a, err := b.limits.Admit(b.ctx, key, counts, b.now, b.now.Add(15*time.Minute))
		switch {
		case err != nil:
			return err
		case limited && a.Limited != 0, !limited && a.Limited >= 0:
			return fmt.Errorf("admission %+v, want limited %v", a, limited)
		case a.Repeat != repeat:
			return fmt.Errorf("admission %+v, want repeat %v", a, repeat)
		}
		return nil
	})
}

// limitStep is what one call cost.
type limitStep struct {
	counts     Counts
	labels     map[string]string
	byOp       map[string]float64 // reported units by operation
	unreported int                // requests that reported none
	wcu, rcu   float64            // computed
	items      int                // items written (or refused)
	sizes      []int              // their larger sizes
	refused    bool
}

func (s limitStep) describe() string {
	return fmt.Sprintf("%s, %s WCU computed (%d items of %s B; %s)", s.counts.Format(s.labels), trimFloat(s.wcu), s.items,
		joinInts(s.sizes), map[bool]string{true: "refused: no capacity reported", false: "capacity reported"}[s.refused])
}

func (b *limitsBench) measure(f func() error) (limitStep, error) {
	b.counter.Reset()
	b.capac.reset()
	b.meter.reset()
	err := f()
	s := limitStep{counts: b.counter.Snapshot(), labels: b.labels}
	s.byOp, s.unreported = b.capac.snapshot()
	s.wcu, s.rcu, s.items, s.sizes, s.refused = b.meter.snapshot()
	if a := b.counter.Attempts(); err == nil && a != s.counts.Total() {
		err = fmt.Errorf("the SDK retried: %d attempts for %d requests", a, s.counts.Total())
	}
	return s, err
}

// limitTotals sums the steps of one kind of message.
type limitTotals struct {
	n              int
	reqs           int
	labels         map[string]string
	all            Counts
	reported       map[string]float64
	unreported     int
	wcu, rcu       float64
	maxSize, items int
}

func (tot *limitTotals) per(v any) string {
	switch v := v.(type) {
	case int:
		return trimFloat(float64(v) / float64(tot.n))
	case float64:
		return trimFloat(v / float64(tot.n))
	}
	return ""
}

// line describes the kind of message per message.
func (tot *limitTotals) line(name string, counters int) string {
	var rep []string
	for _, op := range []string{"UpdateItem", "TransactWriteItems", "GetItem"} {
		if u, ok := tot.reported[op]; ok {
			rep = append(rep, fmt.Sprintf("%s %s", op, tot.per(u)))
		}
	}
	reported := "none reported"
	if len(rep) > 0 {
		reported = strings.Join(rep, ", ") + " reported"
	}
	if tot.unreported > 0 {
		reported += fmt.Sprintf(" (%d requests reported none)", tot.unreported)
	}
	what := ""
	if counters > 0 {
		what = fmt.Sprintf(" (%d counter%s)", counters, map[bool]string{true: "s", false: ""}[counters > 1])
	}
	units := fmt.Sprintf("%s WCU computed", tot.per(tot.wcu))
	if tot.rcu > 0 {
		units = fmt.Sprintf("%s RCU computed", tot.per(tot.rcu))
	}
	return fmt.Sprintf("%s%s: %s request per message (%s); capacity units %s, %s; largest item %d B",
		name, what, tot.per(tot.reqs), tot.all.Format(tot.labels), reported, units, tot.maxSize)
}

// repeat measures n calls of f (f(i) for message i); a call the SDK retried
// is replaced by another, at most five times.
func (b *limitsBench) repeat(n int, f func(i int) (limitStep, error)) *limitTotals {
	tot := &limitTotals{n: n, labels: b.labels, all: Counts{}, reported: map[string]float64{}}
	discarded := 0
	for i := 0; i < n+discarded; i++ {
		s, err := f(i)
		if err != nil {
			if discarded++; discarded > 5 || !strings.Contains(err.Error(), "the SDK retried") {
				b.t.Fatalf("message %d: %v", i, err)
			}
			b.t.Logf("message %d discarded: %v", i, err)
			continue
		}
		tot.reqs += s.counts.Total()
		for k, v := range s.counts {
			tot.all[k] += v
		}
		for k, v := range s.byOp {
			tot.reported[k] += v
		}
		tot.unreported += s.unreported
		tot.wcu += s.wcu
		tot.rcu += s.rcu
		tot.items += s.items
		for _, sz := range s.sizes {
			tot.maxSize = max(tot.maxSize, sz)
		}
	}
	return tot
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

// capacity asks every DynamoDB request for ReturnConsumedCapacity=INDEXES
// and adds up the units the endpoint reports, by operation.
type capacity struct {
	mu         sync.Mutex
	byOp       map[string]float64
	unreported int
}

// Option installs c on a DynamoDB client.
func (c *capacity) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.capacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				switch in.Parameters.(type) {
				case *dynamodb.UpdateItemInput, *dynamodb.GetItemInput, *dynamodb.TransactWriteItemsInput:
					AskCapacity(in.Parameters, types.ReturnConsumedCapacityIndexes)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				c.add(awsmiddleware.GetOperationName(ctx), Consumed(out.Result))
				return out, md, err
			}), middleware.After)
	})
}

func (c *capacity) add(op string, got Consumption) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !got.Reported {
		c.unreported++
		return
	}
	if c.byOp == nil {
		c.byOp = map[string]float64{}
	}
	c.byOp[op] += got.Units
}

func (c *capacity) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byOp, c.unreported = nil, 0
}

func (c *capacity) snapshot() (map[string]float64, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]float64{}
	for k, v := range c.byOp {
		out[k] = v
	}
	return out, c.unreported
}

// limitsMeter is a dynamostore.LimitsClient that sizes every item a write
// touches from reads through raw (uncounted) before and after it, and every
// item a GetItem returns, by DynamoDB's rules.
type limitsMeter struct {
	client dynamostore.LimitsClient
	raw    *dynamodb.Client

	mu       sync.Mutex
	wcu, rcu float64
	sizes    []int
	refused  bool
}

func (m *limitsMeter) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wcu, m.rcu, m.sizes, m.refused = 0, 0, nil, false
}

func (m *limitsMeter) snapshot() (wcu, rcu float64, items int, sizes []int, refused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wcu, m.rcu, len(m.sizes), append([]int(nil), m.sizes...), m.refused
}

func (m *limitsMeter) size(ctx context.Context, table string, key map[string]types.AttributeValue) (int, error) {
	out, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return 0, fmt.Errorf("meter: read %s: %w", table, err)
	}
	return sizeOf(out.Item), nil
}

// write sizes the items of keys around do, each charged rate WCU per KB.
func (m *limitsMeter) write(ctx context.Context, table string, keys []map[string]types.AttributeValue, rate int, do func() error) error {
	before := make([]int, len(keys))
	for i, k := range keys {
		s, err := m.size(ctx, table, k)
		if err != nil {
			return err
		}
		before[i] = s
	}
	werr := do()
	m.mu.Lock()
	m.refused = m.refused || werr != nil
	m.mu.Unlock()
	for i, k := range keys {
		after, err := m.size(ctx, table, k)
		if err != nil {
			return err
		}
		sz := max(before[i], after)
		m.mu.Lock()
		m.wcu += float64(rate * WriteUnits(sz))
		m.sizes = append(m.sizes, sz)
		m.mu.Unlock()
	}
	return werr
}

// GetItem implements dynamostore.LimitsClient.
func (m *limitsMeter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.client.GetItem(ctx, in, opts...)
	if err == nil {
		m.mu.Lock()
		m.rcu += float64(ReadUnits(sizeOf(out.Item)))
		m.sizes = append(m.sizes, sizeOf(out.Item))
		m.mu.Unlock()
	}
	return out, err
}

// UpdateItem implements dynamostore.LimitsClient.
func (m *limitsMeter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	err = m.write(ctx, deref(in.TableName), []map[string]types.AttributeValue{in.Key}, 1, func() error {
		out, err = m.client.UpdateItem(ctx, in, opts...)
		return err
	})
	return out, err
}

// TransactWriteItems implements dynamostore.LimitsClient.
func (m *limitsMeter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (out *dynamodb.TransactWriteItemsOutput, err error) {
	table := ""
	var keys []map[string]types.AttributeValue
	for _, it := range in.TransactItems {
		switch {
		case it.Update != nil:
			table, keys = deref(it.Update.TableName), append(keys, it.Update.Key)
		case it.Put != nil:
			table, keys = deref(it.Put.TableName), append(keys, pkOf(it.Put.Item))
		case it.Delete != nil:
			table, keys = deref(it.Delete.TableName), append(keys, it.Delete.Key)
		}
	}
	err = m.write(ctx, table, keys, 2, func() error {
		out, err = m.client.TransactWriteItems(ctx, in, opts...)
		return err
	})
	return out, err
}
