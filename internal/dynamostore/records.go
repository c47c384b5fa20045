package dynamostore

import (
	"errors"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// What a ledger stream record means to dispatch. One rule decides which
// changes start a dispatch, ledger.TriggersDispatch; the dispatch stream
// event source filters with the patterns DispatchFilter
// generates from it, the dispatch function reads each record with
// DispatchKey, and the test pipeline delivers what StreamChange and the rule
// let through. All three read the state where the store writes it,
// AttrState.

const (
	insert = string(events.DynamoDBOperationTypeInsert)
	modify = string(events.DynamoDBOperationTypeModify)
)

// StreamChange returns the state change a ledger stream record shows: from
// None for an INSERT, from the old image's state for a MODIFY, to the new
// image's state. ok is false for any other record (a REMOVE by TTL) and for
// one whose images do not hold a state the domain knows.
func StreamChange(rec events.DynamoDBEventRecord) (from, to ledger.State, ok bool) {
	switch rec.EventName {
	case insert:
		from = ledger.None
	case modify:
		if from, ok = imageState(rec.Change.OldImage); !ok {
			return ledger.None, ledger.None, false
		}
	default:
		return ledger.None, ledger.None, false
	}
	to, ok = imageState(rec.Change.NewImage)
	return from, to, ok
}

// imageState reads the state of a record's image; ok is false when it has
// none, or one that is not a state of ledger.States.
func imageState(image map[string]events.DynamoDBAttributeValue) (ledger.State, bool) {
	v, ok := image[AttrState]
	if !ok || v.DataType() != events.DataTypeString {
		return ledger.None, false
	}
	st, err := ledger.ParseState(v.String())
	return st, err == nil
}

// DispatchKey is the dispatch function's reading of one stream record: the
// dedupe key of the row, whether the change the record shows must trigger
// dispatch (ledger.TriggersDispatch; the event source's filter should
// already have dropped the others), and an error for an INSERT or MODIFY
// record that cannot be read. Its errors never quote the record.
func DispatchKey(rec events.DynamoDBEventRecord) (key string, trigger bool, err error) {
	if rec.EventName != insert && rec.EventName != modify {
		return "", false, nil
	}
	pk, ok := rec.Change.Keys[AttrPK]
	if !ok || pk.DataType() != events.DataTypeString {
		return "", false, errors.New("record has no string key " + AttrPK)
	}
	key = pk.String()
	if !ledger.IsDedupeKey(key) {
		return "", false, errors.New("record key is not a dedupe key")
	}
	if st, ok := rec.Change.NewImage[AttrState]; !ok || st.DataType() != events.DataTypeString {
		return "", false, errors.New("record new image has no string " + AttrState)
	}
	from, to, ok := StreamChange(rec)
	return key, ok && ledger.TriggersDispatch(from, to), nil
}

// Records reads the ledger table's stream records for the dispatch
// handler (handler.RowStream), which imports no store.
type Records struct{}

// DispatchKey is DispatchKey.
func (Records) DispatchKey(rec events.DynamoDBEventRecord) (string, bool, error) {
	return DispatchKey(rec)
}

// Row is DecodeImage.
func (Records) Row(image map[string]events.DynamoDBAttributeValue) (ledger.Entry, error) {
	return DecodeImage(image)
}
