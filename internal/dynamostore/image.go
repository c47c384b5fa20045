package dynamostore

import (
	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ItemFromImage converts a stream record's image (aws-lambda-go's attribute
// values) into the SDK's attribute values, so the store's own decoder reads
// it (DecodeImage). A nil image is a nil item.
func ItemFromImage(image map[string]events.DynamoDBAttributeValue) map[string]types.AttributeValue {
	if image == nil {
		return nil
	}
	out := make(map[string]types.AttributeValue, len(image))
	for k, v := range image {
		if av := attributeOf(v); av != nil {
			out[k] = av
		}
	}
	return out
}

func attributeOf(v events.DynamoDBAttributeValue) types.AttributeValue {
	switch v.DataType() {
	case events.DataTypeString:
		return &types.AttributeValueMemberS{Value: v.String()}
	case events.DataTypeNumber:
		return &types.AttributeValueMemberN{Value: v.Number()}
	case events.DataTypeBinary:
		return &types.AttributeValueMemberB{Value: v.Binary()}
	case events.DataTypeBoolean:
		return &types.AttributeValueMemberBOOL{Value: v.Boolean()}
	case events.DataTypeNull:
		return &types.AttributeValueMemberNULL{Value: true}
	case events.DataTypeStringSet:
		return &types.AttributeValueMemberSS{Value: v.StringSet()}
	case events.DataTypeNumberSet:
		return &types.AttributeValueMemberNS{Value: v.NumberSet()}
	case events.DataTypeBinarySet:
		return &types.AttributeValueMemberBS{Value: v.BinarySet()}
	case events.DataTypeList:
		l := make([]types.AttributeValue, 0, len(v.List()))
		for _, x := range v.List() {
			if av := attributeOf(x); av != nil {
				l = append(l, av)
			}
		}
		return &types.AttributeValueMemberL{Value: l}
	case events.DataTypeMap:
		return &types.AttributeValueMemberM{Value: ItemFromImage(v.Map())}
	}
	return nil
}

// DecodeImage reads a ledger entry from a stream record's image of its row.
func DecodeImage(image map[string]events.DynamoDBAttributeValue) (ledger.Entry, error) {
	return DecodeItem(ItemFromImage(image))
}
