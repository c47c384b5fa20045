package bench

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Sizes from "DynamoDB item sizes and formats" in the DynamoDB developer
// guide: an item's size is the sum of its attribute names and values.
//   - string: UTF-8 bytes; binary: raw bytes;
//   - number: 1 byte per two significant digits, plus 1 byte;
//   - null and boolean: 1 byte;
//   - list and map: 3 bytes of overhead plus the nested elements, and
//     1 byte per element;
//   - sets: the sum of their members (numbers sized as above).
const (
	containerOverhead = 3
	elementOverhead   = 1
	// IndexEntryOverhead is what DynamoDB adds to every index entry when it
	// sizes a write to a secondary index.
	IndexEntryOverhead = 100
	// WriteUnitBytes is the item size one write capacity unit covers.
	WriteUnitBytes = 1024
	// ReadUnitBytes is the item size one strongly consistent read unit covers.
	ReadUnitBytes = 4096
)

// ItemSize returns the size DynamoDB charges for item, in bytes.
func ItemSize(item map[string]types.AttributeValue) int {
	size := 0
	for name, v := range item {
		size += len(name) + ValueSize(v)
	}
	return size
}

// ValueSize returns the size of one attribute value, without its name.
func ValueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		return sizeOfSet(v.Value, func(s string) int { return len(s) })
	case *types.AttributeValueMemberNS:
		return sizeOfSet(v.Value, numberSize)
	case *types.AttributeValueMemberBS:
		return sizeOfSet(v.Value, func(b []byte) int { return len(b) })
	case *types.AttributeValueMemberL:
		n := containerOverhead
		for _, e := range v.Value {
			n += elementOverhead + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := containerOverhead
		for name, e := range v.Value {
			n += elementOverhead + len(name) + ValueSize(e)
		}
		return n
	}
	return 0
}

// numberSize sizes a DynamoDB number: leading and trailing zeros are
// trimmed, then 1 byte per two significant digits plus 1 byte.
func numberSize(num string) int {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, strings.SplitN(strings.ToLower(num), "e", 2)[0])
	digits = strings.Trim(digits, "0")
	if digits == "" {
		return 1
	}
	return (len(digits)+1)/2 + 1
}

// WriteUnits returns the write capacity units one write of an item of size
// bytes consumes (at least 1).
func WriteUnits(size int) int { return max(1, (size+WriteUnitBytes-1)/WriteUnitBytes) }

// ReadUnits returns the read units one strongly consistent read of size
// bytes consumes (at least 1).
func ReadUnits(size int) int { return max(1, (size+ReadUnitBytes-1)/ReadUnitBytes) }

// IndexWrites returns how many writes a change of an item from before to
// after makes to a KEYS_ONLY secondary index keyed on hashKey/rangeKey: an
// entry appears (1 put), disappears (1 delete), moves to new keys (delete
// and put: 2) or stays (0). A nil map is an absent item.
func IndexWrites(before, after map[string]types.AttributeValue, hashKey, rangeKey string) int {
	kb, inB := indexKey(before, hashKey, rangeKey)
	ka, inA := indexKey(after, hashKey, rangeKey)
	switch {
	case inB && inA && kb == ka:
		return 0
	case inB && inA:
		return 2
	case inB || inA:
		return 1
	}
	return 0
}

func indexKey(item map[string]types.AttributeValue, hashKey, rangeKey string) (string, bool) {
	h, ok1 := item[hashKey].(*types.AttributeValueMemberS)
	r, ok2 := item[rangeKey].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return "", false
	}
	return h.Value + "\x00" + r.Value, true
}

// IndexEntrySize is the size of an item's KEYS_ONLY index entry: the table
// key, the index key and the fixed per-entry overhead.
func IndexEntrySize(item map[string]types.AttributeValue, attrs ...string) int {
	n := IndexEntryOverhead
	for _, a := range attrs {
		if v, ok := item[a]; ok {
			n += len(a) + ValueSize(v)
		}
	}
	return n
}

// sizeOfSet returns the size of a string, number or binary set: the sum of
// its members' sizes, with no per-member overhead.
func sizeOfSet[T any](members []T, size func(T) int) int {
	n := 0
	for _, m := range members {
		n += size(m)
	}
	return n
}
