package digest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/digest"
)

func img(hashes ...string) *digest.Image {
	return &digest.Image{Hashes: hashes, RetainUntil: time.Unix(2_000_000_000, 0)}
}

// gapKinds counts the batch's gaps by kind.
func gapKinds(b digest.Batch) map[string]int {
	m := map[string]int{}
	for _, g := range b.Gaps {
		m[g.Kind]++
	}
	return m
}

func TestCollect(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	rec := func(seq, ev, key string, old, new *digest.Image) digest.Record {
		return digest.Record{Shard: "s1", Seq: seq, Event: ev, At: now.Add(-time.Minute), Key: key, Old: old, New: new}
	}
	t.Run("contiguous records: one row per key, no gap", func(t *testing.T) {
		b := digest.Collect([]digest.Record{
			rec("100", digest.Insert, "k1", nil, img("a")),
			rec("200", digest.Modify, "k1", img("a"), img("a", "b")),
			rec("300", digest.Insert, "k2", nil, img("x")),
			rec("400", digest.Modify, "k1", img("a", "b"), img("a", "b", "c")),
		}, now)
		if len(b.Gaps) != 0 || len(b.Rows) != 2 {
			t.Fatalf("gaps %v rows %v", b.Gaps, b.Rows)
		}
		if r := b.Rows[0]; r.Key != "k1" || r.From != 0 || r.Count != 3 || r.Head != "c" {
			t.Errorf("k1 = %+v", r)
		}
		if p := b.Positions; len(p) != 1 || p[0].First != "100" || p[0].Last != "400" {
			t.Errorf("positions %v", p)
		}
	})
	t.Run("a record missing between two is a count gap", func(t *testing.T) {
		b := digest.Collect([]digest.Record{
			rec("100", digest.Insert, "k1", nil, img("a")),
			rec("300", digest.Modify, "k1", img("a", "b"), img("a", "b", "c")),
		}, now)
		if gapKinds(b)[digest.GapCount] != 1 {
			t.Fatalf("gaps %v", b.Gaps)
		}
	})
	t.Run("an entry changed between old and new image is a gap", func(t *testing.T) {
		b := digest.Collect([]digest.Record{rec("100", digest.Modify, "k1", img("a", "b"), img("a", "B", "c"))}, now)
		if gapKinds(b)[digest.GapCount] != 1 {
			t.Fatalf("gaps %v", b.Gaps)
		}
	})
	t.Run("a write that moves the retention earlier is a gap", func(t *testing.T) {
		short := img("a", "b")
		short.RetainUntil = short.RetainUntil.Add(-48 * time.Hour)
		b := digest.Collect([]digest.Record{rec("100", digest.Modify, "k1", img("a", "b"), short)}, now)
		if gapKinds(b)[digest.GapRetention] != 1 {
			t.Fatalf("gaps %v", b.Gaps)
		}
		// A worker whose clock is behind sets it a little earlier: not a gap.
		skewed := img("a", "b", "c")
		skewed.RetainUntil = skewed.RetainUntil.Add(-time.Second)
		if b := digest.Collect([]digest.Record{rec("100", digest.Modify, "k1", img("a", "b"), skewed)}, now); len(b.Gaps) != 0 {
			t.Fatalf("clock skew is a gap: %v", b.Gaps)
		}
	})
	t.Run("a record older than the stream's retention is an age gap", func(t *testing.T) {
		r := rec("100", digest.Insert, "k1", nil, img("a"))
		r.At = now.Add(-25 * time.Hour)
		if b := digest.Collect([]digest.Record{r}, now); gapKinds(b)[digest.GapAge] != 1 {
			t.Fatalf("gaps %v", b.Gaps)
		}
	})
	t.Run("an unreadable record is a gap, never skipped", func(t *testing.T) {
		r := rec("100", digest.Insert, "k1", nil, nil)
		r.Unreadable = "image does not decode"
		if b := digest.Collect([]digest.Record{r}, now); gapKinds(b)[digest.GapUnreadable] != 1 {
			t.Fatalf("gaps %v", b.Gaps)
		}
	})
	t.Run("removals keep the last count and head and who removed", func(t *testing.T) {
		ttl := rec("100", digest.Remove, "k1", img("a", "b"), nil)
		ttl.Removal = digest.RemovedTTL
		del := rec("200", digest.Remove, "k2", img("x"), nil)
		del.Removal = digest.RemovedDelete
		b := digest.Collect([]digest.Record{ttl, del}, now)
		if r := b.Rows[0]; r.Removed != digest.RemovedTTL || r.Count != 2 || r.Head != "b" || r.From != 2 {
			t.Errorf("ttl row %+v", r)
		}
		if r := b.Rows[1]; r.Removed != digest.RemovedDelete || r.Count != 1 {
			t.Errorf("deleted row %+v", r)
		}
	})
}

// TestWritersRace: writers for several shards at once still make one
// chain numbered without a hole, every digest stored exactly once.
func TestWritersRace(t *testing.T) {
	store := digest.NewMemStore()
	signer := digest.NewLocalSigner("local:digest")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := &digest.Writer{Store: store, Signer: signer, Clock: time.Now, Retention: time.Hour, MaxRaces: 100}
			for i := range 10 {
				b := digest.Batch{Rows: []digest.Row{{Key: string(rune('a'+w)) + string(rune('a'+i)), Count: 1, Head: "h"}}}
				if _, err := wr.Write(context.Background(), b); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	c, err := digest.Load(context.Background(), store, signer.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if c.Digests != 40 || c.Last != 40 || len(c.Findings) != 0 || store.Puts != 40 {
		t.Fatalf("digests %d last %d puts %d findings %v", c.Digests, c.Last, store.Puts, c.Findings)
	}
}

func TestLatest(t *testing.T) {
	store := digest.NewMemStore()
	for n := uint64(0); n <= 70; n++ {
		if n > 0 {
			_ = store.Put(context.Background(), n, []byte("x"), time.Time{})
		}
		for _, hint := range []uint64{0, n / 2, n} {
			if got, _ := digest.Latest(context.Background(), store, hint); got != n {
				t.Fatalf("Latest with %d stored, hint %d = %d", n, hint, got)
			}
		}
	}
}

// TestWriterDigestsABatchOnce: a batch whose stream ranges the newest
// digest covers already (the event source retrying an invocation that
// stored its digest, or the same records handed again) is not digested
// again, whether the writer wrote the newest digest itself or another
// writer (a cold start) finds it in the store; the next batch is. A
// second digest of the same records would read as records lost.
func TestWriterDigestsABatchOnce(t *testing.T) {
	ctx := context.Background()
	store := digest.NewMemStore()
	signer := digest.NewLocalSigner("local:digest")
	recs := []digest.Record{
		{Shard: "s1", Seq: "100", Event: digest.Insert, Key: "k", New: &digest.Image{Hashes: []string{"a"}}},
		{Shard: "s1", Seq: "200", Event: digest.Modify, Key: "k", Old: &digest.Image{Hashes: []string{"a"}}, New: &digest.Image{Hashes: []string{"a", "b"}}},
		{Shard: "s1", Seq: "300", Event: digest.Modify, Key: "k", Old: &digest.Image{Hashes: []string{"a", "b"}}, New: &digest.Image{Hashes: []string{"a", "b", "c"}}},
	}
	first, next := digest.Collect(recs[:2], time.Now()), digest.Collect(recs[2:], time.Now())
	w := &digest.Writer{Store: store, Signer: signer, Clock: time.Now, Retention: time.Hour}
	if _, err := w.Write(ctx, first); err != nil {
		t.Fatal(err)
	}
	for _, wr := range []*digest.Writer{w, {Store: store, Signer: signer, Clock: time.Now, Retention: time.Hour}} {
		if _, err := wr.Write(ctx, first); !errors.Is(err, digest.ErrDigested) || store.Puts != 1 {
			t.Fatalf("the same batch again: %v, %d digests", err, store.Puts)
		}
	}
	if _, err := w.Write(ctx, next); err != nil || store.Puts != 2 {
		t.Fatalf("the next batch: %v, %d digests", err, store.Puts)
	}
	c, err := digest.Load(ctx, store, signer.Verifier())
	if err != nil || len(c.Findings) != 0 {
		t.Fatalf("findings %v: %v", c.Findings, err)
	}
}
