package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
)

// Call names one kind of DynamoDB request: the operation and the table it
// addressed ("" for operations on several tables).
type Call struct {
	Op    string
	Table string
}

// Counter counts DynamoDB requests by operation and table. It sits on the
// client's middleware stack (see Option), so it sees every operation the
// code under test makes, whichever package makes it. Retries of one
// operation count once: a retry is not a request the ledger asked for. It is
// safe for concurrent use.
type Counter struct {
	mu       sync.Mutex
	counts   map[Call]int
	attempts int
	elapsed  map[string]time.Duration // by operation
}

// Option installs c on a DynamoDB client:
//
//	dynamodb.NewFromConfig(cfg, counter.Option)
func (c *Counter) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, c.register)
}

func (c *Counter) register(stack *middleware.Stack) error {
	// Finalize runs once per attempt, after the retry middleware.
	if err := stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("bench.CounterAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.attempts++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After); err != nil {
		return err
	}
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.Counter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			op := awsmiddleware.GetOperationName(ctx)
			c.add(Call{Op: op, Table: tableOf(in.Parameters)})
			start := time.Now()
			out, md, err := next.HandleInitialize(ctx, in)
			c.mu.Lock()
			if c.elapsed == nil {
				c.elapsed = map[string]time.Duration{}
			}
			c.elapsed[op] += time.Since(start)
			c.mu.Unlock()
			return out, md, err
		}), middleware.Before)
}

func (c *Counter) add(k Call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[Call]int{}
	}
	c.counts[k]++
}

// Snapshot returns the counts so far.
func (c *Counter) Snapshot() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Counts(maps.Clone(c.counts))
}

// Reset sets every count to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts = nil
	c.attempts = 0
	c.elapsed = nil
}

// Elapsed returns the time spent in requests of the given operations (all
// if none), retries included.
func (c *Counter) Elapsed(ops ...string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var d time.Duration
	for op, e := range c.elapsed {
		if len(ops) == 0 || slices.Contains(ops, op) {
			d += e
		}
	}
	return d
}

// Attempts returns how many HTTP attempts the counted operations made; more
// than their number means the SDK retried some.
func (c *Counter) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// Counts is a snapshot of a Counter.
type Counts map[Call]int

// Total returns the number of requests, optionally only those whose
// operation is one of ops.
func (cs Counts) Total(ops ...string) int {
	n := 0
	for k, v := range cs {
		if len(ops) == 0 || slices.Contains(ops, k.Op) {
			n += v
		}
	}
	return n
}

// Table returns the number of requests to table.
func (cs Counts) Table(table string) int {
	n := 0
	for k, v := range cs {
		if k.Table == table {
			n += v
		}
	}
	return n
}

// Sub returns cs minus earlier, dropping zero entries.
func (cs Counts) Sub(earlier Counts) Counts {
	out := Counts{}
	for k, v := range cs {
		if d := v - earlier[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// Format lists the counts as "Op(label) n", sorted, naming tables through
// label (a table missing from label prints its name).
func (cs Counts) Format(label map[string]string) string {
	var parts []string
	for _, k := range slices.SortedFunc(maps.Keys(cs), func(a, b Call) int {
		return strings.Compare(a.Op+a.Table, b.Op+b.Table)
	}) {
		t := k.Table
		if l, ok := label[t]; ok {
			t = l
		}
		if t == "" {
			parts = append(parts, fmt.Sprintf("%s %d", k.Op, cs[k]))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s(%s) %d", k.Op, t, cs[k]))
	}
	return strings.Join(parts, ", ")
}

// Writes are the DynamoDB operations that consume write capacity.
var Writes = []string{"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}

func tableOf(params any) string {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		return deref(in.TableName)
	case *dynamodb.GetItemInput:
		return deref(in.TableName)
	case *dynamodb.UpdateItemInput:
		return deref(in.TableName)
	case *dynamodb.DeleteItemInput:
		return deref(in.TableName)
	case *dynamodb.QueryInput:
		return deref(in.TableName)
	case *dynamodb.ScanInput:
		return deref(in.TableName)
	case *dynamodb.BatchGetItemInput:
		return soleKey(in.RequestItems)
	case *dynamodb.BatchWriteItemInput:
		return soleKey(in.RequestItems)
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func soleKey[V any](m map[string]V) string {
	if len(m) != 1 {
		return ""
	}
	for k := range m {
		return k
	}
	return ""
}
