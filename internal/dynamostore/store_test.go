package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// newTables creates a uniquely named ledger and content table on the emulator.
func newTables(t *testing.T) (*dynamodb.Client, string, string) {
	t.Helper()
	client := dynamodb.NewFromConfig(emulator.Config(t))
	ledgerTable, contentTable := emulator.UniqueName(t, "ledger"), emulator.UniqueName(t, "content")
	ctx := context.Background()
	if err := dynamostore.CreateTables(ctx, client, ledgerTable, contentTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{ledgerTable, contentTable} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
		}
	})
	return client, ledgerTable, contentTable
}

func TestContract(t *testing.T) {
	ledgertest.RunStoreContract(t, func(t *testing.T) ledger.Store {
		client, table, _ := newTables(t)
		return dynamostore.New(client, table, dynamostore.DefaultShards)
	})
}

func TestTimelineContract(t *testing.T) {
	ledgertest.RunTimelineContract(t, func(t *testing.T) ledgertest.TimelineStore {
		client, table, _ := newTables(t)
		return dynamostore.New(client, table, dynamostore.DefaultShards)
	})
}

func TestContentStore(t *testing.T) {
	ledgertest.RunContentContract(t, func(t *testing.T) ledger.ContentStore {
		client, _, table := newTables(t)
		return dynamostore.NewContent(client, table)
	})
}

func TestBudgetContract(t *testing.T) {
	ledgertest.RunBudgetContract(t, func(t *testing.T, rates map[ledger.Channel]float64) ledger.Budget {
		client := dynamodb.NewFromConfig(emulator.Config(t))
		name := emulator.UniqueName(t, "budget")
		if err := dynamostore.CreateBudgetTable(context.Background(), client, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
		return dynamostore.NewBudget(client, name, rates)
	})
}

func TestProgressContract(t *testing.T) {
	ledgertest.RunProgressContract(t, func(t *testing.T) ledger.Progress {
		client := dynamodb.NewFromConfig(emulator.Config(t))
		name := emulator.UniqueName(t, "progress")
		if err := dynamostore.CreateBudgetTable(context.Background(), client, name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
		return dynamostore.NewProgress(client, name)
	})
}
