package bench

import (
	"context"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// ReadCapacity adds up the read capacity of a client's reads as the surge
// meters it: every GetItem, Query and BatchGetItem asks for
// ReturnConsumedCapacity=TOTAL and the units the endpoint reports are
// summed (ministack computes them by DynamoDB's rules); a BatchGetItem the
// endpoint reports nothing for (ministack) is sized from the items it
// returned, 1 unit per started 4 KB (strongly consistent). It is safe for
// concurrent use.
type ReadCapacity struct {
	mu    sync.Mutex
	units map[string]float64 // by operation
}

// Option installs r on a DynamoDB client:
//
//	dynamodb.NewFromConfig(cfg, counter.Option, reads.Option)
func (r *ReadCapacity) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.ReadCapacity",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				switch in.Parameters.(type) {
				case *dynamodb.GetItemInput, *dynamodb.QueryInput, *dynamodb.BatchGetItemInput:
					AskCapacity(in.Parameters, types.ReturnConsumedCapacityTotal)
				default:
					return next.HandleInitialize(ctx, in)
				}
				out, md, err := next.HandleInitialize(ctx, in)
				if err == nil {
					r.add(awsmiddleware.GetOperationName(ctx), Consumed(out.Result).Units)
				}
				return out, md, err
			}), middleware.After)
	})
}

func (r *ReadCapacity) add(op string, u float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.units == nil {
		r.units = map[string]float64{}
	}
	r.units[op] += u
}

// Units returns the read units by operation since the last Reset.
func (r *ReadCapacity) Units() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64, len(r.units))
	for k, v := range r.units {
		out[k] = v
	}
	return out
}

// Total is the read units of every operation since the last Reset.
func (r *ReadCapacity) Total() float64 {
	t := 0.0
	for _, v := range r.Units() {
		t += v
	}
	return t
}

// Reset forgets the units counted.
func (r *ReadCapacity) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.units = nil
}
