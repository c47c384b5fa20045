package gate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/bench"
	"github.com/resetledger/resetledger/internal/sestransport"
)

// ddbMeter counts the DynamoDB requests the functions make, by operation,
// and the capacity they consume. It asks every request for
// ReturnConsumedCapacity=INDEXES and adds up what the endpoint reports
// (ministack computes it by DynamoDB's rules: 1 WCU per started KB of the
// larger of the old and new item, index writes on top, 1 RCU per strongly
// consistent read). A write whose condition failed returns no capacity; it
// is charged here as DynamoDB charges it, on the existing item's size
// (1 WCU when the item is not returned). ministack reports no capacity for
// BatchGetItem; its reads are sized from the items returned (1 RCU per
// started 4 KB, strongly consistent). TransactWriteItems (the send
// limits' counters) reports its capacity only when asked, like the others.
type ddbMeter struct {
	// Budget is the budget table: its successful UpdateItems are bookings.
	// Interval is the budget's spacing of sends (1/R).
	Budget   string
	Interval time.Duration
	// Tables names the tables by role (ledger, content, budget, limits)
	// for the breakdown by table.
	Tables map[string]string

	mu       sync.Mutex
	requests map[string]int
	// bookings counts send slots booked in the budget; slots holds the
	// booked send times by channel.
	bookings int
	slots    map[string][]time.Time
	// failed counts requests that returned an error, by operation.
	failed map[string]int
	// conditionFailed counts writes whose condition failed.
	conditionFailed int
	// wcu and rcu are the units reported; unreported counts successful
	// requests that reported none.
	wcu, rcu, conditionWCU float64
	// byTable counts requests, and wcuByTable the write units (failed
	// conditions included), by "Operation(table role)".
	byTable    map[string]int
	wcuByTable map[string]float64
	unreported map[string]int
	// operations and attempts count SDK operations and their HTTP
	// attempts, by service.
	operations, attempts map[string]int
}

func (m *ddbMeter) count(c *map[string]int, service string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if *c == nil {
		*c = map[string]int{}
	}
	(*c)[service]++
}

func (m *ddbMeter) register(s *middleware.Stack) error {
	// Every HTTP attempt of every service, after the retry loop: attempts
	// beyond the operations are the SDK's retries.
	if err := s.Finalize.Add(middleware.FinalizeMiddlewareFunc("surge.attempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			m.count(&m.attempts, awsmiddleware.GetServiceID(ctx))
			return next.HandleFinalize(ctx, in)
		}), middleware.After); err != nil {
		return err
	}
	if err := s.Initialize.Add(middleware.InitializeMiddlewareFunc("surge.operations",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			m.count(&m.operations, awsmiddleware.GetServiceID(ctx))
			return next.HandleInitialize(ctx, in)
		}), middleware.Before); err != nil {
		return err
	}
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("surge.ddbMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) != dynamodb.ServiceID {
				return next.HandleInitialize(ctx, in)
			}
			bench.AskCapacity(in.Parameters, types.ReturnConsumedCapacityIndexes)
			out, md, err := next.HandleInitialize(ctx, in)
			booking := false
			if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && aws.ToString(u.TableName) == m.Budget && isBooking(u) && err == nil {
				booking = true
				m.slot(u, out.Result)
			}
			m.add(awsmiddleware.GetOperationName(ctx), m.tableOf(in.Parameters), out.Result, err, booking)
			return out, md, err
		}), middleware.After)
}

// isBooking tells a send-rate booking from the other writes to the budget
// table (the dispatch marks): its key is a channel's rate item.
func isBooking(u *dynamodb.UpdateItemInput) bool {
	pk, ok := u.Key["pk"].(*types.AttributeValueMemberS)
	return ok && strings.HasPrefix(pk.Value, "rate#")
}

// slot records the send time a successful budget booking got: the old tat
// it returned (a backlog booking), or the new tat minus one interval (an
// idle booking, which books now).
func (m *ddbMeter) slot(in *dynamodb.UpdateItemInput, result any) {
	pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
	var us string
	if out, ok := result.(*dynamodb.UpdateItemOutput); ok {
		if v, ok := out.Attributes["tat"].(*types.AttributeValueMemberN); ok {
			us = v.Value
		}
	}
	shift := time.Duration(0)
	if us == "" {
		if v, ok := in.ExpressionAttributeValues[":next"].(*types.AttributeValueMemberN); ok {
			us, shift = v.Value, -m.Interval
		}
	}
	n, err := strconv.ParseInt(us, 10, 64)
	if pk == nil || err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.slots == nil {
		m.slots = map[string][]time.Time{}
	}
	ch := strings.TrimPrefix(pk.Value, "rate#")
	m.slots[ch] = append(m.slots[ch], time.UnixMicro(n).Add(shift))
}

// tableOf names the role of the table a request goes to ("?" if unknown,
// roles joined by "+" for a request to several).
func (m *ddbMeter) tableOf(params any) string {
	var names []string
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		names = []string{aws.ToString(in.TableName)}
	case *dynamodb.UpdateItemInput:
		names = []string{aws.ToString(in.TableName)}
	case *dynamodb.DeleteItemInput:
		names = []string{aws.ToString(in.TableName)}
	case *dynamodb.GetItemInput:
		names = []string{aws.ToString(in.TableName)}
	case *dynamodb.QueryInput:
		names = []string{aws.ToString(in.TableName)}
	case *dynamodb.BatchGetItemInput:
		names = slices.Collect(maps.Keys(in.RequestItems))
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Update != nil:
				names = append(names, aws.ToString(it.Update.TableName))
			case it.Put != nil:
				names = append(names, aws.ToString(it.Put.TableName))
			case it.ConditionCheck != nil:
				names = append(names, aws.ToString(it.ConditionCheck.TableName))
			case it.Delete != nil:
				names = append(names, aws.ToString(it.Delete.TableName))
			}
		}
	}
	roles := map[string]bool{}
	for _, n := range names {
		r, ok := m.Tables[n]
		if !ok {
			r = "?"
		}
		roles[r] = true
	}
	return strings.Join(slices.Sorted(maps.Keys(roles)), "+")
}

func (m *ddbMeter) add(op, table string, result any, err error, booking bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests == nil {
		m.requests, m.failed, m.unreported = map[string]int{}, map[string]int{}, map[string]int{}
		m.byTable, m.wcuByTable = map[string]int{}, map[string]float64{}
	}
	m.requests[op]++
	at := op + "(" + table + ")"
	m.byTable[at]++
	if booking {
		m.bookings++
	}
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			m.conditionFailed++
			u := float64(bench.WriteUnits(bench.ItemSize(ccf.Item)))
			m.conditionWCU += u
			m.wcuByTable[at] += u
			return
		}
		m.failed[op]++
		return
	}
	got := bench.Consumed(result)
	switch {
	case !got.Reported:
		m.unreported[op]++
	case got.Write:
		m.wcu += got.Units
		m.wcuByTable[at] += got.Units
	default:
		m.rcu += got.Units
	}
}

// meterSnapshot is what a ddbMeter counted.
type meterSnapshot struct {
	Requests, Failed, Unreported map[string]int
	// ByTable and WCUByTable are the requests and write units by
	// "Operation(table role)".
	ByTable                      map[string]int
	WCUByTable                   map[string]float64
	ConditionFailed, Bookings    int
	WCU, RCU, ConditionFailedWCU float64
	// Slots are the booked send times by channel name.
	Slots map[string][]time.Time
	// Operations and Attempts are every service's SDK operations and HTTP
	// attempts.
	Operations, Attempts map[string]int
}

func (m *ddbMeter) snapshot() meterSnapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	return meterSnapshot{
		Requests: maps.Clone(m.requests), Failed: maps.Clone(m.failed),
		ByTable: maps.Clone(m.byTable), WCUByTable: maps.Clone(m.wcuByTable),
		ConditionFailed: m.conditionFailed, Unreported: maps.Clone(m.unreported), Bookings: m.bookings,
		WCU: m.wcu, RCU: m.rcu, ConditionFailedWCU: m.conditionWCU, Slots: maps.Clone(m.slots),
		Operations: maps.Clone(m.operations), Attempts: maps.Clone(m.attempts),
	}
}

// Total is the number of requests.
func (s meterSnapshot) Total() int {
	n := 0
	for _, v := range s.Requests {
		n += v
	}
	return n
}

// Ops lists the operations counted, most requests first.
func (s meterSnapshot) Ops() []string {
	ops := slices.Collect(maps.Keys(s.Requests))
	slices.SortFunc(ops, func(a, b string) int { return s.Requests[b] - s.Requests[a] })
	return ops
}

// acceptance is one message a provider took.
type acceptance struct {
	Key string
	At  time.Time
}

// acceptLog records the sends SES took, provider-side: a SendEmail that
// passed the throttle and got an answer from the emulator. The throttle
// (pipelinetest.SESThrottle) answers in the Deserialize step, inside this
// middleware, so a throttled send is never recorded.
type acceptLog struct {
	mu  sync.Mutex
	got []acceptance
	// errs counts the SendEmail errors other than the injected throttling,
	// by text.
	errs map[string]int
}

func (l *acceptLog) register(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("surge.sesAccepted",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			send, ok := in.Parameters.(*sesv2.SendEmailInput)
			if !ok || awsmiddleware.GetServiceID(ctx) != sesv2.ServiceID {
				return next.HandleInitialize(ctx, in)
			}
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			var re *awshttp.ResponseError
			switch {
			case err == nil:
				l.add(tagValue(send, sestransport.TagIdempotencyKey), start)
			case !errors.As(err, &re) || re.RequestID != injectedRequestID:
				l.fail(err)
			}
			return out, md, err
		}), middleware.After)
}

func tagValue(in *sesv2.SendEmailInput, name string) string {
	for _, t := range in.EmailTags {
		if t.Name != nil && *t.Name == name && t.Value != nil {
			return *t.Value
		}
	}
	return ""
}

func (l *acceptLog) add(key string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, acceptance{Key: key, At: at})
}

// injectedRequestID is the request id of pipelinetest.SESThrottle's answers.
const injectedRequestID = "ses-throttle-injected"

func (l *acceptLog) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = map[string]int{}
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	l.errs[msg]++
}

func (l *acceptLog) errors() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.errs)
}

func (l *acceptLog) all() []acceptance {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.got)
}

// sdkLog counts what the SDK logs, by kind: responses whose CRC32 did not
// match (retried), bodies it could not drain, anything else.
type sdkLog struct {
	mu     sync.Mutex
	counts map[string]int
}

func (l *sdkLog) Logf(_ logging.Classification, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	kind := "other: " + msg
	switch {
	case strings.Contains(msg, "did not match expected checksum"):
		kind = "response failed its CRC32 check"
	case strings.Contains(msg, "use of closed network connection"):
		kind = "response body cut off (connection closed)"
	}
	if len(kind) > 200 {
		kind = kind[:200] + "…"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[kind]++
}

func (l *sdkLog) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.counts)
}
