package dynamostore

import (
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// DispatchFilter returns the filter patterns of the dispatch function's
// event source on the ledger table's stream (Lambda event filtering, matched
// against the stream record as JSON), generated from ledger.TriggersDispatch
// and the state attribute: one pattern for the states a row may be inserted
// in, and one per state a row may move to, listing the states it may move
// from. A record matches if any pattern does.
func DispatchFilter() []map[string]interface{} {
	var inserted []string
	var movedTo []ledger.State
	movedFrom := map[ledger.State][]string{}
	for _, from := range append([]ledger.State{ledger.None}, ledger.States...) {
		for _, to := range ledger.States {
			switch {
			case !ledger.TriggersDispatch(from, to):
			case from == ledger.None:
				inserted = append(inserted, string(to))
			default:
				if movedFrom[to] == nil {
					movedTo = append(movedTo, to)
				}
				movedFrom[to] = append(movedFrom[to], string(from))
			}
		}
	}
	state := func(states []string) map[string]interface{} {
		return map[string]interface{}{AttrState: map[string]interface{}{"S": states}}
	}
	var patterns []map[string]interface{}
	if len(inserted) > 0 {
		patterns = append(patterns, map[string]interface{}{
			"eventName": []string{string(streamtypes.OperationTypeInsert)},
			"dynamodb":  map[string]interface{}{"NewImage": state(inserted)},
		})
	}
	for _, to := range movedTo {
		patterns = append(patterns, map[string]interface{}{
			"eventName": []string{string(streamtypes.OperationTypeModify)},
			"dynamodb":  map[string]interface{}{"NewImage": state([]string{string(to)}), "OldImage": state(movedFrom[to])},
		})
	}
	return patterns
}
