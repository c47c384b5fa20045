// Package dynamostore implements ledger.Store and ledger.ContentStore on
// Amazon DynamoDB.
//
// Claims are conditional PutItems (attribute_not_exists on the key) that
// return the existing item on failure, so a duplicate costs one request.
// Transitions are conditional UpdateItems on state and version that append
// one history entry with list_append. Rows are written in a compact form
// (item_form2.go); rows written in the first form still read (item_v1.go)
// and are rewritten in the compact form by their next transition. Open
// rows carry open_pk/open_due, the keys of a sparse, sharded index, so
// sweeps query only open rows; a claim's entry stays while the row is
// dispatching (keepsClaimEntry), so the claimed partitions are read with
// the rows behind their due entries.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Client lists the DynamoDB calls the stores make.
type Client interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// DefaultShards is the number of index partitions per open state.
const DefaultShards = 4

// Store is the DynamoDB ledger.Store.
type Store struct {
	client Client
	table  string
	shards int
}

var _ ledger.Store = (*Store)(nil)

// New returns a Store on table. shards spreads each open state over that
// many index partitions; it must match for every writer and reader of the
// table (DefaultShards if < 1).
func New(client Client, table string, shards int) *Store {
	if shards < 1 {
		shards = DefaultShards
	}
	return &Store{client: client, table: table, shards: shards}
}

func (st *Store) openPK(state ledger.State, key string) string {
	h := fnv.New32a()
	h.Write([]byte(key))
	return fmt.Sprintf("%s#%d", state, int(h.Sum32()%uint32(st.shards)))
}

func keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrPK: s(key)}
}

// Create implements ledger.Store.
func (st *Store) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	_, err := st.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &st.table,
		Item:                                st.item(e),
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		old, derr := decode(ccf.Item)
		if len(ccf.Item) == 0 {
			// Endpoints that do not return the item: read it.
			old, derr = st.Get(ctx, e.Key)
		}
		if derr != nil {
			return ledger.Entry{}, fmt.Errorf("create %s: read existing: %w", e.Key, derr)
		}
		if len(e.History) > 0 && old.Holds(e.History[0].ID) {
			// Our own create, retried by the SDK after a lost response.
			return old, nil
		}
		return old, fmt.Errorf("create %s: %w", e.Key, ledger.ErrConflict)
	}
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("create %s: %w", e.Key, err)
	}
	return e, nil
}

// Get implements ledger.Store with a strongly consistent read.
func (st *Store) Get(ctx context.Context, key string) (ledger.Entry, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("get %s: %w", key, err)
	}
	if len(out.Item) == 0 {
		return ledger.Entry{}, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	e, err := decode(out.Item)
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("get %s: %w", key, err)
	}
	return e, nil
}

// Apply implements ledger.Store: one conditional UpdateItem that sets the
// mutable attributes and appends c.Event to the stored history. A row
// still in the first stored form fails that condition (it has no form-2
// version) and is rewritten in form 2 by migrate. A claim's move to
// dispatching keeps the claim's open-row index entry (keepsClaimEntry);
// should that entry's time be after the new lease, the write is made
// again with the entry moved.
func (st *Store) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	keep := keepsClaimEntry(c)
	for {
		out, err := st.update(ctx, c, keep)
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			stored := ccf.Item
			if len(stored) == 0 {
				// Endpoints that do not return the item: read it.
				stored, _ = st.rawGet(ctx, c.Next.Key)
			}
			if isForm1(stored) {
				return st.migrate(ctx, c, stored)
			}
			if keep && onlyEntryLate(c, stored) {
				keep = false
				continue
			}
			return st.conflict(c, stored)
		}
		if err != nil {
			return ledger.Entry{}, fmt.Errorf("apply %s %s->%s: %w", c.Next.Key, c.From, c.Next.State, err)
		}
		e, err := decode(out.Attributes)
		if err != nil {
			return ledger.Entry{}, fmt.Errorf("apply %s: %w", c.Next.Key, err)
		}
		return e, nil
	}
}

// update is Apply's UpdateItem, keeping the row's open-row index entry if
// keep is set.
func (st *Store) update(ctx context.Context, c ledger.Change, keep bool) (*dynamodb.UpdateItemOutput, error) {
	expr, err := st.applyExpression(c, keep)
	if err != nil {
		return nil, fmt.Errorf("apply %s %s->%s: %w", c.Next.Key, c.From, c.Next.State, err)
	}
	return st.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &st.table, Key: keyOf(c.Next.Key),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
}

// conflict answers a write of c whose condition failed against the stored
// item. The SDK retries a request whose response was lost; if the first
// attempt landed, the retry fails its condition against our own write. The
// stored history then already holds our event. Otherwise the stored row
// answers the conflict (a zero row if it does not decode: the caller then
// reads it).
func (st *Store) conflict(c ledger.Change, stored map[string]types.AttributeValue) (ledger.Entry, error) {
	cur, derr := decode(stored)
	if derr == nil && cur.Holds(c.Event.ID) {
		return cur, nil
	}
	return cur, fmt.Errorf("apply %s %s->%s: %w", c.Next.Key, c.From, c.Next.State, ledger.ErrConflict)
}

// rawGet reads the item at key as stored (nil if there is none).
func (st *Store) rawGet(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	out, err := st.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.table, Key: keyOf(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// migrate applies c to a row stored in the first form (old): one
// conditional PutItem of the whole row in form 2, on the same terms as
// the UpdateItem (the row still in c.From at c.Version, unexpired by
// c.NotExpiredBy) in form 1's attributes. The row written is the stored
// one with c applied: c.Next must agree with it on everything a
// transition leaves alone (the history before c.Event included), or it
// is a conflict and nothing is written, so a caller's copy never replaces
// what the table holds.
func (st *Store) migrate(ctx context.Context, c ledger.Change, old map[string]types.AttributeValue) (ledger.Entry, error) {
	cur, err := decodeV1(old)
	if err != nil || cur.State != c.From || cur.Version != c.Version || !st.sameRow(cur, c.Next) ||
		(!c.NotExpiredBy.IsZero() && !cur.ExpiresAt.After(c.NotExpiredBy)) {
		return st.conflict(c, old)
	}
	cond := expression.Name(AttrState).Equal(expression.Value(s(string(c.From)))).
		And(expression.Name(attrVersion).Equal(expression.Value(n(c.Version)))).
		And(expression.AttributeNotExists(expression.Name(attrForm)))
	if !c.NotExpiredBy.IsZero() {
		cond = cond.And(expression.Name(attrExpiresAt).GreaterThan(expression.Value(s(fmtTime(c.NotExpiredBy)))))
	}
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("apply %s: %w", c.Next.Key, err)
	}
	item := st.item(c.Next)
	_, err = st.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &st.table, Item: item,
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		stored := ccf.Item
		if len(stored) == 0 {
			stored, _ = st.rawGet(ctx, c.Next.Key)
		}
		return st.conflict(c, stored)
	}
	if err != nil {
		return ledger.Entry{}, fmt.Errorf("apply %s %s->%s: rewrite in form 2: %w", c.Next.Key, c.From, c.Next.State, err)
	}
	return decode(item)
}

// sameRow reports whether next is cur with one more history entry and
// only what a transition may change changed: compared as form 2 stores
// them, so times compare by their instant.
func (st *Store) sameRow(cur, next ledger.Entry) bool {
	if len(next.History) != len(cur.History)+1 {
		return false
	}
	a, b := st.item(cur), st.item(next)
	for _, name := range []string{AttrPK, f2Purpose, f2Challenge, f2Channel, f2Workflow, f2Order, f2ContentHash, f2TemplateID,
		f2TemplateVersion, f2PolicyVersion, f2ExpiresAt, f2IssuedAt, attrDestinationRef, AttrSubjectRef, attrCreatedAt} {
		if !reflect.DeepEqual(a[name], b[name]) {
			return false
		}
	}
	ha, hb := a[attrHistory].(*types.AttributeValueMemberL).Value, b[attrHistory].(*types.AttributeValueMemberL).Value
	return reflect.DeepEqual(ha, hb[:len(ha)])
}

// applyExpression is c as a compare-and-set: the condition that the row is
// still in c.From at c.Version (and, with c.NotExpiredBy, expires after
// it), and the update that appends c.Event to the history, sets every
// mutable attribute c.Next has and removes the ones it leaves empty. With
// keep, the open-row index keys are left as stored, on the condition that
// the stored entry is due no later than c.Next's lease (keptEntryDue). The
// expression builder composes the optional clauses and names every
// attribute and value.
func (st *Store) applyExpression(c ledger.Change, keep bool) (expression.Expression, error) {
	cond := expression.Name(AttrState).Equal(expression.Value(s(string(c.From)))).
		And(expression.Name(f2Version).Equal(expression.Value(n(c.Version))))
	if !c.NotExpiredBy.IsZero() {
		cond = cond.And(expression.Name(f2ExpiresAt).GreaterThan(expression.Value(n(ms(c.NotExpiredBy)))))
	}
	attrs := st.mutable(c.Next)
	if keep {
		cond = cond.And(expression.Name(AttrOpenDue).LessThanEqual(expression.Value(s(keptEntryDue(c.Next)))))
		delete(attrs, AttrOpenPK)
		delete(attrs, AttrOpenDue)
	}
	appended := &types.AttributeValueMemberL{Value: []types.AttributeValue{event2(c.Event, c.Next, len(c.Next.History)-1)}}
	update := expression.Set(expression.Name(attrHistory), expression.ListAppend(expression.Name(attrHistory), expression.Value(appended)))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if attrs[name] == nil {
			update = update.Remove(expression.Name(name))
		} else {
			update = update.Set(expression.Name(name), expression.Value(attrs[name]))
		}
	}
	return expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
}

// ListOpen implements ledger.Store. It queries each shard of the sparse
// index for state s (due first), and for dispatching also the claimed
// partitions, which hold the entries dispatching rows kept from their
// claim (keepsClaimEntry), due keptLead or more before their lease. It keeps the
// limit soonest due of all shards (the index holds the due time, so no row
// is read to choose), then reads those rows with a consistent batch read
// and drops any whose state moved on since the index was written, or that
// are not due yet (a kept entry is due before its row). Among rows due,
// the limit is taken in their entries' order, which for a kept entry is
// its claim's time, not its lease.
func (st *Store) ListOpen(ctx context.Context, state ledger.State, dueBy time.Time, limit int) ([]ledger.Entry, error) {
	if !state.Open() {
		return nil, fmt.Errorf("list %s: not an open state", state)
	}
	// Each shard is asked for the limit soonest due; when entries among
	// them are stale (their rows moved on, the index not yet) and a shard
	// may hold more, the shards are asked for more, so a listing never
	// comes back short, or empty, while due rows remain behind stale ones.
	stale := map[string]bool{}
	for per := limit; ; per *= 2 {
		due, err := st.queryState(ctx, state, dueBy, per)
		if err != nil {
			return nil, err
		}
		more := false
		if per > 0 {
			for shard, n := range countByShard(due) {
				more = more || n >= per && shard != ""
			}
		}
		due = slices.DeleteFunc(due, func(d indexed) bool { return stale[d.key] })
		slices.SortFunc(due, func(a, b indexed) int { return strings.Compare(a.raw, b.raw) })
		out, err := st.readDue(ctx, due, limit, func(e ledger.Entry) bool {
			ok := e.State == state && (dueBy.IsZero() || !e.OpenDue().After(dueBy))
			if !ok {
				stale[e.Key] = true
			}
			return ok
		})
		if err != nil {
			return nil, err
		}
		if limit <= 0 || len(out) >= limit || !more {
			slices.SortFunc(out, func(a, b ledger.Entry) int { return a.OpenDue().Compare(b.OpenDue()) })
			return out, nil
		}
	}
}

// countByShard counts index entries by their shard's partition key.
func countByShard(due []indexed) map[string]int {
	n := map[string]int{}
	for _, d := range due {
		n[d.shard]++
	}
	return n
}

// ListExpired implements ledger.Store: the index entries due by by (a
// claim is due at its re-drive time or its expiry, whichever is first)
// carry each row's expiry, so only the rows expired by by are read.
func (st *Store) ListExpired(ctx context.Context, state ledger.State, by time.Time, limit int) ([]ledger.Entry, error) {
	if state != ledger.Held && state != ledger.Claimed {
		return nil, fmt.Errorf("list expired %s: not a state that waits for its expiry", state)
	}
	due, err := st.queryState(ctx, state, by, 0)
	if err != nil {
		return nil, err
	}
	due = slices.DeleteFunc(due, func(d indexed) bool { return d.expires.After(by) })
	slices.SortFunc(due, func(a, b indexed) int { return a.expires.Compare(b.expires) })
	out, err := st.readDue(ctx, due, limit, func(e ledger.Entry) bool {
		return e.State == state && !e.ExpiresAt.After(by)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b ledger.Entry) int { return a.ExpiresAt.Compare(b.ExpiresAt) })
	return out, nil
}

// readDue reads the rows of the index entries due, in their order, only as
// many as limit still needs (all if 0), and keeps those keep accepts: an
// index entry can be stale (the index is eventually consistent), and a row
// that moved on is dropped and replaced by the next entry.
func (st *Store) readDue(ctx context.Context, due []indexed, limit int, keep func(ledger.Entry) bool) ([]ledger.Entry, error) {
	var out []ledger.Entry
	for len(due) > 0 && (limit <= 0 || len(out) < limit) {
		n := len(due)
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		keys := make([]string, n)
		for i, d := range due[:n] {
			keys[i] = d.key
		}
		due = due[n:]
		rows, err := st.batchGet(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, e := range rows {
			if keep(e) {
				out = append(out, e)
			}
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DueTimes implements ledger.Store: one query per shard of the index for
// the entries due by dueBy, projecting the due time only. Entries of the
// claimed partitions, which claims share with dispatching rows that kept
// their claim's entry, are checked against their rows (one consistent
// read each) and counted under the state and due time the row has; the
// others are taken from the index alone.
func (st *Store) DueTimes(ctx context.Context, state ledger.State, dueBy time.Time) ([]time.Time, error) {
	if !state.Open() {
		return nil, fmt.Errorf("due times %s: not an open state", state)
	}
	due, err := st.queryState(ctx, state, dueBy, 0)
	if err != nil {
		return nil, err
	}
	return st.exactTimes(ctx, due, func(d indexed) time.Time { return d.due }, func(e ledger.Entry) (time.Time, bool) {
		return e.OpenDue(), e.State == state && (dueBy.IsZero() || !e.OpenDue().After(dueBy))
	})
}

// Expiries implements ledger.Store from the index entries due by by, which
// hold every row expiring by then; claimed partitions' entries expired by
// by are checked against their rows, as in DueTimes.
func (st *Store) Expiries(ctx context.Context, state ledger.State, by time.Time) ([]time.Time, error) {
	if state != ledger.Held && state != ledger.Claimed {
		return nil, fmt.Errorf("expiries %s: not a state that waits for its expiry", state)
	}
	due, err := st.queryState(ctx, state, by, 0)
	if err != nil {
		return nil, err
	}
	due = slices.DeleteFunc(due, func(d indexed) bool { return d.expires.After(by) })
	return st.exactTimes(ctx, due, func(d indexed) time.Time { return d.expires }, func(e ledger.Entry) (time.Time, bool) {
		return e.ExpiresAt, e.State == state && !e.ExpiresAt.After(by)
	})
}

// exactTimes is the time of each entry in due, soonest first: at(d) for an
// entry of a partition only rows of its state hold, and for an entry of a
// shared partition (sharedBy) the time of its row, read, if of(row) keeps
// it.
func (st *Store) exactTimes(ctx context.Context, due []indexed, at func(indexed) time.Time, of func(ledger.Entry) (time.Time, bool)) ([]time.Time, error) {
	var out []time.Time
	var check []indexed
	for _, d := range due {
		if sharedBy(d.family) {
			check = append(check, d)
		} else {
			out = append(out, at(d))
		}
	}
	if _, err := st.readDue(ctx, check, 0, func(e ledger.Entry) bool {
		t, ok := of(e)
		if ok {
			out = append(out, t)
		}
		return ok
	}); err != nil {
		return nil, err
	}
	slices.SortFunc(out, time.Time.Compare)
	return out, nil
}

// indexed is one entry of the open-row index: a row's key, its open_due
// value as the index sorts it (openDue: fixed-width, so text order is time
// order), the times it holds, and the state whose partitions hold it.
type indexed struct {
	key, raw, shard string
	due, expires    time.Time
	family          ledger.State
}

// queryState queries every shard of the index partitions that may hold
// entries of rows in state (families) for the entries due by dueBy (all if
// zero; a family's lead before it), at most limit per shard (all if 0).
func (st *Store) queryState(ctx context.Context, state ledger.State, dueBy time.Time, limit int) ([]indexed, error) {
	var due []indexed
	for _, f := range families(state) {
		by := dueBy
		if !by.IsZero() {
			by = by.Add(-f.lead)
		}
		for shard := 0; shard < st.shards; shard++ {
			ks, err := st.queryShard(ctx, fmt.Sprintf("%s#%d", f.state, shard), by, limit)
			if err != nil {
				return nil, err
			}
			for i := range ks {
				ks[i].family = f.state
			}
			due = append(due, ks...)
		}
	}
	return due, nil
}

func (st *Store) queryShard(ctx context.Context, pk string, dueBy time.Time, limit int) ([]indexed, error) {
	key := expression.Key(AttrOpenPK).Equal(expression.Value(s(pk)))
	if !dueBy.IsZero() {
		key = key.And(expression.Key(AttrOpenDue).LessThanEqual(expression.Value(s(fmtTime(dueBy) + dueUpTo))))
	}
	expr, err := expression.NewBuilder().WithKeyCondition(key).Build()
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", pk, err)
	}
	in := &dynamodb.QueryInput{
		TableName: &st.table, IndexName: aws.String(IndexName), KeyConditionExpression: expr.KeyCondition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	var keys []indexed
	for {
		out, err := st.client.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", pk, err)
		}
		for _, it := range out.Items {
			k, ok := it[AttrPK].(*types.AttributeValueMemberS)
			d, _ := it[AttrOpenDue].(*types.AttributeValueMemberS)
			if !ok || d == nil {
				continue
			}
			due, expires, err := parseOpenDue(d.Value)
			if err != nil {
				return nil, fmt.Errorf("query %s: index entry %s: %w", pk, k.Value, err)
			}
			keys = append(keys, indexed{key: k.Value, raw: d.Value, shard: pk, due: due, expires: expires})
		}
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(keys) >= limit) {
			return keys, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// batchGet reads the rows of keys (strongly consistent), in their order;
// a key with no row is left out.
func (st *Store) batchGet(ctx context.Context, keys []string) ([]ledger.Entry, error) {
	var rows []ledger.Entry
	for start := 0; start < len(keys); start += 100 {
		chunk := keys[start:min(start+100, len(keys))]
		req := make([]map[string]types.AttributeValue, len(chunk))
		for i, k := range chunk {
			req[i] = keyOf(k)
		}
		found, err := batchGetAll(ctx, st.client, map[string]types.KeysAndAttributes{st.table: {Keys: req, ConsistentRead: aws.Bool(true)}})
		if err != nil {
			return nil, err
		}
		for _, k := range chunk {
			it, ok := found[itemAt(st.table, k)]
			if !ok {
				continue
			}
			e, err := decode(it)
			if err != nil {
				return nil, fmt.Errorf("batch get: %w", err)
			}
			rows = append(rows, e)
		}
	}
	return rows, nil
}
