package bench

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestCounterAndMeter checks on the emulator that the middleware counts each
// operation once by name and table, that the Meter's own reads are not
// counted, and that the sizes it records are those of the stored item.
func TestCounterAndMeter(t *testing.T) {
	// The emulator sometimes corrupts a response under load; the SDK then
	// retries a PutItem that already landed, and its condition fails. That
	// run counts differently by design, so it is repeated on a new table.
	for try := 1; ; try++ {
		if !counterAndMeter(t) {
			return
		}
		if try == 3 {
			t.Fatal("the emulator dropped the first PutItem's response three times")
		}
		t.Log("the emulator dropped the first PutItem's response and the SDK retried it; again on a new table")
	}
}

// counterAndMeter runs the check once; dropped reports a first PutItem whose
// response the emulator dropped (retried, and refused by its own condition).
func counterAndMeter(t *testing.T) (dropped bool) {
	r := newRig(t, "bench-counter")
	ctx := context.Background()
	item := map[string]types.AttributeValue{
		"pk":      str(strings.Repeat("a", 64)),
		"state":   str("claimed"),
		"open_pk": str("claimed#1"), "open_due": str("2026-11-30T10:00:00.000000000Z"),
		"blob": &types.AttributeValueMemberB{Value: make([]byte, 1500)},
	}
	put := &dynamodb.PutItemInput{
		TableName: aws.String(r.ledger), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	}
	if _, err := r.meter.PutItem(ctx, put); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && r.counter.Attempts() > 1 {
			return true
		}
		t.Fatalf("PutItem: %v", err)
	}
	if _, err := r.meter.PutItem(ctx, put); err == nil {
		t.Fatal("second conditional PutItem succeeded")
	}
	if _, err := r.meter.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.ledger), Key: map[string]types.AttributeValue{"pk": item["pk"]}}); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	got := r.counter.Snapshot()
	want := Counts{{"PutItem", r.ledger}: 2, {"GetItem", r.ledger}: 1}
	if len(got) != len(want) || got[Call{"PutItem", r.ledger}] != 2 || got[Call{"GetItem", r.ledger}] != 1 {
		t.Fatalf("counts = %v, want %v", got, want)
	}
	// At least one attempt per call; more only when the SDK retried a
	// response the emulator dropped.
	if a := r.counter.Attempts(); a < 3 {
		t.Errorf("Attempts = %d, want at least 3", a)
	}
	if got.Total(Writes...) != 2 || got.Table(r.ledger) != 3 {
		t.Errorf("Total(writes) = %d, Table = %d; want 2, 3", got.Total(Writes...), got.Table(r.ledger))
	}

	ws := r.meter.Writes()
	if len(ws) != 2 {
		t.Fatalf("meter recorded %d writes, want 2", len(ws))
	}
	size := ItemSize(item)
	if w := ws[0]; w.Before != 0 || w.After != size || w.Units != 2 || w.IndexWrites != 1 || w.Failed {
		t.Errorf("first put = %+v, want before 0, after %d, 2 units, 1 index write", w, size)
	}
	if w := ws[1]; !w.Failed || w.Units != 2 || w.IndexWrites != 0 {
		t.Errorf("failed put = %+v, want failed, charged 2 units on the existing item, no index write", w)
	}
	return false
}
