package awscall

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// TestStreamReadsNameTheStream: the digest function's reads of the ledger
// stream are recorded as the dynamodb actions IAM authorizes on the stream,
// GetRecords included, whose input is an opaque iterator: the middleware
// names the stream the iterator (and each next one) was issued for. An
// iterator it did not see issued is recorded on "*", which no stream grant
// allows. Through the SDK's own client, so its service id and member names
// are pinned too.
func TestStreamReadsNameTheStream(t *testing.T) {
	const arn = "arn:aws:dynamodb:us-east-1:111122223333:table/ledger/stream/2026-12-06T00:00:00.000"
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		switch op := r.Header.Get("X-Amz-Target"); {
		case strings.HasSuffix(op, ".DescribeStream"):
			fmt.Fprint(w, `{"StreamDescription":{"Shards":[]}}`)
		case strings.HasSuffix(op, ".GetShardIterator"):
			fmt.Fprint(w, `{"ShardIterator":"it-0"}`)
		default:
			n++
			_ = json.NewEncoder(w).Encode(map[string]any{"Records": []any{}, "NextShardIterator": fmt.Sprintf("it-%d", n)})
		}
	}))
	defer srv.Close()
	var mu sync.Mutex
	var got []Call
	sink := func(_ context.Context, c Call) { mu.Lock(); got = append(got, c); mu.Unlock() }
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}}
	cfg.APIOptions = append(cfg.APIOptions, Middleware("digest", "111122223333", sink))
	c := dynamodbstreams.NewFromConfig(cfg)
	ctx := context.Background()
	if _, err := c.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	it, err := c.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: aws.String("s"),
		ShardIteratorType: streamtypes.ShardIteratorTypeAtSequenceNumber, SequenceNumber: aws.String("1")})
	if err != nil {
		t.Fatal(err)
	}
	next := it.ShardIterator
	for range 2 {
		page, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: next})
		if err != nil {
			t.Fatal(err)
		}
		next = page.NextShardIterator
	}
	if _, err := c.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("not issued here")}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"dynamodb:DescribeStream " + arn, "dynamodb:GetShardIterator " + arn,
		"dynamodb:GetRecords " + arn, "dynamodb:GetRecords " + arn, "dynamodb:GetRecords *",
	}
	if len(got) != len(want) {
		t.Fatalf("calls %+v", got)
	}
	for i, c := range got {
		if c.Action+" "+c.Resource != want[i] || c.Function != "digest" || c.Operation != dynamodbstreams.ServiceID+"."+strings.Fields(strings.TrimPrefix(want[i], "dynamodb:"))[0] {
			t.Errorf("call %d: %+v, want %s", i, c, want[i])
		}
	}
}
