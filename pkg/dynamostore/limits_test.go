package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/emulator"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestLimitsContract(t *testing.T) {
	ledgertest.RunLimitsContract(t, func(t *testing.T) ledgertest.Limits {
		client := dynamodb.NewFromConfig(emulator.Config(t))
		name := emulator.UniqueName(t, "limits")
		if err := dynamostore.CreateLimitsTable(context.Background(), client, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
		return dynamostore.NewLimits(client, name)
	})
}
