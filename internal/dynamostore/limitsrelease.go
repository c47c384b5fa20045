package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Release implements ledger.Limiter: it reads the message's marker and,
// in one transaction conditioned on the marker still being there, deletes
// it and takes one from each counter it names. A counter that is gone
// (removed as stale, or its item expired) is left out; a marker that is
// gone (never counted, or released by another worker) makes it a no-op. A
// marker of the form before issue 44 is released the same way from the
// items it names.
func (l *Limits) Release(ctx context.Context, key string) error {
	out, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &l.table, Key: markerKey(key), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("limits: release: %w", err)
	}
	if m, ok := out.Item[attrCounted].(*types.AttributeValueMemberM); ok {
		counted := map[string][]string{}
		for pk, v := range m.Value {
			if list, ok := v.(*types.AttributeValueMemberL); ok {
				counted[pk] = strList(list)
			}
		}
		return l.release(ctx, key, counted)
	}
	if list, ok := out.Item[attrCounters].(*types.AttributeValueMemberL); ok {
		// A marker of the form before issue 44 names per-window counter
		// items ("limit#<rule>#<key>#<window start>"), each counting in
		// its attribute n.
		counted := map[string][]string{}
		for _, id := range strList(list) {
			counted[id] = []string{attrCount}
		}
		return l.release(ctx, key, counted)
	}
	return nil
}

func strList(list *types.AttributeValueMemberL) []string {
	var out []string
	for _, v := range list.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	return out
}

// release deletes the marker of key and takes one from each attribute of
// counted (item key → attribute names) still in its item and above zero;
// an item's update whose condition fails is read again from its old image.
func (l *Limits) release(ctx context.Context, key string, counted map[string][]string) error {
	for range maxLimitRaces + 2*len(counted) {
		pks := slices.Sorted(maps.Keys(counted))
		tx := []types.TransactWriteItem{{Delete: &types.Delete{
			TableName: &l.table, Key: markerKey(key),
			ConditionExpression: aws.String("attribute_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		}}}
		for _, pk := range pks {
			tx = append(tx, types.TransactWriteItem{Update: l.releaseUpdate(pk, counted[pk])})
		}
		_, err := l.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		var tce *types.TransactionCanceledException
		switch {
		case err == nil:
			return nil
		case !errors.As(err, &tce):
			return fmt.Errorf("limits: release: %w", err)
		case hasReason(tce, "TransactionConflict"):
			continue
		}
		r := tce.CancellationReasons
		if len(r) == 0 || aws.ToString(r[0].Code) == "ConditionalCheckFailed" {
			return nil // released meanwhile
		}
		changed := false
		for i, pk := range pks {
			if i+1 >= len(r) || aws.ToString(r[i+1].Code) != "ConditionalCheckFailed" {
				continue
			}
			changed = true
			kept := slices.DeleteFunc(slices.Clone(counted[pk]), func(a string) bool { return numberOf(r[i+1].Item[a]) <= 0 })
			if len(kept) == 0 {
				delete(counted, pk) // gone with its windows: nothing to take back there
			} else {
				counted[pk] = kept
			}
		}
		if !changed {
			return fmt.Errorf("limits: release: %w", err)
		}
	}
	return fmt.Errorf("limits: release: %d transaction conflicts: %w", maxLimitRaces, ledger.ErrConflict)
}

// releaseUpdate takes one from each of attrs in the item pk, on the
// condition that each is there and above zero.
func (l *Limits) releaseUpdate(pk string, attrs []string) *types.Update {
	names := map[string]string{}
	add, cond := make([]string, len(attrs)), make([]string, len(attrs))
	for j, a := range attrs {
		ref := fmt.Sprintf("#c%d", j)
		names[ref] = a
		add[j], cond[j] = ref+" :minus", ref+" > :zero"
	}
	return &types.Update{
		TableName:                           &l.table,
		Key:                                 map[string]types.AttributeValue{AttrPK: s(pk)},
		UpdateExpression:                    aws.String("ADD " + strings.Join(add, ", ")),
		ConditionExpression:                 aws.String(strings.Join(cond, " AND ")),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":minus": n(-1), ":zero": n(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
