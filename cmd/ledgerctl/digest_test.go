package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/digeststream"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/kmsdigest"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/s3digest"
)

// streamEvent reads every record of the table's stream (from the trim
// horizon) as the Lambda events the digest function receives, in batches
// of at most size records.
func streamEvents(t *testing.T, cfg aws.Config, db *dynamodb.Client, table string, size int) []events.DynamoDBTimeWindowEvent {
	t.Helper()
	ctx := context.Background()
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err != nil {
		t.Fatal(err)
	}
	streams := dynamodbstreams.NewFromConfig(cfg)
	arn := desc.Table.LatestStreamArn
	sd, err := streams.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: arn})
	if err != nil {
		t.Fatal(err)
	}
	var out []events.DynamoDBTimeWindowEvent
	for _, sh := range sd.StreamDescription.Shards {
		it, err := streams.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: arn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		var batch events.DynamoDBTimeWindowEvent
		batch.ShardID = aws.ToString(sh.ShardId)
		for i := it.ShardIterator; i != nil; {
			got, err := streams.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: i})
			if err != nil {
				t.Fatal(err)
			}
			i = got.NextShardIterator
			if len(got.Records) == 0 {
				break
			}
			for _, r := range got.Records {
				rec := events.DynamoDBEventRecord{
					EventName: string(r.EventName), EventSource: "aws:dynamodb", EventSourceArn: aws.ToString(arn),
					Change: events.DynamoDBStreamRecord{
						Keys: emulator.StreamImage(r.Dynamodb.Keys), NewImage: emulator.StreamImage(r.Dynamodb.NewImage), OldImage: emulator.StreamImage(r.Dynamodb.OldImage),
						SequenceNumber: aws.ToString(r.Dynamodb.SequenceNumber), StreamViewType: string(r.Dynamodb.StreamViewType),
					},
				}
				if r.Dynamodb.ApproximateCreationDateTime != nil {
					rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *r.Dynamodb.ApproximateCreationDateTime}
				}
				if r.UserIdentity != nil {
					rec.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(r.UserIdentity.Type), PrincipalID: aws.ToString(r.UserIdentity.PrincipalId)}
				}
				batch.Records = append(batch.Records, rec)
				if len(batch.Records) == size {
					out = append(out, batch)
					batch.Records = nil
				}
			}
		}
		if len(batch.Records) > 0 {
			out = append(out, batch)
		}
	}
	return out
}

// digestFixture is a ledgerctl fixture whose stream the digest handler
// has digested into a locked bucket, signed by the emulator's KMS.
type digestFixture struct {
	*fixture
	s3             *s3.Client
	bucket, keyARN string
	keys           []string
	// handler is the digest function's handler, reading the table's stream
	// back (the emulator's DynamoDB Streams) before it signs; metrics its
	// metrics; digested the sequence numbers of the records it digested.
	handler  *digeststream.Digest
	metrics  *bytes.Buffer
	digested map[string]bool
}

func newDigestFixture(t *testing.T, extra int) *digestFixture {
	t.Helper()
	f := &digestFixture{fixture: newFixture(t)}
	populate(f.fixture)
	for i := 100; i < 100+extra; i++ {
		key := f.claim(i, ledger.Email, ledger.Single)
		f.keys = append(f.keys, key)
		if i%2 == 0 {
			f.dispatch(key, ledgertest.Accept)
		}
	}
	kc := kms.NewFromConfig(f.cfg)
	f.s3 = emulator.S3(f.cfg)
	f.keyARN = emulator.SigningKey(t, kc, "digest-key")
	f.bucket = emulator.LockedBucket(t, f.s3, "digests")
	f.metrics, f.digested = &bytes.Buffer{}, map[string]bool{}
	f.handler = &digeststream.Digest{
		Writer:  &digest.Writer{Store: s3digest.New(f.s3, f.bucket), Signer: kmsdigest.New(kc, f.keyARN), Clock: f.clock.Now, Retention: time.Hour},
		Streams: dynamodbstreams.NewFromConfig(f.cfg), Table: f.table,
		Clock: f.clock.Now, Log: slog.New(slog.DiscardHandler), Metrics: &metrics.Emitter{W: f.metrics},
	}
	if n := len(f.digestNew(40)); n < 3 {
		t.Fatalf("only %d stream batches", n)
	}
	return f
}

// digestNew hands the stream's records the handler has not digested yet to
// it, in batches of at most size, as the event source would; it returns
// the batches it handed.
func (f *digestFixture) digestNew(size int) []events.DynamoDBTimeWindowEvent {
	f.t.Helper()
	var handed []events.DynamoDBTimeWindowEvent
	for _, b := range streamEvents(f.t, f.cfg, f.db, f.table, 100000) {
		var fresh []events.DynamoDBEventRecord
		for _, r := range b.Records {
			if !f.digested[r.Change.SequenceNumber] {
				fresh = append(fresh, r)
			}
		}
		for len(fresh) > 0 {
			// As the deployed event source hands them: no tumbling window, so
			// no shard id (the handler finds the shard from the stream).
			ev := events.DynamoDBTimeWindowEvent{}
			ev.Records = fresh[:min(size, len(fresh))]
			fresh = fresh[len(ev.Records):]
			if _, err := f.handler.Handle(context.Background(), ev); err != nil {
				f.t.Fatalf("a genuine batch: %v", err)
			}
			for _, r := range ev.Records {
				f.digested[r.Change.SequenceNumber] = true
			}
			handed = append(handed, ev)
		}
	}
	return handed
}

func (f *digestFixture) verify(bucket string, extra ...string) (string, string, int) {
	f.t.Helper()
	return f.run(append([]string{"verify", "--all", "--digest-bucket", bucket, "--digest-key", f.keyARN}, extra...)...)
}

// TestVerifyAgainstDigestsOnEmulator: the digest handler digests the
// stream of a ledger with rows of every state into an Object Lock bucket,
// signed by the emulator's KMS (ECC_NIST_P256); verify passes on the
// untouched ledger and fails, naming the row or digest, on each tampering.
func TestVerifyAgainstDigestsOnEmulator(t *testing.T) {
	f := newDigestFixture(t, 150)
	ctx := context.Background()
	out, errOut, code := f.verify(f.bucket)
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "ok: 158 rows") || !strings.Contains(out, "digests verify") || strings.Contains(out, "pending ROW") {
		t.Fatalf("untouched ledger: %s", out)
	}

	victim := f.keys[0] // accepted: three entries
	item := f.rawItem(victim)

	t.Run("entry rewritten, chain recomputed", func(t *testing.T) {
		defer f.putItem(item)
		f.rewriteRecomputed(victim, 1, "operator decision: accepted")
		if out, _, code := f.run("verify", "--all"); code != exitOK {
			t.Fatalf("the rewrite should pass the chain check alone:\n%s", out)
		}
		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitFailure, out, errOut)
		if !strings.Contains(out, "rewritten ROW "+victim+" digest ") {
			t.Fatalf("verify does not name the row:\n%s", out)
		}
	})
	t.Run("row deleted before its retention ends", func(t *testing.T) {
		defer f.putItem(item)
		if _, err := f.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &f.table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: victim}}}); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitFailure, out, errOut)
		if !strings.Contains(out, "deleted ROW "+victim+" digest ") || !strings.Contains(out, "retention") {
			t.Fatalf("verify does not name the row:\n%s", out)
		}
	})

	// The locked bucket refuses overwrites and deletes (s3digest's tests);
	// these cases copy the digests into an unlocked bucket to show verify
	// finds what Object Lock is there to prevent.
	seqs, err := s3digest.New(f.s3, f.bucket).List(ctx)
	if err != nil || len(seqs) < 4 {
		t.Fatalf("digests %v: %v", seqs, err)
	}
	copyTo := func(t *testing.T) (string, *s3digest.Store) { return f.unlockedCopy(t, seqs) }

	t.Run("copy verifies", func(t *testing.T) {
		name, _ := copyTo(t)
		out, errOut, code := f.verify(name)
		wantCode(t, code, exitOK, out, errOut)
	})
	t.Run("digest replaced by one signed with another key", func(t *testing.T) { verifyFindsForgedDigest(t, ctx, f, copyTo) })
	t.Run("digest deleted", func(t *testing.T) {
		name, _ := copyTo(t)
		if _, err := f.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &name, Key: aws.String(digest.ObjectName(3))}); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := f.verify(name)
		wantCode(t, code, exitFailure, out, errOut)
		if !strings.Contains(out, "missing DIGEST 3: ") {
			t.Fatalf("verify does not name digest 3:\n%s", out)
		}
	})
	t.Run("public key from a file", func(t *testing.T) { verifyWithPublicKeyFile(t, ctx, f, seqs) })
	t.Run("a row changed since the last digest is pending, not failed", func(t *testing.T) {
		f.clock.Advance(time.Minute)
		f.claim(999, ledger.Email, ledger.Single)
		f.clock.Advance(2 * time.Minute)
		out, errOut, code := f.verify(f.bucket)
		wantCode(t, code, exitOK, out, errOut)
		if !strings.Contains(out, "pending ROW") || !strings.Contains(out, "1 rows not yet digested (oldest change 2m0s ago)") {
			t.Fatalf("verify output:\n%s", out)
		}
	})
	t.Run("a forged version written over a locked digest", func(t *testing.T) { verifyFindsVersionWrittenOver(t, ctx, f) })
}

// TestForgedRecordIsNotSignedOnEmulator: a made-up MODIFY stream record
// handed to the real digest handler directly (issue 42), naming the ledger
// table's stream on the emulator, becomes no signed digest: the handler
// reads the stream back, finds the record contradicted, counts it in
// ContradictedRecords and fails the batch; no digest is written, and the
// untouched row the record lied about still verifies. Whether the forger
// gives the record a sequence number the stream lacks or a genuine one,
// or names another table's stream. The genuine records written after it
// are still digested, and verify accepts them.
func TestForgedRecordIsNotSignedOnEmulator(t *testing.T) {
	f := newDigestFixture(t, 30)
	ctx := context.Background()
	victim := f.keys[0] // accepted, three entries, untouched
	var genuine events.DynamoDBEventRecord
	for _, b := range streamEvents(t, f.cfg, f.db, f.table, 100000) {
		for _, r := range b.Records {
			if r.Change.Keys["pk"].String() == victim {
				genuine = r // the row's last record
			}
		}
	}
	if genuine.EventName != "MODIFY" {
		t.Fatalf("the victim's last record: %+v", genuine)
	}
	seqs, err := s3digest.New(f.s3, f.bucket).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(seq, arn string) events.DynamoDBTimeWindowEvent { return forged(genuine, seq, arn) }
	other := strings.Replace(genuine.EventSourceArn, "/"+f.table+"/", "/"+f.table+"-other/", 1)
	for _, c := range []struct {
		name string
		ev   events.DynamoDBTimeWindowEvent
	}{
		{"a sequence number the stream lacks", forge(genuine.Change.SequenceNumber+"1", genuine.EventSourceArn)},
		{"the row's genuine sequence number", forge(genuine.Change.SequenceNumber, genuine.EventSourceArn)},
		{"another table's stream", forge(genuine.Change.SequenceNumber, other)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f.metrics.Reset()
			if _, err := f.handler.Handle(ctx, c.ev); !errors.Is(err, digeststream.ErrContradicted) {
				t.Errorf("Handle: %v, want the stream to contradict the record", err)
			}
			if !strings.Contains(f.metrics.String(), `"ContradictedRecords":1`) {
				t.Errorf("metrics: %s", f.metrics.String())
			}
			now, err := s3digest.New(f.s3, f.bucket).List(ctx)
			if err != nil || len(now) != len(seqs) {
				t.Errorf("digests %v, before %v: %v", now, seqs, err)
			}
			out, errOut, code := f.verify(f.bucket)
			wantCode(t, code, exitOK, out, errOut)
			if strings.Contains(out, victim) {
				t.Fatalf("verify names the untouched row:\n%s", out)
			}
		})
	}

	f.genuineStillDigested(len(seqs))
}

// forged is a made-up copy of the stream record genuine (a MODIFY) at
// sequence number seq of stream arn: its newest entry's hash made up, as a
// record of a rewrite would read.
func forged(genuine events.DynamoDBEventRecord, seq, arn string) events.DynamoDBTimeWindowEvent {
	r := genuine
	r.Change.SequenceNumber, r.EventSourceArn = seq, arn
	img := maps.Clone(genuine.Change.NewImage)
	hist := slices.Clone(img["history"].List())
	last := maps.Clone(hist[len(hist)-1].Map())
	last["hash"] = events.NewBinaryAttribute(bytes.Repeat([]byte{0xab}, 32))
	hist[len(hist)-1] = events.NewMapAttribute(last)
	img["history"] = events.NewListAttribute(hist)
	r.Change.NewImage = img
	var ev events.DynamoDBTimeWindowEvent
	ev.Records = []events.DynamoDBEventRecord{r}
	return ev
}

// genuineStillDigested: the genuine records written after a forgery are
// digested (one digest after the before already stored), and verify
// accepts them. Handed again (the event source retrying an invocation that
// stored its digest, or a replay), they are not digested twice.
func (f *digestFixture) genuineStillDigested(before int) {
	t, ctx := f.t, context.Background()
	t.Helper()
	f.clock.Advance(time.Minute)
	key := f.claim(990, ledger.Email, ledger.Single)
	f.dispatch(key, ledgertest.Accept)
	f.metrics.Reset()
	handed := f.digestNew(40)
	if len(handed) != 1 || strings.Contains(f.metrics.String(), "ContradictedRecords") {
		t.Fatalf("%d batches, metrics %s", len(handed), f.metrics.String())
	}
	if _, err := f.handler.Handle(ctx, handed[0]); err != nil {
		t.Fatalf("the batch again: %v", err)
	}
	if now, err := s3digest.New(f.s3, f.bucket).List(ctx); err != nil || len(now) != before+1 {
		t.Fatalf("digests %v, %d before: %v", now, before, err)
	}
	out, errOut, code := f.verify(f.bucket)
	wantCode(t, code, exitOK, out, errOut)
	if strings.Contains(out, "pending ROW") || !strings.Contains(out, "digests verify") {
		t.Fatalf("verify after the genuine records:\n%s", out)
	}
}

// unlockedCopy copies the digests seqs into a new bucket without Object
// Lock, for the cases that tamper with them.
func (f *digestFixture) unlockedCopy(t *testing.T, seqs []uint64) (string, *s3digest.Store) {
	ctx := context.Background()
	name := strings.ToLower(emulator.UniqueName(t, "copy"))
	if _, err := f.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatal(err)
	}
	src, dst := s3digest.New(f.s3, f.bucket), s3digest.New(f.s3, name)
	for _, s := range seqs {
		raw, err := src.Get(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &name, Key: aws.String(digest.ObjectName(s)), Body: bytes.NewReader(raw)}); err != nil {
			t.Fatal(err)
		}
	}
	return name, dst
}

// verifyFindsVersionWrittenOver: Object Lock keeps every version, but a
// PutObject without If-None-Match makes a new current version; verify checks
// the first version and reports the one written over it.
func verifyFindsVersionWrittenOver(t *testing.T, ctx context.Context, f *digestFixture) {
	// Object Lock keeps every version, but a PutObject without
	// If-None-Match makes a new current version. verify checks the
	// first version and reports the one written over it. (This case
	// runs last among those that read f.bucket: the version stays.)
	if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: aws.String(digest.ObjectName(2)), Body: strings.NewReader("{}")}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := f.verify(f.bucket)
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(out, "overwritten DIGEST 2: 1 later versions were written over it") || strings.Contains(out, "signature") || strings.Contains(out, "rewritten ROW") || strings.Contains(out, "truncated ROW") {
		t.Fatalf("verify output:\n%s", out)
	}
}

// verifyFindsForgedDigest: a digest replaced by one signed with another key is
// named.
func verifyFindsForgedDigest(t *testing.T, ctx context.Context, f *digestFixture, copyTo func(*testing.T) (string, *s3digest.Store)) {
	name, _ := copyTo(t)
	raw, _ := s3digest.New(f.s3, f.bucket).Get(ctx, 2)
	_, d, err := digest.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	d.Rows = d.Rows[1:]
	other := kmsdigest.New(kms.NewFromConfig(f.cfg), emulator.SigningKey(t, kms.NewFromConfig(f.cfg), "attacker"))
	forged, _, err := digest.Seal(ctx, other, d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: &name, Key: aws.String(digest.ObjectName(2)), Body: bytes.NewReader(forged)}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := f.verify(name)
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(out, "signature DIGEST 2: signature does not verify") {
		t.Fatalf("verify does not name digest 2:\n%s", out)
	}
}

// verifyWithPublicKeyFile: verify takes the digest key's public key from a
// file, and the digests from a folder as well as from the bucket.
func verifyWithPublicKeyFile(t *testing.T, ctx context.Context, f *digestFixture, seqs []uint64) {
	pub, err := kms.NewFromConfig(f.cfg).GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: &f.keyARN})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "digest-key.der")
	if err := os.WriteFile(path, pub.PublicKey, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := f.run("verify", "--all", "--digest-bucket", f.bucket, "--public-key", path)
	wantCode(t, code, exitOK, out, errOut)
	// Offline: a copy of the digests in a folder.
	dir := digest.DirStore{Dir: t.TempDir()}
	for _, s := range seqs {
		raw, _ := s3digest.New(f.s3, f.bucket).Get(ctx, s)
		if err := dir.Put(ctx, s, raw, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code = f.run("verify", "--all", "--digest-dir", dir.Dir, "--public-key", path)
	wantCode(t, code, exitOK, out, errOut)
	if err := os.Remove(filepath.Join(dir.Dir, "digests", filepath.Base(digest.ObjectName(1)))); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = f.run("verify", "--all", "--digest-dir", dir.Dir, "--public-key", path)
	wantCode(t, code, exitFailure, out, errOut)
	if !strings.Contains(out, "missing DIGEST 1: ") {
		t.Fatalf("verify output:\n%s", out)
	}
}

func (f *digestFixture) rawItem(key string) map[string]types.AttributeValue {
	f.t.Helper()
	out, err := f.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &f.table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
	if err != nil || out.Item == nil {
		f.t.Fatalf("get %s: %v", key, err)
	}
	return out.Item
}

func (f *digestFixture) putItem(item map[string]types.AttributeValue) {
	f.t.Helper()
	if _, err := f.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &f.table, Item: item}); err != nil {
		f.t.Fatal(err)
	}
}

// rewriteRecomputed rewrites the reason of entry i of key's history and
// every hash from it on, directly in DynamoDB, as an insider with write
// access to the table could: the row's own chain still verifies.
func (f *digestFixture) rewriteRecomputed(key string, i int, reason string) {
	f.t.Helper()
	item := f.rawItem(key)
	if err := emulator.RewriteRecomputed(item, f.get(key), i, reason); err != nil {
		f.t.Fatal(err)
	}
	f.putItem(item)
}
