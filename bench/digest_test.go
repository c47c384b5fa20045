package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The digest's cost is counted, not timed against AWS: the digest writer
// makes the same S3 and KMS calls whatever answers them, so an in-memory
// store and an in-process P-256 key, wrapped in counters, give the calls
// per message and per interval exactly.

// countedDigests counts the S3 requests each Store method stands for.
type countedDigests struct {
	digest.Store
	mu                    sync.Mutex
	puts, gets, heads     int
	bytes, largest, count int
}

func (c *countedDigests) Put(ctx context.Context, seq uint64, raw []byte, until time.Time) error {
	c.mu.Lock()
	c.puts++
	c.bytes += len(raw)
	c.largest = max(c.largest, len(raw))
	c.count++
	c.mu.Unlock()
	return c.Store.Put(ctx, seq, raw, until)
}

func (c *countedDigests) Get(ctx context.Context, seq uint64) ([]byte, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Store.Get(ctx, seq)
}

func (c *countedDigests) Exists(ctx context.Context, seq uint64) (bool, error) {
	c.mu.Lock()
	c.heads++
	c.mu.Unlock()
	return c.Store.Exists(ctx, seq)
}

type countedSigner struct {
	digest.Signer
	signs int
}

func (c *countedSigner) Sign(ctx context.Context, sum []byte) ([]byte, error) {
	c.signs++
	return c.Signer.Sign(ctx, sum)
}

// recordingStore is a ledger store whose writes become stream records.
type recordingStore struct {
	ledger.Store
	last    map[string]ledger.Entry
	records []digest.Record
	seq     int
}

func (s *recordingStore) emit(e ledger.Entry) {
	old, had := s.last[e.Key]
	if had && old.Version == e.Version {
		return
	}
	s.seq++
	r := digest.Record{Shard: "shard-1", Seq: fmt.Sprintf("%021d", s.seq), At: e.UpdatedAt, Key: e.Key, Event: digest.Insert, New: digest.ImageOf(e)}
	if had {
		r.Event, r.Old = digest.Modify, digest.ImageOf(old)
	}
	s.last[e.Key] = e
	s.records = append(s.records, r)
}

func (s *recordingStore) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	got, err := s.Store.Create(ctx, e)
	if err == nil {
		s.emit(got)
	}
	return got, err
}

func (s *recordingStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if err == nil {
		s.emit(got)
	}
	return got, err
}

// digestBatchSize is the deployed stream event source's batch size
// (infra/digest.go: DynamoDB Streams' largest), so records per invocation and
// per digest at most.
const digestBatchSize = 10000

type digestRun struct {
	messages, intervals, records, digests int
	store                                 *countedDigests
	signer                                *countedSigner
}

// runDigests sends perInterval accepted messages in each of intervals
// intervals and digests each interval's records in batches of at most
// digestBatchSize, as one shard's event source would.
func runDigests(t testing.TB, perInterval, intervals int) digestRun {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	rs := &recordingStore{Store: &memstore.Store{}, last: map[string]ledger.Entry{}}
	cases := &ledgertest.UseCases{Ports: assemble.Ports{
		Store: rs, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: &ledgertest.Transport{}},
		Clock:      clock.Now, Policy: ledger.DefaultPolicy(),
	}}
	run := digestRun{intervals: intervals, store: &countedDigests{Store: digest.NewMemStore()},
		signer: &countedSigner{Signer: digest.NewLocalSigner("local:bench")}}
	w := &digest.Writer{Store: run.store, Signer: run.signer, Clock: clock.Now, Retention: cases.Policy.Retention}
	n := 0
	for range intervals {
		for range perInterval {
			in, sealed := ledgertest.Intent(n, ledger.Email, clock.Now(), time.Hour)
			res, err := cases.Claim(ctx, in, sealed, "claim/bench")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cases.Dispatch(ctx, res.Entry.Key, "dispatch/bench"); err != nil {
				t.Fatal(err)
			}
			n++
		}
		clock.Advance(5 * time.Minute)
		recs := rs.records
		rs.records = nil
		run.records += len(recs)
		for len(recs) > 0 {
			b := recs[:min(len(recs), digestBatchSize)]
			recs = recs[len(b):]
			if _, err := w.Write(ctx, digest.Collect(b, clock.Now())); err != nil {
				t.Fatal(err)
			}
			run.digests++
		}
	}
	run.messages = n
	return run
}

func digestReport(t *testing.T, rep *Report, sc scale) {
	quiet, busy, intervals := sc.digestQuiet, sc.digestBusy, sc.digestIntervals
	var notes []string
	var measured []string
	var perMsg string
	for _, per := range []int{quiet, busy} {
		r := runDigests(t, per, intervals)
		s := r.store
		measured = append(measured, fmt.Sprintf("%d msgs/interval: %.2f digests, %.2f KMS Sign, %.2f S3 PUT, %.2f GET, %.2f HEAD per interval",
			per, float64(r.digests)/float64(intervals), float64(r.signer.signs)/float64(intervals),
			float64(s.puts)/float64(intervals), float64(s.gets)/float64(intervals), float64(s.heads)/float64(intervals)))
		notes = append(notes, fmt.Sprintf("%d messages per interval over %d intervals: %d stream records (%.2f per message), %d digests, %d KMS Sign, %d S3 PutObject, %d GetObject, %d HeadObject; digest objects %d B on average, largest %d B (%.0f B per row)",
			per, intervals, r.records, float64(r.records)/float64(r.messages), r.digests, r.signer.signs, s.puts, s.gets, s.heads,
			s.bytes/max(1, s.count), s.largest, float64(s.bytes)/float64(r.messages)))
		if per == busy {
			perMsg = fmt.Sprintf("%.4f KMS Sign, %.4f S3 PUT, %.2f stream records per message at %d msgs/interval", float64(r.signer.signs)/float64(r.messages), float64(s.puts)/float64(r.messages), float64(r.records)/float64(r.messages), per)
		}
	}
	rep.Add(Figure{
		Name: fmt.Sprintf("Digest cost per interval (one stream shard, batch size %d)", digestBatchSize), Measured: measured[0] + "; " + measured[1],
		Target: "1 KMS Sign and 1 S3 PUT per digest", Verdict: NoTarget,
		Note: "The digest writer's calls, counted on an in-memory store and an in-process key (the same calls it makes to S3 and KMS): claim + dispatch (accepted) through the ledger's use cases, every write a stream record, each interval's records digested in batches of at most " + fmt.Sprint(digestBatchSize) + " records, as one shard's event source with a 5-minute batching window delivers them. " +
			"Per digest: 1 KMS Sign (MessageType DIGEST, so the body's size does not matter), 1 conditional PutObject, 1 GetObject of the previous digest for its hash (none when this writer wrote it: a warm function on a shard with the chain to itself), and HeadObject probes to find the newest: 1 when the writer's last number is still the newest (a warm function; also the first digest ever), about 2·log2(N) on a cold start with N digests stored. " +
			"A shard adds a digest per interval when it has records; an interval without records costs one empty digest per tick period (the heartbeat). Another shard's writer that takes the next number first costs the loser one failed PutObject (412) and one more Sign. " +
			"Stream reads: Lambda's poller reads the stream (GetRecords) at no request charge to the account; the function runs once per batch. " + fmt.Sprint(notes),
	})
	rep.Add(Figure{
		Name: "Digest cost per message", Measured: perMsg,
		Target: "— (reported)", Verdict: NoTarget,
		Note: "An accepted message is 3 ledger writes, so 3 stream records and one digest row (its count and head after the last write of the interval). The KMS and S3 calls are per digest, so per message they fall with traffic: at 10 messages per interval one Sign and one PUT cover 10 messages, at 5,000 they cover about 3,333 (15,000 records in 2 batches). Each digest row is about 200 B of S3 storage, kept for the retention. " + fmt.Sprint(notes),
	})
}

// BenchmarkDigestBatch is the digest writer's in-process cost per batch of
// 300 stream records (100 accepted messages), signing with an in-process key:
// collecting, canonical JSON, SHA-256 and ECDSA. It leaves out decoding the
// stream images and the calls' network time.
func BenchmarkDigestBatch(b *testing.B) {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	rs := &recordingStore{Store: &memstore.Store{}, last: map[string]ledger.Entry{}}
	cases := &ledgertest.UseCases{Ports: assemble.Ports{Store: rs, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: &ledgertest.Transport{}}, Clock: clock.Now, Policy: ledger.DefaultPolicy()}}
	for i := range 100 {
		in, sealed := ledgertest.Intent(i, ledger.Email, clock.Now(), time.Hour)
		res, _ := cases.Claim(ctx, in, sealed, "claim/bench")
		_, _ = cases.Dispatch(ctx, res.Entry.Key, "dispatch/bench")
	}
	recs := rs.records
	w := &digest.Writer{Store: digest.NewMemStore(), Signer: digest.NewLocalSigner("local:bench"), Clock: clock.Now}
	b.ResetTimer()
	for b.Loop() {
		if _, err := w.Write(ctx, digest.Collect(recs, clock.Now())); err != nil {
			b.Fatal(err)
		}
	}
}
