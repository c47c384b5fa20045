package bench

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The one DynamoDB capacity meter's two halves, shared by the benchmarks'
// meters (ReadCapacity, the limits' capacity) and the surge's: what asks a
// request for its consumed capacity, and what reads it back.

// AskCapacity sets ReturnConsumedCapacity to mode on the input of a DynamoDB
// call that can report it, and reports whether params is one.
func AskCapacity(params any, mode types.ReturnConsumedCapacity) bool {
	switch in := params.(type) {
	case *dynamodb.PutItemInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.UpdateItemInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.DeleteItemInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.GetItemInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.QueryInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.BatchGetItemInput:
		in.ReturnConsumedCapacity = mode
	case *dynamodb.TransactWriteItemsInput:
		in.ReturnConsumedCapacity = mode
	default:
		return false
	}
	return true
}

// Consumption is the capacity a call's output reports.
type Consumption struct {
	// Units are the capacity units reported (or, for a BatchGetItem the
	// endpoint reports nothing for, sized here).
	Units float64
	// Reported is false if the output carried no figure at all.
	Reported bool
	// Write tells write capacity from read capacity.
	Write bool
}

// Consumed reads the capacity an output reports. A BatchGetItem the
// endpoint reports nothing for (ministack) is sized from the items it
// returned, 1 unit per started 4 KB (strongly consistent reads).
func Consumed(result any) Consumption {
	var cs []types.ConsumedCapacity
	one := func(c *types.ConsumedCapacity) {
		if c != nil {
			cs = append(cs, *c)
		}
	}
	var c Consumption
	switch out := result.(type) {
	case *dynamodb.PutItemOutput:
		one(out.ConsumedCapacity)
		c.Write = true
	case *dynamodb.UpdateItemOutput:
		one(out.ConsumedCapacity)
		c.Write = true
	case *dynamodb.DeleteItemOutput:
		one(out.ConsumedCapacity)
		c.Write = true
	case *dynamodb.TransactWriteItemsOutput:
		cs = out.ConsumedCapacity
		c.Write = true
	case *dynamodb.GetItemOutput:
		one(out.ConsumedCapacity)
	case *dynamodb.QueryOutput:
		one(out.ConsumedCapacity)
	case *dynamodb.BatchGetItemOutput:
		cs = out.ConsumedCapacity
	}
	for _, cc := range cs {
		if cc.CapacityUnits != nil {
			c.Units += *cc.CapacityUnits
			c.Reported = true
		}
	}
	if out, ok := result.(*dynamodb.BatchGetItemOutput); ok && !c.Reported {
		for _, items := range out.Responses {
			for _, it := range items {
				c.Units += float64(ReadUnits(ItemSize(it)))
			}
		}
		c.Reported = true
	}
	return c
}
