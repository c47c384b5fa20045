package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/s3digest"
)

// findingLine is a finding as verify prints it: its code first, then what
// it names (docs/digests.md §7).
var findingLine = regexp.MustCompile(`^([a-z][a-z-]*) (ROW [0-9a-f?]+( digest [0-9]+)?|DIGEST [0-9]+|OBJECT \S+): \S`)

// findings returns the codes of out's finding lines, and fails the test on
// a line that is neither a finding, an explanation (indented) nor the
// verdict.
func findings(t *testing.T, out string) map[string][]string {
	t.Helper()
	got := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch m := findingLine.FindStringSubmatch(l); {
		case m != nil:
			got[m[1]] = append(got[m[1]], l)
		case l == "" || strings.HasPrefix(l, " ") || strings.HasPrefix(l, "ok: "):
		default:
			t.Errorf("not a finding line: %q", l)
		}
	}
	return got
}

// TestVerifyNeverStopsEarlyOnEmulator (issue 43 item 5): an item that is
// not a ledger row is a finding and every other row is still checked, by
// verify --all, verify <challenge> and export; a challenge whose row is
// gone is judged against the digests; the digests stopping (stale) and a
// row pending past the bound fail; a delete marker over a digest and an
// object that is not a digest are findings. Every finding is one line,
// its code first. It is long because it is one emulator fixture (a table
// and a locked bucket are slow to make) checked in a list of steps.
func TestVerifyNeverStopsEarlyOnEmulator(t *testing.T) {
	f := newDigestFixture(t, 40)
	ctx := context.Background()
	out, errOut, code := f.verify(f.bucket)
	wantCode(t, code, exitOK, out, errOut)

	t.Run("a malformed row is a finding; the others are still checked", func(t *testing.T) {
		bad, rewritten := f.keys[2], f.keys[0]
		badItem, rewrittenItem := f.rawItem(bad), f.rawItem(rewritten)
		defer f.putItem(badItem)
		defer f.putItem(rewrittenItem)
		broken := f.rawItem(bad)
		broken["expires_at"] = &types.AttributeValueMemberS{Value: "not a time"}
		f.putItem(broken)
		f.rewriteRecomputed(rewritten, 1, "operator decision: accepted")

		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitFailure, out, errOut)
		got := findings(t, out)
		if len(got[digest.CodeMalformedRow]) != 1 || !strings.HasPrefix(got[digest.CodeMalformedRow][0], "malformed-row ROW "+bad+": ") ||
			len(got[digest.CodeRewritten]) != 1 || !strings.HasPrefix(got[digest.CodeRewritten][0], "rewritten ROW "+rewritten+" digest ") ||
			len(got[digest.CodeDeleted]) != 0 || !strings.Contains(errOut, "1 items are not ledger rows") {
			t.Fatalf("verify --all:\n%s\n%s", out, errOut)
		}
		// verify <challenge> of the malformed row's challenge; of another.
		out, errOut, code = f.run("verify", chal(102), "--digest-bucket", f.bucket, "--digest-key", f.keyARN)
		wantCode(t, code, exitFailure, out, errOut)
		if got := findings(t, out); len(got[digest.CodeMalformedRow]) != 1 {
			t.Fatalf("verify %s:\n%s", chal(102), out)
		}
		out, errOut, code = f.run("verify", chal(103), "--digest-bucket", f.bucket, "--digest-key", f.keyARN)
		wantCode(t, code, exitOK, out, errOut)
		// export writes every other row, names the item on stderr, exits 1.
		path := filepath.Join(t.TempDir(), "export.jsonl")
		out, errOut, code = f.run("export", "--since", "2020-01-01", "--until", "2030-01-01", "--out", path)
		wantCode(t, code, exitFailure, out, errOut)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(string(raw), "\n")
		if lines != len(f.keys)+7 || strings.Contains(string(raw), bad) || !strings.Contains(errOut, "malformed-row ROW "+bad+": ") {
			t.Fatalf("export: %d lines (want %d), stderr %s", lines, len(f.keys)+7, errOut)
		}
	})
	t.Run("a challenge whose row is gone is judged against the digests", func(t *testing.T) {
		victim := f.keys[1]
		item := f.rawItem(victim)
		defer f.putItem(item)
		if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &f.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: victim}}}); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.run("verify", chal(101), "--digest-bucket", f.bucket, "--digest-key", f.keyARN)
		wantCode(t, code, exitFailure, out, errOut)
		if got := findings(t, out); len(got[digest.CodeDeleted]) != 1 || !strings.HasPrefix(got[digest.CodeDeleted][0], "deleted ROW "+victim+" digest ") {
			t.Fatalf("verify %s:\n%s", chal(101), out)
		}
		// Without the digests, nothing says it ever existed.
		_, _, code = f.run("verify", chal(101))
		if code != exitNotFound {
			t.Fatalf("without digests: exit %d", code)
		}
	})
	t.Run("the digests stopped: stale; a row waiting: pending-too-long", func(t *testing.T) {
		f.clock.Advance(16 * time.Minute)
		defer f.clock.Advance(-16 * time.Minute)
		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitFailure, out, errOut)
		if got := findings(t, out); len(got[digest.CodeStale]) != 1 {
			t.Fatalf("16 minutes after the newest digest:\n%s", out)
		}
		out, errOut, code = f.verify(f.bucket, "--stale-after", "1h")
		wantCode(t, code, exitOK, out, errOut)
		key := f.claim(900, ledger.Email, ledger.Single)
		defer func() {
			_, _ = f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &f.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
		}()
		f.clock.Advance(61 * time.Minute)
		defer f.clock.Advance(-61 * time.Minute)
		out, errOut, code = f.verify(f.bucket, "--stale-after", "2h")
		wantCode(t, code, exitOK, out, errOut)
		if got := findings(t, out); len(got[digest.CodePendingTooLong]) != 0 || len(got[digest.CodePending]) != 1 {
			t.Fatalf("pending 61m, bound 2h:\n%s", out)
		}
		out, errOut, code = f.verify(f.bucket, "--stale-after", "1h")
		wantCode(t, code, exitFailure, out, errOut)
		if got := findings(t, out); len(got[digest.CodePendingTooLong]) != 1 || !strings.HasPrefix(got[digest.CodePendingTooLong][0], "pending-too-long ROW "+key+": ") {
			t.Fatalf("pending 61m, bound 1h:\n%s", out)
		}
	})
	t.Run("a delete marker over a digest; an object that is not a digest", func(t *testing.T) {
		// Object Lock keeps versions, not names: a DeleteObject without a
		// version id puts a delete marker over a locked digest. This case
		// changes f.bucket for good: it runs last.
		if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.bucket, Key: aws.String(digest.ObjectName(1))}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String("digests/1.json"), Body: strings.NewReader("{}")}); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitFailure, out, errOut)
		got := findings(t, out)
		if len(got[digest.CodeDeleteMarker]) != 1 || !strings.HasPrefix(got[digest.CodeDeleteMarker][0], "delete-marker DIGEST 1: ") ||
			len(got[digest.CodeForeign]) != 1 || !strings.HasPrefix(got[digest.CodeForeign][0], "foreign OBJECT digests/1.json: ") ||
			len(got[digest.CodeMissing]) != 0 || len(got[digest.CodeSignature]) != 0 {
			t.Fatalf("verify:\n%s", out)
		}
	})
}

// TestHeartbeatOnEmulator (issue 43 item 1): on a quiet table the newest
// digest grows stale and verify fails; the schedule's tick, handed to the
// real digest handler (KMS and an Object Lock bucket on the emulator) while
// a stream batch is digested, writes a digest of no rows in the one chain,
// and verify passes again.
func TestHeartbeatOnEmulator(t *testing.T) {
	f := newDigestFixture(t, 40)
	ctx := context.Background()
	before, err := s3digest.New(f.s3, f.bucket).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(16 * time.Minute)
	out, errOut, code := f.verify(f.bucket)
	wantCode(t, code, exitFailure, out, errOut)
	if got := findings(t, out); len(got) != 1 || len(got[digest.CodeStale]) != 1 {
		t.Fatalf("16 quiet minutes:\n%s", out)
	}
	f.claim(950, ledger.Email, ledger.Single)
	done := make(chan error, 1)
	go func() {
		_, err := f.handler.Invoke(ctx, json.RawMessage(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events",`+
			`"account":"000000000000","time":"2026-11-30T09:16:00Z","region":"us-east-1","resources":[],"detail":{}}`))
		done <- err
	}()
	f.digestNew(40)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after, err := s3digest.New(f.s3, f.bucket).List(ctx)
	if err != nil || len(after) < len(before)+1 || len(after) > len(before)+2 {
		t.Fatalf("digests %v, before %v: %v", after, before, err)
	}
	out, errOut, code = f.verify(f.bucket)
	wantCode(t, code, exitOK, out, errOut)
	if len(findings(t, out)) != 0 {
		t.Fatalf("after the tick:\n%s", out)
	}
	// And a tick alone, after another quiet while.
	f.clock.Advance(16 * time.Minute)
	if err := f.handler.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = f.verify(f.bucket)
	wantCode(t, code, exitOK, out, errOut)
}

// TestVerifyIncompleteOnEmulator: verify that cannot read the table to the
// end exits 4 (its findings are partial), not 1 nor 0.
func TestVerifyIncompleteOnEmulator(t *testing.T) {
	f := newFixture(t)
	f.env = map[string]string{"LEDGER_TABLE": f.table + "-absent"}
	out, errOut, code := f.run("verify", "--all")
	if code != exitIncomplete || !strings.Contains(errOut, "verification incomplete") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
