package dynamostore

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// storedFixture is one row as an earlier form of the store wrote it: its
// item as a stream image carries it (DynamoDB JSON) and the entry that
// form's decoder read from it.
type storedFixture struct {
	Name  string                                   `json:"name"`
	Image map[string]events.DynamoDBAttributeValue `json:"image"`
	Entry json.RawMessage                          `json:"entry"`
}

// v1Fixtures is testdata/v1-rows.json: rows in the first stored form (long
// attribute names, times as text), written by that form's encoder.
const v1Fixtures = "v1-rows.json"

func readFixtures(name string) ([]storedFixture, error) {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		return nil, err
	}
	var fs []storedFixture
	return fs, json.Unmarshal(b, &fs)
}

// imageOf is ItemFromImage's inverse: an item as a stream image carries it.
func imageOf(item map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	out := make(map[string]events.DynamoDBAttributeValue, len(item))
	for k, v := range item {
		out[k] = imageValue(v)
	}
	return out
}

func imageValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = imageValue(x)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(imageOf(v.Value))
	}
	panic("imageValue: unsupported attribute type")
}
