package dynamostore

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Attribute and index names other components depend on: the stack defines the
// tables and the index with them, and the ledger stream's filter and the
// dispatch function read a change's state from AttrState in its images.
const (
	// AttrPK is the partition key of the ledger, content and budget tables.
	AttrPK = "pk"
	// AttrState is a ledger row's current state (a ledger.State).
	AttrState = "state"
	// AttrTTL is the expiry (Unix seconds) DynamoDB's TTL deletes a row at.
	AttrTTL = "ttl"
	// AttrOpenPK and AttrOpenDue are the keys of the sparse open-row index:
	// only rows in an open state carry them.
	AttrOpenPK  = "open_pk"
	AttrOpenDue = "open_due"

	// IndexName is the sparse index of open rows.
	IndexName = "open"
)

// Attribute names both stored forms share: the table's key and TTL, the
// state the stream filter reads, the index keys (in form 1's names and
// types, so no index changes) and the history list with its entries' hash,
// which the digest function reads from the stream (docs/digests.md).
const (
	attrDestinationRef = "destination_ref"
	attrCreatedAt      = "created_at"
	attrHistory        = "history"
	attrHash           = "hash"

	// timeLayout is the text form of a time (ledger.Precision): form 1's
	// times, and in both forms created_at and open_due, whose fixed width
	// makes text order equal time order in the indexes' sort keys.
	timeLayout = "2006-01-02T15:04:05.000Z"
)

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// packWorker stores a worker named "<function>/<request id>", where the
// request id is a UUID in Lambda's lowercase form, as the function's name,
// the slash and the id's 16 bytes (36 bytes become 16); any other worker
// (an operator, a function without a request id) as a string.
func packWorker(w string) types.AttributeValue {
	i := strings.LastIndexByte(w, '/')
	if i < 0 {
		return s(w)
	}
	id, ok := uuidBytes(w[i+1:])
	if !ok {
		return s(w)
	}
	return &types.AttributeValueMemberB{Value: append([]byte(w[:i+1]), id...)}
}

// uuidBytes returns the 16 bytes of a UUID written in lowercase
// 8-4-4-4-12 form, and whether v is one; formatUUID writes them back.
func uuidBytes(v string) ([]byte, bool) {
	if len(v) != 36 || v[8] != '-' || v[13] != '-' || v[18] != '-' || v[23] != '-' {
		return nil, false
	}
	b, err := hex.DecodeString(v[:8] + v[9:13] + v[14:18] + v[19:23] + v[24:])
	if err != nil || formatUUID(b) != v {
		return nil, false
	}
	return b, true
}

func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// worker reads what packWorker wrote.
func (d *decoder) worker(name string) string {
	b, ok := d.m[name].(*types.AttributeValueMemberB)
	if !ok {
		return d.str(name)
	}
	w, ok := unpackWorker(b.Value)
	if !ok {
		d.fail(name, "not a packed worker")
	}
	return w
}

// unpackWorker reads the bytes packWorker wrote.
func unpackWorker(b []byte) (string, bool) {
	n := len(b) - 16
	if n < 1 || b[n-1] != '/' {
		return "", false
	}
	return string(b[:n]) + formatUUID(b[n:]), true
}

// compact stores a lowercase hex string as its bytes (half the size) and
// anything else as a string.
func compact(v string) types.AttributeValue {
	if len(v) > 0 && len(v)%2 == 0 && strings.ToLower(v) == v {
		if b, err := hex.DecodeString(v); err == nil {
			return &types.AttributeValueMemberB{Value: b}
		}
	}
	return s(v)
}

// decoder reads attributes and keeps the first error.
type decoder struct {
	m   map[string]types.AttributeValue
	err error
}

func (d *decoder) str(name string) string {
	switch v := d.m[name].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail(name, "not a string")
		return ""
	}
}

// strOr reads a string attribute, or returns def when it is absent.
func (d *decoder) strOr(name, def string) string {
	if _, ok := d.m[name]; !ok {
		return def
	}
	return d.str(name)
}

// hexOrStr reads what compact wrote.
func (d *decoder) hexOrStr(name string) string {
	if b, ok := d.m[name].(*types.AttributeValueMemberB); ok {
		return hex.EncodeToString(b.Value)
	}
	return d.str(name)
}

func (d *decoder) num(name string) int64 {
	switch v := d.m[name].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(name, "not an integer")
		}
		return i
	default:
		d.fail(name, "not a number")
		return 0
	}
}

// flag reads a boolean attribute; absent is false.
func (d *decoder) flag(name string) bool {
	switch v := d.m[name].(type) {
	case nil:
		return false
	case *types.AttributeValueMemberBOOL:
		return v.Value
	}
	d.fail(name, "not a boolean")
	return false
}

func (d *decoder) time(name string) time.Time {
	v := d.str(name)
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(timeLayout, v)
	if err != nil {
		d.fail(name, "not a time")
	}
	return t
}

func (d *decoder) state(name string) ledger.State {
	v := d.str(name)
	if v == "none" || v == "" {
		return ledger.None
	}
	st, err := ledger.ParseState(v)
	if err != nil {
		d.fail(name, "unknown state")
	}
	return st
}

func (d *decoder) fail(name, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("dynamostore: attribute %s: %s", name, why)
	}
}

// DecodeItem reads a ledger item as the store wrote it, in either stored
// form, for callers that get items from elsewhere (a stream record's
// image). It rejects items it cannot read rather than returning a
// half-filled row.
func DecodeItem(m map[string]types.AttributeValue) (ledger.Entry, error) { return decode(m) }

// decode reads a ledger item in the form its marker names: form 2 (the
// compact form, item_form2.go) if it carries attrForm, else form 1
// (item_v1.go).
func decode(m map[string]types.AttributeValue) (ledger.Entry, error) {
	if _, ok := m[attrForm]; ok {
		return decodeForm2(m)
	}
	return decodeV1(m)
}

// isForm1 reports whether an item that exists is in the first stored form.
func isForm1(m map[string]types.AttributeValue) bool {
	_, form2 := m[attrForm]
	return len(m) > 0 && !form2
}

// Item returns e as the store writes it (PutItem's item, and what an
// UpdateItem leaves stored), for tools and tests that size rows.
func (st *Store) Item(e ledger.Entry) map[string]types.AttributeValue { return st.item(e) }

// Stored returns e as the table holds it once written, which is what its
// stream record's new image carries: times at the store's precision, the
// retention in whole seconds.
func (st *Store) Stored(e ledger.Entry) (ledger.Entry, error) { return decode(st.item(e)) }
