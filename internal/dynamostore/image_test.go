package dynamostore

import (
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestItemFromImageConvertsEveryAttributeType(t *testing.T) {
	image := map[string]events.DynamoDBAttributeValue{
		"s":    events.NewStringAttribute("claimed"),
		"n":    events.NewNumberAttribute("42"),
		"b":    events.NewBinaryAttribute([]byte{1, 2}),
		"bool": events.NewBooleanAttribute(true),
		"null": events.NewNullAttribute(),
		"ss":   events.NewStringSetAttribute([]string{"a", "b"}),
		"ns":   events.NewNumberSetAttribute([]string{"1"}),
		"bs":   events.NewBinarySetAttribute([][]byte{{3}}),
		"l":    events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("x")}),
		"m":    events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": events.NewNumberAttribute("7")}),
	}
	want := map[string]types.AttributeValue{
		"s":    &types.AttributeValueMemberS{Value: "claimed"},
		"n":    &types.AttributeValueMemberN{Value: "42"},
		"b":    &types.AttributeValueMemberB{Value: []byte{1, 2}},
		"bool": &types.AttributeValueMemberBOOL{Value: true},
		"null": &types.AttributeValueMemberNULL{Value: true},
		"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":   &types.AttributeValueMemberNS{Value: []string{"1"}},
		"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{3}}},
		"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "x"}}},
		"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "7"}}},
	}
	if got := ItemFromImage(image); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	if ItemFromImage(nil) != nil {
		t.Fatal("nil image must stay nil")
	}
}
