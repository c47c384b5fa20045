package emulator

import (
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Rewritten returns e with the reason of history entry i rewritten and every
// hash from it on recomputed, as an insider with write access to the table
// could: the entry's own chain still verifies. e's history is not changed.
func Rewritten(e ledger.Entry, i int, reason string) ledger.Entry {
	e.History = append([]ledger.Event(nil), e.History...)
	e.History[i].Reason = reason
	prev := ""
	if i > 0 {
		prev = e.History[i-1].Hash
	}
	for j := i; j < len(e.History); j++ {
		e.History[j].Prev = prev
		e.History[j].Hash = ledger.EventHash(e.Key, e.History[j])
		prev = e.History[j].Hash
	}
	return e
}

// RewriteRecomputed rewrites, in item (the ledger row e as DynamoDB holds
// it), what Rewritten rewrites: the reason of history entry i and every hash
// from it on. The caller writes item back.
func RewriteRecomputed(item map[string]types.AttributeValue, e ledger.Entry, i int, reason string) error {
	if i >= len(e.History) {
		return fmt.Errorf("row %s has %d entries, want more than %d", e.Key, len(e.History), i)
	}
	hist := item["history"].(*types.AttributeValueMemberL).Value
	hist[i].(*types.AttributeValueMemberM).Value["why"] = &types.AttributeValueMemberS{Value: reason}
	for j, ev := range Rewritten(e, i, reason).History[i:] {
		b, err := hex.DecodeString(ev.Hash)
		if err != nil {
			return err
		}
		hist[i+j].(*types.AttributeValueMemberM).Value["hash"] = &types.AttributeValueMemberB{Value: b}
	}
	return nil
}
