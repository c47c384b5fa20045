package bench

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func TestItemSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"string: name + utf-8 bytes", map[string]types.AttributeValue{"pk": str("abc")}, 2 + 3},
		{"multibyte string", map[string]types.AttributeValue{"é": str("ü")}, 2 + 2},
		{"number: 1 byte per two digits + 1", map[string]types.AttributeValue{"n": num("123")}, 1 + 2 + 1},
		{"number: trailing zeros trimmed", map[string]types.AttributeValue{"n": num("100")}, 1 + 1 + 1},
		{"number: epoch seconds", map[string]types.AttributeValue{"ttl": num("1764497097")}, 3 + 5 + 1},
		{"number: zero", map[string]types.AttributeValue{"n": num("0")}, 1 + 1},
		{"binary: raw bytes", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3, 4}}}, 1 + 4},
		{"boolean", map[string]types.AttributeValue{"ok": &types.AttributeValueMemberBOOL{Value: true}}, 2 + 1},
		{"null", map[string]types.AttributeValue{"x": &types.AttributeValueMemberNULL{Value: true}}, 1 + 1},
		{"empty list", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{}}, 1 + 3},
		{"list: 3 + 1 per element", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{str("ab"), num("7")}}}, 1 + 3 + (1 + 2) + (1 + 2)},
		{"map: 3 + 1 per element + names", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": str("v"), "id": str("xyz")}}}, 1 + 3 + (1 + 1 + 1) + (1 + 2 + 3)},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
		{"several attributes", map[string]types.AttributeValue{"pk": str(strings.Repeat("a", 64)), "state": str("claimed")}, 2 + 64 + 5 + 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ItemSize(tc.item); got != tc.want {
				t.Errorf("ItemSize = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	for _, tc := range []struct{ size, wcu, rcu int }{
		{0, 1, 1}, {1, 1, 1}, {1024, 1, 1}, {1025, 2, 1}, {4096, 4, 1}, {4097, 5, 2},
	} {
		if got := WriteUnits(tc.size); got != tc.wcu {
			t.Errorf("WriteUnits(%d) = %d, want %d", tc.size, got, tc.wcu)
		}
		if got := ReadUnits(tc.size); got != tc.rcu {
			t.Errorf("ReadUnits(%d) = %d, want %d", tc.size, got, tc.rcu)
		}
	}
}

func TestIndexWrites(t *testing.T) {
	open := func(pk, due string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": str("k"), "open_pk": str(pk), "open_due": str(due)}
	}
	closed := map[string]types.AttributeValue{"pk": str("k")}
	for _, tc := range []struct {
		name          string
		before, after map[string]types.AttributeValue
		want          int
	}{
		{"new open row: one put", nil, open("claimed#1", "t1"), 1},
		{"new closed row: none", nil, closed, 0},
		{"state moves: delete and put", open("claimed#1", "t1"), open("dispatching#1", "t2"), 2},
		{"due moves: delete and put", open("unknown#1", "t1"), open("unknown#1", "t2"), 2},
		{"keys unchanged: none", open("unknown#1", "t1"), open("unknown#1", "t1"), 0},
		{"row closes: one delete", open("dispatching#1", "t2"), closed, 1},
		{"closed stays closed: none", closed, closed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IndexWrites(tc.before, tc.after, "open_pk", "open_due"); got != tc.want {
				t.Errorf("IndexWrites = %d, want %d", got, tc.want)
			}
		})
	}
	if got, want := IndexEntrySize(open("claimed#1", "t1"), "pk", "open_pk", "open_due"), 100+(2+1)+(7+9)+(8+2); got != want {
		t.Errorf("IndexEntrySize = %d, want %d", got, want)
	}
}
