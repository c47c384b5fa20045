package dynamostore

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// fixedReasons are the only error texts DispatchKey may return: none quotes
// the record, which could carry anything.
var fixedReasons = map[string]bool{
	"record has no string key pk":          true,
	"record key is not a dedupe key":       true,
	"record new image has no string state": true,
}

const fuzzKey = "9f3ca652660e387eff507da6ae9e3bf1539e974aa5626c695584367c545d965d"

// FuzzClaimedKey feeds arbitrary stream records, in the Lambda event JSON
// form the runtime decodes, to the dispatch function's record decoder. It
// must never panic, must only return a key for a record that made a row
// claimed (an INSERT of a claimed row, or a MODIFY from held to claimed)
// whose pk is a dedupe key, and its errors must never quote the record.
func FuzzClaimedKey(f *testing.F) {
	for _, seed := range []string{
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"S":"claimed"}},"SequenceNumber":"1"}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"S":"expired"}}}}`,
		`{"eventName":"MODIFY","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"S":"claimed"}}}}`,
		`{"eventName":"MODIFY","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"S":"claimed"}},"OldImage":{"state":{"S":"held"}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"N":"1"}},"NewImage":{"state":{"S":"claimed"}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"player1@example.test"}},"NewImage":{"state":{"S":"claimed"}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"` + strings.ToUpper(fuzzKey) + `"}},"NewImage":{"state":{"BOOL":true}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"NULL":true}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"S":"` + fuzzKey + `"}},"NewImage":{"state":{"M":{"S":{"S":"claimed"}}}}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{},"NewImage":{}}}`,
		`{"eventName":"INSERT","dynamodb":{"Keys":{"pk":{"L":[{"S":"x"}]}}}}`,
		`{"eventName":"INSERT"}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var rec events.DynamoDBEventRecord
		if err := json.Unmarshal(raw, &rec); err != nil {
			return // the runtime rejects an event it cannot decode before the handler
		}
		key, ok, err := DispatchKey(rec)
		if err != nil {
			if ok || key != "" {
				t.Fatalf("error %v with key %q ok %v", err, key, ok)
			}
			if !fixedReasons[err.Error()] {
				t.Fatalf("error is not one of the fixed reasons (it may quote the record): %v", err)
			}
			return
		}
		if !ok {
			if key != "" && rec.EventName != "INSERT" && rec.EventName != "MODIFY" {
				t.Fatalf("%s record returned key %q", rec.EventName, key)
			}
			return
		}
		fromHeld := rec.EventName == "MODIFY" && rec.Change.OldImage["state"].DataType() == events.DataTypeString &&
			rec.Change.OldImage["state"].String() == string(ledger.Held)
		if (rec.EventName != "INSERT" && !fromHeld) || !ledger.IsDedupeKey(key) {
			t.Fatalf("accepted %q from a %s record", key, rec.EventName)
		}
		if pk := rec.Change.Keys["pk"]; pk.String() != key {
			t.Fatalf("key %q is not the record's pk", key)
		}
		if st := rec.Change.NewImage["state"]; st.DataType() != events.DataTypeString || st.String() != string(ledger.Claimed) {
			t.Fatalf("accepted a record whose state is not claimed")
		}
	})
}

// FuzzClaimedKeyFields builds records from fuzzed field values directly, so
// the fuzzer reaches every branch without having to find valid JSON.
func FuzzClaimedKeyFields(f *testing.F) {
	f.Add("INSERT", fuzzKey, uint8(0), "claimed", uint8(0), true)
	f.Add("INSERT", fuzzKey, uint8(0), "claimed", uint8(1), true)
	f.Add("MODIFY", fuzzKey, uint8(0), "claimed", uint8(0), true)
	f.Add("INSERT", "abc", uint8(0), "claimed", uint8(0), true)
	f.Add("INSERT", fuzzKey, uint8(2), "claimed", uint8(0), false)
	f.Fuzz(func(t *testing.T, name, pk string, pkType uint8, state string, stateType uint8, hasImage bool) {
		rec := events.DynamoDBEventRecord{EventName: name}
		rec.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": attrOf(pk, pkType)}
		if hasImage {
			rec.Change.NewImage = map[string]events.DynamoDBAttributeValue{"state": attrOf(state, stateType)}
		}
		key, ok, err := DispatchKey(rec)
		want := name == "INSERT" && pkType%4 == 0 && ledger.IsDedupeKey(pk) && hasImage && stateType%4 == 0 && state == string(ledger.Claimed)
		if ok != want {
			t.Fatalf("ok = %v (err %v), want %v", ok, err, want)
		}
		if ok && key != pk {
			t.Fatalf("key %q, want %q", key, pk)
		}
		if err != nil && !fixedReasons[err.Error()] {
			t.Fatalf("error is not one of the fixed reasons (it may quote the record): %v", err)
		}
		if name != "INSERT" && name != "MODIFY" && (err != nil || ok) {
			t.Fatalf("%s record: ok %v err %v", name, ok, err)
		}
	})
}

func attrOf(s string, typ uint8) events.DynamoDBAttributeValue {
	switch typ % 4 {
	case 0:
		return events.NewStringAttribute(s)
	case 1:
		return events.NewNumberAttribute(s)
	case 2:
		return events.NewBooleanAttribute(s != "")
	}
	return events.NewNullAttribute()
}

func TestClaimedKeyAcceptsAHeldRowBecomingClaimed(t *testing.T) {
	rec := func(name, from string) events.DynamoDBEventRecord {
		r := events.DynamoDBEventRecord{EventName: name}
		r.Change.Keys = map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(fuzzKey)}
		r.Change.NewImage = map[string]events.DynamoDBAttributeValue{"state": events.NewStringAttribute("claimed")}
		if from != "" {
			r.Change.OldImage = map[string]events.DynamoDBAttributeValue{"state": events.NewStringAttribute(from)}
		}
		return r
	}
	for _, tt := range []struct {
		name, from string
		want       bool
	}{
		{"INSERT", "", true},
		{"MODIFY", "held", true},
		{"MODIFY", "claimed", false}, // a content-mismatch event on a claimed row
		{"MODIFY", "", false},
		{"REMOVE", "held", false},
	} {
		if _, ok, err := DispatchKey(rec(tt.name, tt.from)); ok != tt.want || err != nil {
			t.Errorf("%s from %q: ok %v err %v, want %v", tt.name, tt.from, ok, err, tt.want)
		}
	}
}
