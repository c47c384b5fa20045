package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
)

// Write is one single-item write the Meter saw, sized from the item as it
// was stored before and after the write.
type Write struct {
	Op, Table string
	// Before and After are the item sizes in bytes (0: no item).
	Before, After int
	// Units is the write capacity the write consumed: the larger of the two
	// sizes, in 1 KB units, at least 1. A write whose condition failed is
	// charged too (on the existing item).
	Units int
	// IndexWrites is how many writes the open-row index took (KEYS_ONLY:
	// each one 1 unit).
	IndexWrites int
	// IndexUnits is the capacity those index writes consumed.
	IndexUnits int
	// TimelineWrites and TimelineUnits are the same for Meter.Timeline's
	// indexes.
	TimelineWrites, TimelineUnits int
	Failed                        bool
}

// Meter is a dynamostore.Client that forwards every call to Client and, for
// each PutItem, UpdateItem and DeleteItem, reads the item before and after
// through Raw (a client without a Counter, so the reads do not count) to size
// the write by DynamoDB's rules. Emulators do not report consumed capacity;
// these are the units DynamoDB would charge.
type Meter struct {
	Client dynamostore.Client
	Raw    *dynamodb.Client
	// IndexHash and IndexRange name the open-row index's key attributes.
	IndexHash, IndexRange string
	// Timeline, if set, names the key attributes (hash, range) of further
	// KEYS_ONLY indexes (the ledger's subject and destination indexes),
	// whose writes are recorded apart, in TimelineWrites and TimelineUnits.
	Timeline [][2]string

	mu     sync.Mutex
	writes []Write
	reads  []Read
}

// Read is one read the Meter saw: the items it returned, sized by
// DynamoDB's rules.
type Read struct {
	Op, Table string
	// Size is the bytes returned (for a Query, of every item together).
	Size int
	// Units is the read capacity it consumed: 1 per started 4 KB, per item
	// (a Query rounds its total), half that for an eventually consistent
	// read, at least one unit's worth for a read that returned nothing.
	Units      float64
	Consistent bool
}

// Reads returns the reads recorded since the last Reset.
func (m *Meter) Reads() []Read {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Read(nil), m.reads...)
}

func (m *Meter) read(op, table string, consistent *bool, sizes ...int) {
	r := Read{Op: op, Table: table, Consistent: consistent != nil && *consistent}
	rate := 1.0
	if !r.Consistent {
		rate = 0.5
	}
	if op == "Query" {
		total := 0
		for _, s := range sizes {
			total += s
		}
		r.Size, r.Units = total, rate*float64(ReadUnits(total))
	} else {
		for _, s := range sizes {
			r.Size += s
			r.Units += rate * float64(ReadUnits(s))
		}
		if len(sizes) == 0 {
			r.Units = rate
		}
	}
	m.mu.Lock()
	m.reads = append(m.reads, r)
	m.mu.Unlock()
}

var _ dynamostore.Client = (*Meter)(nil)

// Writes returns the writes recorded since the last Reset.
func (m *Meter) Writes() []Write {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Write(nil), m.writes...)
}

// Reset forgets the recorded writes.
func (m *Meter) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writes, m.reads = nil, nil
}

func (m *Meter) snapshot(ctx context.Context, table string, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	out, err := m.Raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("meter: read %s: %w", table, err)
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

func (m *Meter) measure(ctx context.Context, op, table string, key map[string]types.AttributeValue, write func() error) error {
	before, err := m.snapshot(ctx, table, key)
	if err != nil {
		return err
	}
	werr := write()
	after, err := m.snapshot(ctx, table, key)
	if err != nil {
		return err
	}
	w := Write{Op: op, Table: table, Before: sizeOf(before), After: sizeOf(after), Failed: werr != nil}
	w.Units = WriteUnits(max(w.Before, w.After))
	if werr == nil && m.IndexHash != "" {
		w.IndexWrites = IndexWrites(before, after, m.IndexHash, m.IndexRange)
		if w.IndexWrites > 0 {
			// A moved entry is a delete of the old one and a put of the new.
			for _, it := range []map[string]types.AttributeValue{before, after} {
				if _, in := indexKey(it, m.IndexHash, m.IndexRange); in {
					w.IndexUnits += WriteUnits(IndexEntrySize(it, dynamostore.AttrPK, m.IndexHash, m.IndexRange))
				}
			}
		}
	}
	if werr == nil {
		for _, ix := range m.Timeline {
			n := IndexWrites(before, after, ix[0], ix[1])
			if n == 0 {
				continue
			}
			w.TimelineWrites += n
			for _, it := range []map[string]types.AttributeValue{before, after} {
				if _, in := indexKey(it, ix[0], ix[1]); in {
					w.TimelineUnits += WriteUnits(IndexEntrySize(it, dynamostore.AttrPK, ix[0], ix[1]))
				}
			}
		}
	}
	m.mu.Lock()
	m.writes = append(m.writes, w)
	m.mu.Unlock()
	return werr
}

func sizeOf(item map[string]types.AttributeValue) int {
	if item == nil {
		return 0
	}
	return ItemSize(item)
}

func pkOf(item map[string]types.AttributeValue) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.AttrPK: item[dynamostore.AttrPK]}
}

// PutItem implements dynamostore.Client.
func (m *Meter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = m.measure(ctx, "PutItem", deref(in.TableName), pkOf(in.Item), func() error {
		out, err = m.Client.PutItem(ctx, in, opts...)
		return err
	})
	return out, err
}

// UpdateItem implements dynamostore.Client.
func (m *Meter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	err = m.measure(ctx, "UpdateItem", deref(in.TableName), in.Key, func() error {
		out, err = m.Client.UpdateItem(ctx, in, opts...)
		return err
	})
	return out, err
}

// DeleteItem implements dynamostore.Client.
func (m *Meter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.DeleteItemOutput, err error) {
	err = m.measure(ctx, "DeleteItem", deref(in.TableName), in.Key, func() error {
		out, err = m.Client.DeleteItem(ctx, in, opts...)
		return err
	})
	return out, err
}

// GetItem implements dynamostore.Client.
func (m *Meter) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := m.Client.GetItem(ctx, in, opts...)
	if err == nil {
		m.read("GetItem", deref(in.TableName), in.ConsistentRead, sizeOf(out.Item))
	}
	return out, err
}

// Query implements dynamostore.Client.
func (m *Meter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := m.Client.Query(ctx, in, opts...)
	if err == nil {
		m.read("Query", deref(in.TableName), in.ConsistentRead, itemSizes(out.Items)...)
	}
	return out, err
}

// BatchGetItem implements dynamostore.Client.
func (m *Meter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := m.Client.BatchGetItem(ctx, in, opts...)
	if err == nil {
		for table, items := range out.Responses {
			m.read("BatchGetItem", table, in.RequestItems[table].ConsistentRead, itemSizes(items)...)
		}
	}
	return out, err
}

func itemSizes(items []map[string]types.AttributeValue) []int {
	sizes := make([]int, len(items))
	for i, it := range items {
		sizes[i] = sizeOf(it)
	}
	return sizes
}
