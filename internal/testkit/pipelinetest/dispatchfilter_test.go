package pipelinetest

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestDispatchTriggerAgrees walks every state change the ledger can store (each allowed
// transition of the table, each write that keeps the state, each TTL delete), builds the stream
// record DynamoDB emits for it, and checks that the stream event source's filter (the patterns
// dynamostore.DispatchFilter generates, evaluated here as Lambda evaluates them), the dispatch
// function's decision and this harness's filter agree, and agree with ledger.TriggersDispatch.
func TestDispatchTriggerAgrees(t *testing.T) {
	raw, err := json.Marshal(dynamostore.DispatchFilter())
	if err != nil {
		t.Fatal(err)
	}
	var patterns []any
	if err := json.Unmarshal(raw, &patterns); err != nil {
		t.Fatal(err)
	}
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.Email}.Key()

	type change struct {
		event    events.DynamoDBOperationType
		from, to ledger.State
	}
	var changes []change
	for _, from := range append([]ledger.State{ledger.None}, ledger.States...) {
		for _, to := range ledger.States {
			if ledger.CanTransition(from, to) != nil {
				continue
			}
			ev := events.DynamoDBOperationTypeModify
			if from == ledger.None {
				ev = events.DynamoDBOperationTypeInsert
			}
			changes = append(changes, change{ev, from, to})
		}
	}
	for _, s := range ledger.States {
		changes = append(changes,
			change{events.DynamoDBOperationTypeModify, s, s}, // a mismatch count, a lease, an attempt
			change{events.DynamoDBOperationTypeRemove, s, ledger.None})
	}

	triggers := 0
	for _, c := range changes {
		rec := streamRecord(c.event, key, c.from, c.to)
		name := fmt.Sprintf("%s %s->%s", c.event, c.from, c.to)
		doc, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var record any
		if err := json.Unmarshal(doc, &record); err != nil {
			t.Fatal(err)
		}
		filter := false
		for _, p := range patterns {
			filter = filter || matches(t, p, record)
		}
		gotKey, fn, err := dynamostore.DispatchKey(rec)
		if err != nil {
			t.Errorf("%s: dispatch cannot read the record: %v", name, err)
		}
		harness := passesDispatchFilter(rec)
		rule := c.event != events.DynamoDBOperationTypeRemove && ledger.TriggersDispatch(c.from, c.to)
		if filter != rule || fn != rule || harness != rule {
			t.Errorf("%s: rule %v, event source filter %v, dispatch function %v, harness filter %v", name, rule, filter, fn, harness)
		}
		if fn && gotKey != key {
			t.Errorf("%s: dispatch read key %q, want %q", name, gotKey, key)
		}
		if rule {
			triggers++
		}
	}
	if triggers == 0 {
		t.Fatal("no stored change triggers dispatch: the walk checks nothing")
	}
}

// streamRecord is the record a NEW_AND_OLD_IMAGES stream carries for one change: an INSERT has
// only the new image, a REMOVE only the old one, a MODIFY both.
func streamRecord(ev events.DynamoDBOperationType, key string, from, to ledger.State) events.DynamoDBEventRecord {
	image := func(s ledger.State) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{
			dynamostore.AttrPK:    events.NewStringAttribute(key),
			dynamostore.AttrState: events.NewStringAttribute(string(s)),
		}
	}
	rec := events.DynamoDBEventRecord{EventName: string(ev), EventSource: "aws:dynamodb"}
	rec.Change.Keys = map[string]events.DynamoDBAttributeValue{dynamostore.AttrPK: events.NewStringAttribute(key)}
	rec.Change.SequenceNumber = "1"
	rec.Change.StreamViewType = "NEW_AND_OLD_IMAGES"
	switch ev {
	case events.DynamoDBOperationTypeInsert:
		rec.Change.NewImage = image(to)
	case events.DynamoDBOperationTypeModify:
		rec.Change.OldImage, rec.Change.NewImage = image(from), image(to)
	case events.DynamoDBOperationTypeRemove:
		rec.Change.OldImage = image(from)
	}
	return rec
}

// matches evaluates a Lambda event filter pattern against a record decoded from JSON, for the
// subset of the pattern syntax the dispatch filter uses: an object matches if each of its fields
// is present in the record and matches; an array of strings matches a string equal to one of
// them. Any other syntax fails the test rather than being guessed at.
func matches(t *testing.T, pattern, record any) bool {
	t.Helper()
	switch p := pattern.(type) {
	case map[string]any:
		r, ok := record.(map[string]any)
		if !ok {
			return false
		}
		for field, sub := range p {
			v, ok := r[field]
			if !ok || !matches(t, sub, v) {
				return false
			}
		}
		return true
	case []any:
		for _, want := range p {
			w, ok := want.(string)
			if !ok {
				t.Fatalf("filter pattern uses %v, which this test does not evaluate", want)
			}
			if record == w {
				return true
			}
		}
		return false
	}
	t.Fatalf("filter pattern uses %v, which this test does not evaluate", pattern)
	return false
}
