package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/providerevent"
	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestProductionShapes: the measured messages are the shapes issue 35
// names, at production lengths, and every one is a valid intent whose
// provider events decode to its key.
func TestProductionShapes(t *testing.T) {
	now := time.Now().UTC()
	for _, s := range productionShapes(t) {
		t.Run(s.name, func(t *testing.T) {
			in, m := s.intent(3, now)
			if err := in.Validate(); err != nil {
				t.Fatalf("intent: %v", err)
			}
			for name, v := range map[string]struct{ got, want int }{
				"challenge id (UUID)": {len(in.ChallengeID), 36}, "subject_ref": {len(in.SubjectRef), 64},
				"destination_ref": {len(in.DestinationRef), 64},
			} {
				if v.got != v.want {
					t.Errorf("%s is %d characters, want %d", name, v.got, v.want)
				}
			}
			wantID := map[ledger.Channel]int{ledger.Email: 60, ledger.SMS: 36}[s.ch]
			if n := len(s.ackID(3)); n != wantID {
				t.Errorf("provider message id is %d characters, want %d", n, wantID)
			}
			switch s.ch {
			case ledger.Email:
				// About 8 KB of markup with the link in it, not filler.
				if n := len(m.Body); n < 7800 || n > 8600 {
					t.Errorf("HTML body is %d bytes, want about 8 KB", n)
				}
				if strings.Contains(m.Body, shapes.ResetURLPlaceholder) || !strings.Contains(m.Body, "reset-password?token=") || !strings.HasPrefix(m.Body, "<!DOCTYPE html>") {
					t.Error("the HTML body is not the rendered template with its link")
				}
			case ledger.SMS:
				if len(m.Body) != shapes.SMSLength {
					t.Errorf("SMS body is %d characters, want %d", len(m.Body), shapes.SMSLength)
				}
			}
			c := providereventtest.Carried{Key: in.Key(), Attempt: 1, Proof: "p"}
			evs := s.events(c, s.ackID(3), now)
			if len(evs) != 2 {
				t.Fatalf("%d provider events, want 2", len(evs))
			}
			for i, body := range evs {
				p, err := providerevent.Decode(body)
				if err != nil || p.Key != in.Key() || p.Channel != s.ch || p.MessageID != s.ackID(3) {
					t.Errorf("event %d decodes to %+v, %v", i+1, p, err)
				}
			}
		})
	}
}

// TestMeterReadUnits: reads are charged 1 RCU per started 4 KB per item,
// half for an eventually consistent read, a Query on its total.
func TestMeterReadUnits(t *testing.T) {
	yes := aws.Bool(true)
	for _, tc := range []struct {
		name       string
		op         string
		consistent *bool
		sizes      []int
		want       float64
	}{
		{"consistent 13.7 KB item", "GetItem", yes, []int{13752}, 4},
		{"eventually consistent 13.7 KB item", "GetItem", nil, []int{13752}, 2},
		{"no item", "GetItem", yes, []int{0}, 1},
		{"batch: per item", "BatchGetItem", yes, []int{100, 100, 5000}, 1 + 1 + 2},
		{"query: on the total", "Query", yes, []int{100, 100, 5000}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Meter{}
			m.read(tc.op, "t", tc.consistent, tc.sizes...)
			if got := m.Reads(); len(got) != 1 || got[0].Units != tc.want {
				t.Errorf("reads = %+v, want one of %v units", got, tc.want)
			}
		})
	}
}

// TestMeterTimelineIndexes checks on the emulator that the Meter charges a
// row's subject and destination index entries when the row is created, and
// not when a transition leaves their keys alone.
func TestMeterTimelineIndexes(t *testing.T) {
	r := newRig(t, "bench-timeline")
	r.meter.Timeline = [][2]string{{dynamostore.AttrSubjectRef, dynamostore.AttrCreatedAt}, {dynamostore.AttrDestinationRef, dynamostore.AttrCreatedAt}}
	ctx := context.Background()
	pk := str(strings.Repeat("b", 64))
	item := map[string]types.AttributeValue{
		"pk": pk, "state": str("claimed"),
		dynamostore.AttrSubjectRef: str(strings.Repeat("s", 64)), dynamostore.AttrDestinationRef: str(strings.Repeat("d", 64)),
		dynamostore.AttrCreatedAt: str("2026-12-04T10:00:00.000Z"),
	}
	if _, err := r.meter.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.ledger), Item: item}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	if _, err := r.meter.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.ledger), Key: map[string]types.AttributeValue{"pk": pk},
		UpdateExpression: aws.String("SET #s = :s"), ExpressionAttributeNames: map[string]string{"#s": "state"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":s": str("dispatching")},
	}); err != nil {
		t.Fatalf("UpdateItem: %v", err)
	}
	if _, err := r.meter.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.ledger), Key: map[string]types.AttributeValue{"pk": pk}, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	ws := r.meter.Writes()
	if len(ws) != 2 {
		t.Fatalf("meter recorded %d writes, want 2", len(ws))
	}
	if w := ws[0]; w.TimelineWrites != 2 || w.TimelineUnits != 2 {
		t.Errorf("put = %+v, want 2 timeline index writes of 1 WCU", w)
	}
	if w := ws[1]; w.TimelineWrites != 0 || w.TimelineUnits != 0 {
		t.Errorf("update = %+v, want no timeline index write", w)
	}
	if rs := r.meter.Reads(); len(rs) != 1 || rs[0].Size != ItemSize(item)+len("dispatching")-len("claimed") || rs[0].Units != 1 || !rs[0].Consistent {
		t.Errorf("reads = %+v, want one consistent read of the row, 1 RCU", rs)
	}
}
