package bench

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestConsumed: reported units are summed and told write from read; an
// output with none is unreported, except a BatchGetItem, sized from its
// items; AskCapacity asks only calls that can report.
func TestConsumed(t *testing.T) {
	cc := func(u float64) *types.ConsumedCapacity { return &types.ConsumedCapacity{CapacityUnits: aws.Float64(u)} }
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	for name, tc := range map[string]struct {
		out  any
		want Consumption
	}{
		"update":      {&dynamodb.UpdateItemOutput{ConsumedCapacity: cc(2)}, Consumption{Units: 2, Reported: true, Write: true}},
		"transaction": {&dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{*cc(2), *cc(4)}}, Consumption{Units: 6, Reported: true, Write: true}},
		"get":         {&dynamodb.GetItemOutput{ConsumedCapacity: cc(1)}, Consumption{Units: 1, Reported: true}},
		"put, none":   {&dynamodb.PutItemOutput{}, Consumption{Write: true}},
		"failed call": {nil, Consumption{}},
		"batch get, sized": {&dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{"t": {item, item}}},
			Consumption{Units: 2, Reported: true}},
	} {
		if got := Consumed(tc.out); got != tc.want {
			t.Errorf("%s: %+v, want %+v", name, got, tc.want)
		}
	}
	in := &dynamodb.QueryInput{}
	if !AskCapacity(in, types.ReturnConsumedCapacityIndexes) || in.ReturnConsumedCapacity != types.ReturnConsumedCapacityIndexes {
		t.Errorf("query not asked: %q", in.ReturnConsumedCapacity)
	}
	if AskCapacity(&dynamodb.ScanInput{}, types.ReturnConsumedCapacityIndexes) {
		t.Error("a scan asked: no meter reads it back")
	}
}
