package emulator

import (
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// RewriteRecomputed rewrites, in item (the ledger row e as DynamoDB holds
// it), the reason of history entry i and every hash from it on, as an
// insider with write access to the table could: the row's own chain still
// verifies. The caller writes item back.
func RewriteRecomputed(item map[string]types.AttributeValue, e ledger.Entry, i int, reason string) error {
	if i >= len(e.History) {
		return fmt.Errorf("row %s has %d entries, want more than %d", e.Key, len(e.History), i)
	}
	hist := item["history"].(*types.AttributeValueMemberL).Value
	e.History = append([]ledger.Event(nil), e.History...)
	e.History[i].Reason = reason
	hist[i].(*types.AttributeValueMemberM).Value["why"] = &types.AttributeValueMemberS{Value: reason}
	prev := ""
	if i > 0 {
		prev = e.History[i-1].Hash
	}
	for j := i; j < len(e.History); j++ {
		e.History[j].Prev = prev
		e.History[j].Hash = ledger.EventHash(e.Key, e.History[j])
		prev = e.History[j].Hash
		b, err := hex.DecodeString(prev)
		if err != nil {
			return err
		}
		hist[j].(*types.AttributeValueMemberM).Value["hash"] = &types.AttributeValueMemberB{Value: b}
	}
	return nil
}
