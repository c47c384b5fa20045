package dynamostore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/bench"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// limitsTable creates a limits table on the emulator for t.
func limitsTable(t *testing.T) (*dynamodb.Client, string) {
	client := dynamodb.NewFromConfig(emulator.Config(t))
	name := emulator.UniqueName(t, "limits")
	if err := dynamostore.CreateLimitsTable(context.Background(), client, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name}) })
	return client, name
}

func TestLimitsContract(t *testing.T) {
	ledgertest.RunLimitsContract(t, func(t *testing.T) ledgertest.Limits {
		client, name := limitsTable(t)
		return dynamostore.NewLimits(client, name)
	})
}

// TestLimitsContractShared runs the contract with the SMS country caps of
// US and CA kept in the global SMS cap's item (FR in an item of its own).
func TestLimitsContractShared(t *testing.T) {
	ledgertest.RunLimitsContract(t, func(t *testing.T) ledgertest.Limits {
		client, name := limitsTable(t)
		return dynamostore.NewLimits(client, name).ShareSMSCaps([]string{"US", "CA"})
	})
}

// limitsBase lies ahead of the real clock, so that the emulator's TTL
// reaper deletes none of the items under test.
var limitsBase = time.Date(2036, 6, 1, 9, 0, 0, 0, time.UTC)

// defaultCounts are the counts of a message under the default caps
// (internal/settings): destination 5/10m, subject 10/1h, and for an SMS
// the country cap 200/1h and the global cap 1000/1h.
func defaultCounts(ch ledger.Channel, dest, subject, region string) []ledger.Count {
	cs := []ledger.Count{
		{Rule: ledger.RuleDestination, Key: string(ch) + "#" + dest, Cap: ledger.Cap{Max: 5, Window: 10 * time.Minute}},
		{Rule: ledger.RuleSubject, Key: subject, Cap: ledger.Cap{Max: 10, Window: time.Hour}},
	}
	if ch == ledger.SMS {
		cs = append(cs,
			ledger.Count{Rule: ledger.RuleSMSCountryCap, Key: region, Cap: ledger.Cap{Max: 200, Window: time.Hour}},
			ledger.Count{Rule: ledger.RuleSMSGlobal, Key: string(ledger.SMS), Cap: ledger.Cap{Max: 1000, Window: time.Hour}})
	}
	return cs
}

// counterItems scans the table's counter items ("lim#…").
func counterItems(t *testing.T, client *dynamodb.Client, table string) map[string]map[string]types.AttributeValue {
	t.Helper()
	out := map[string]map[string]types.AttributeValue{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: &table, ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			if pk := item["pk"].(*types.AttributeValueMemberS).Value; strings.HasPrefix(pk, "lim#") {
				out[pk] = item
			}
		}
	}
	return out
}

// fp is a fingerprint of realistic length (an HMAC-SHA-256, base64url).
func fp(i int) string { return fmt.Sprintf("%043d", i) }

// TestLimitsItemsStaySmall: after five hours of rolling windows under the
// default caps, every counter item keeps only the counters a worker may
// still read (at most four window attributes per rule and key), so each is
// a couple of hundred bytes, however many windows went by: the SMS item
// shared by the global cap and two regions, the items of a busy subject and
// destination, and the item of a destination written only every few hours
// (whose TTL passed between its admissions, so that an admission found it
// expired but not yet deleted, as DynamoDB's lazy TTL leaves it).
func TestLimitsItemsStaySmall(t *testing.T) {
	ctx := context.Background()
	client, table := limitsTable(t)
	l := dynamostore.NewLimits(client, table).ShareSMSCaps([]string{"US", "CA"})
	var admitted []string
	step := 45 * time.Second
	var now time.Time
	for i := range int(5 * time.Hour / step) {
		now = limitsBase.Add(time.Duration(i) * step)
		ch, region := ledger.Email, ""
		if i%2 == 1 {
			ch, region = ledger.SMS, []string{"US", "CA"}[i/2%2]
		}
		key := fmt.Sprint("m", i)
		a, err := l.Admit(ctx, key, defaultCounts(ch, fp(i%3), fmt.Sprint("acct-", i%4), region), now, now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if a.Limited == -1 {
			admitted = append(admitted, key)
		}
		if i%120 == 0 { // a sparse destination, every 90 minutes: its item's TTL passes between admissions
			if _, err := l.Admit(ctx, key+"-sparse", defaultCounts(ledger.Email, "sparse", "acct-sparse", ""), now, now.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if len(admitted) > 20 && i%5 == 0 { // a release of a message counted half an hour ago
			if err := l.Release(ctx, admitted[len(admitted)-20]); err != nil {
				t.Fatal(err)
			}
		}
	}
	items := counterItems(t, client, table)
	largest := 0
	for pk, item := range items {
		size, perPrefix := bench.ItemSize(item), map[string]int{}
		for name := range item {
			if name != "pk" && name != "ttl" {
				perPrefix[strings.TrimRight(name, "0123456789")]++
			}
		}
		t.Logf("%s: %d B, window attributes %v", pk, size, perPrefix)
		largest = max(largest, size)
		for prefix, n := range perPrefix {
			if n > 3 {
				t.Errorf("%s holds %d window attributes of %q, want at most 3 (windows k-1, k and k+1)", pk, n, prefix)
			}
		}
	}
	if len(items) != 13 || largest > 200 {
		t.Fatalf("%d counter items, the largest %d B: want 13 (3 email and 3 SMS destinations, 4 subjects, the shared SMS item, the sparse destination and its subject), each at most 200 B", len(items), largest)
	}
}

// TestLimitsOldMarker: a message admitted before issue 44 left per-window
// counter items ("limit#<rule>#<key>#<window start>", attribute n) and a
// marker listing them. Its redelivery is a repeat (counted at the old
// marker's time), and its release takes one from exactly those items and
// deletes the marker, once, leaving the counters of the new form alone.
func TestLimitsOldMarker(t *testing.T) {
	ctx := context.Background()
	client, table := limitsTable(t)
	l := dynamostore.NewLimits(client, table)
	c := ledger.Count{Rule: ledger.RuleDestination, Key: "email#" + fp(7), Cap: ledger.Cap{Max: 1, Window: 10 * time.Minute}}
	at := limitsBase.Add(3 * time.Minute)
	var ids []types.AttributeValue
	put := func(item map[string]types.AttributeValue) {
		t.Helper()
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
			t.Fatal(err)
		}
	}
	num := func(v int64) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(v)} }
	for _, ctr := range ledger.Counters(c, at) {
		id := "limit#" + ctr.ID
		ids = append(ids, &types.AttributeValueMemberS{Value: id})
		put(map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}, "n": num(2), "ttl": num(ctr.To.Add(time.Hour).Unix())})
	}
	put(map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "admit#old"}, "counters": &types.AttributeValueMemberL{Value: ids},
		"at": num(at.UnixMilli()), "ttl": num(at.Add(2 * time.Hour).Unix()),
	})
	if a, err := l.Admit(ctx, "old", []ledger.Count{c}, at.Add(time.Minute), at.Add(time.Hour)); err != nil || !a.Repeat || !a.CountedAt.Equal(at) {
		t.Fatalf("the old message's redelivery: %+v %v, want a repeat counted at %s", a, err, at)
	}
	if a, err := l.Admit(ctx, "new", []ledger.Count{c}, at.Add(time.Minute), at.Add(time.Hour)); err != nil || a.Limited != -1 {
		t.Fatalf("a new message: %+v %v, want admitted: the old counters are not read", a, err)
	}
	for range 2 {
		if err := l.Release(ctx, "old"); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": id}, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Item["n"].(*types.AttributeValueMemberN).Value; got != "1" {
			t.Errorf("%s holds %s after the old message's release (twice), want 1: taken back exactly once", id.(*types.AttributeValueMemberS).Value, got)
		}
	}
	if out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "admit#old"}}, ConsistentRead: aws.Bool(true)}); err != nil || out.Item != nil {
		t.Fatalf("the old marker after its release: %v %v, want gone", out.Item, err)
	}
	if a, err := l.Admit(ctx, "other", []ledger.Count{c}, at.Add(2*time.Minute), at.Add(time.Hour)); err != nil || a.Limited != 0 || a.Count != 1 {
		t.Fatalf("another message after the old release: %+v %v, want limited at 1 by the new message: the old release took nothing from the new counters", a, err)
	}
}
