package dynamostore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// scanFixture claims n intents one minute apart (row i is written at
// Epoch + i minutes) and returns the scanner and the keys in claim order.
func scanFixture(t *testing.T, n int) (*dynamostore.Scanner, []string) {
	t.Helper()
	ctx := context.Background()
	client := dynamodb.NewFromConfig(emulator.Config(t))
	table, content := emulator.UniqueName(t, "scan"), emulator.UniqueName(t, "scan-content")
	if err := dynamostore.CreateTables(ctx, client, table, content); err != nil {
		t.Fatal(err)
	}
	emulator.KeepExpired(t, client, content) // the clock is ledgertest.Epoch, days ago
	t.Cleanup(func() {
		for _, name := range []string{table, content} {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
		}
	})
	clock := ledgertest.NewClock()
	cases := &ledgertest.UseCases{Ports: assemble.Ports{
		Store:   dynamostore.New(client, table, dynamostore.DefaultShards),
		Content: dynamostore.NewContent(client, content),
		Clock:   clock.Now,
		Policy:  ledger.DefaultPolicy(),
	}}
	var keys []string
	for i := range n {
		in, sealed := ledgertest.Intent(i, ledger.Email, clock.Now(), time.Hour)
		res, err := cases.Claim(ctx, in, sealed, "test")
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, res.Entry.Key)
		clock.Advance(time.Minute)
	}
	return dynamostore.NewScanner(client, table), keys
}

func TestScannerPagesFilterOnUpdatedAt(t *testing.T) {
	sc, keys := scanFixture(t, 9)
	ctx := context.Background()
	// [Epoch+2m, Epoch+7m): rows 2..6; the bounds are inclusive, exclusive.
	f := dynamostore.ScanFilter{
		UpdatedSince: ledgertest.Epoch.Add(2 * time.Minute),
		UpdatedUntil: ledgertest.Epoch.Add(7 * time.Minute),
		PageSize:     2,
	}
	var got []string
	pages, start := 0, ""
	for {
		next, err := sc.Page(ctx, start, f, func(e ledger.Entry) error {
			if len(e.History) == 0 || e.Verify() != nil {
				t.Errorf("row %s decoded without a verifiable history", e.Key)
			}
			got = append(got, e.Key)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if next == "" {
			break
		}
		if next == start {
			t.Fatalf("scan did not advance past %s", start)
		}
		start = next
	}
	if pages < 4 {
		t.Errorf("9 rows in pages of 2 took %d pages; the page size was not applied", pages)
	}
	want := slices.Clone(keys[2:7])
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("scan returned %d rows %v, want rows 2..6 %v", len(got), got, want)
	}
}

func TestScannerAllWithoutFilter(t *testing.T) {
	sc, keys := scanFixture(t, 5)
	var got []string
	err := sc.All(context.Background(), dynamostore.ScanFilter{PageSize: 2}, func(e ledger.Entry) error {
		got = append(got, e.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(got, want) {
		t.Errorf("All returned %v, want %v", got, want)
	}
}

func TestScannerStopsOnCallbackError(t *testing.T) {
	sc, _ := scanFixture(t, 3)
	stop := context.Canceled
	calls := 0
	_, err := sc.Page(context.Background(), "", dynamostore.ScanFilter{}, func(ledger.Entry) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Errorf("Page = %v after %d calls, want the callback's error after 1 call", err, calls)
	}
}
