package digest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// chainRig is a digest chain written from hand-made stream records, on a
// clock the test moves: issue 43's findings, each shown in the domain.
type chainRig struct {
	t      *testing.T
	now    time.Time
	store  *digest.MemStore
	signer *digest.LocalSigner
	w      *digest.Writer
	seq    int
}

func newChainRig(t *testing.T) *chainRig {
	r := &chainRig{t: t, now: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), store: digest.NewMemStore(), signer: digest.NewLocalSigner("local:digest")}
	r.w = &digest.Writer{Store: r.store, Signer: r.signer, Clock: func() time.Time { return r.now }}
	return r
}

// rec is a stream record of key made now.
func (r *chainRig) rec(ev, key string, old, new *digest.Image) digest.Record {
	r.seq++
	rec := digest.Record{Shard: "s1", Seq: fmt.Sprintf("%021d", r.seq), Event: ev, At: r.now, Key: key, Old: old, New: new}
	if ev == digest.Remove {
		rec.Removal = digest.RemovedDelete
	}
	return rec
}

// write digests recs (one digest) and moves the clock on by 5 minutes.
func (r *chainRig) write(recs ...digest.Record) digest.Digest {
	r.t.Helper()
	d, err := r.w.Write(context.Background(), digest.Collect(recs, r.now))
	if err != nil {
		r.t.Fatal(err)
	}
	r.now = r.now.Add(5 * time.Minute)
	return d
}

// load checks the chain at now.
func (r *chainRig) load() *digest.Chain {
	r.t.Helper()
	c, err := digest.LoadWith(context.Background(), r.store, r.signer.Verifier(), digest.Options{Now: r.now})
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// seal stores d, signed with the digest key: what only the key's holder
// can do.
func (r *chainRig) seal(d digest.Digest) {
	r.t.Helper()
	raw, _, err := digest.Seal(context.Background(), r.signer, d)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.store.Put(context.Background(), d.Seq, raw, time.Time{}); err != nil {
		r.t.Fatal(err)
	}
}

func imgAt(until time.Time, hashes ...string) *digest.Image {
	return &digest.Image{Hashes: hashes, RetainUntil: until}
}

// findings returns the codes of fs that name key ("" for any), in order.
func findCodes(fs []digest.Finding, key string) []string {
	var out []string
	for _, f := range fs {
		if key == "" || f.Key == key {
			out = append(out, f.Code)
		}
	}
	return out
}

func hasCode(fs []digest.Finding, code string) bool { return slices.Contains(findCodes(fs, ""), code) }

// TestRetentionJudgedByItsHighest: issue 43's shortening inside a row's
// first digest window (an INSERT 400 days out, the TTL removed, then set
// in the past, in one batch) is a retention gap and the row's removal is
// deleted; a removal is judged by its earliest record, so a later removal
// record dated after the retention does not clear it. It is long because
// it is one chain written in steps, each step checked as it is written.
func TestRetentionJudgedByItsHighest(t *testing.T) {
	t.Run("shortened within one batch, INSERT included", func(t *testing.T) {
		r := newChainRig(t)
		far, past := r.now.Add(400*24*time.Hour), r.now.Add(-time.Hour)
		d := r.write(
			r.rec(digest.Insert, "k", nil, imgAt(far, "a")),
			r.rec(digest.Modify, "k", imgAt(far, "a"), imgAt(time.Time{}, "a", "b")),
			r.rec(digest.Modify, "k", imgAt(time.Time{}, "a", "b"), imgAt(past, "a", "b", "c")),
		)
		if gapKinds(digest.Batch{Gaps: d.Gaps})[digest.GapRetention] != 1 {
			t.Fatalf("gaps %v", d.Gaps)
		}
		if d.Rows[0].RetainUntil != 0 {
			t.Fatalf("the row records retain_until %d, want 0 (the highest: none, kept forever)", d.Rows[0].RetainUntil)
		}
		ttl := r.rec(digest.Remove, "k", imgAt(past, "a", "b", "c"), nil)
		ttl.Removal = digest.RemovedTTL
		r.write(ttl)
		c := r.load()
		got := append(c.Findings, c.Missing(r.now)...)
		// The removal record holds the shortened retention too.
		if !slices.Equal(findCodes(got, "k"), []string{digest.CodeGap, digest.CodeShortened, digest.CodeDeleted}) {
			t.Fatalf("findings %v", got)
		}
	})
	t.Run("shortened in the next batch: the old image is the INSERT's", func(t *testing.T) {
		r := newChainRig(t)
		far, soon := r.now.Add(400*24*time.Hour), r.now.Add(48*time.Hour)
		r.write(r.rec(digest.Insert, "k", nil, imgAt(far, "a")))
		d := r.write(r.rec(digest.Modify, "k", imgAt(far, "a"), imgAt(soon, "a", "b")))
		if d.Rows[0].RetainUntil != far.Unix() {
			t.Fatalf("the row records %d, not the highest", d.Rows[0].RetainUntil)
		}
		c := r.load()
		if !slices.Equal(findCodes(c.Findings, "k"), []string{digest.CodeGap}) {
			t.Fatalf("findings %v", c.Findings)
		}
	})
	t.Run("shortened across digests", func(t *testing.T) {
		// What a verifier checks whatever the writer saw: a later record
		// below the highest before it.
		r := newChainRig(t)
		far, soon := r.now.Add(400*24*time.Hour), r.now.Add(48*time.Hour)
		d1 := r.write(r.rec(digest.Insert, "k", nil, imgAt(far, "a")))
		body, _ := d1.Body()
		r.seal(digest.Digest{Seq: 2, Prev: digest.Hash(body), At: r.now, Rows: []digest.Row{{Key: "k", From: 1, Count: 2, Head: "b", RetainUntil: soon.Unix()}}})
		c := r.load()
		if !slices.Equal(findCodes(c.Findings, "k"), []string{digest.CodeShortened}) {
			t.Fatalf("findings %v", c.Findings)
		}
	})
	t.Run("a removal is judged by its earliest record", func(t *testing.T) {
		r := newChainRig(t)
		far := r.now.Add(400 * 24 * time.Hour)
		r.write(r.rec(digest.Insert, "k", nil, imgAt(far, "a")))
		r.write(r.rec(digest.Remove, "k", imgAt(far, "a"), nil))
		// The key's holder appends a record of the row removed by the TTL,
		// dated after its retention.
		newest, _ := digest.Latest(context.Background(), r.store, 0)
		raw, _ := r.store.Get(context.Background(), newest)
		o, _, _ := digest.Parse(raw)
		r.seal(digest.Digest{Seq: newest + 1, Prev: digest.Hash([]byte(o.Body)), At: far.Add(48 * time.Hour),
			Rows: []digest.Row{{Key: "k", From: 1, Count: 1, Head: "a", RetainUntil: far.Unix(), Removed: digest.RemovedTTL}}})
		r.now = far.Add(49 * time.Hour)
		c := r.load()
		got := append(c.Findings, c.Missing(r.now)...)
		if !slices.Contains(findCodes(got, "k"), digest.CodeDeleted) || !slices.Contains(findCodes(got, "k"), digest.CodeLost) {
			t.Fatalf("findings %v", got)
		}
	})
	t.Run("written again after its removal in one batch: a gap, and the new row recorded", func(t *testing.T) {
		r := newChainRig(t)
		far := r.now.Add(400 * 24 * time.Hour)
		d := r.write(
			r.rec(digest.Insert, "k", nil, imgAt(far, "a")),
			r.rec(digest.Remove, "k", imgAt(far, "a"), nil),
			r.rec(digest.Insert, "k", nil, imgAt(r.now.Add(48*time.Hour), "x")),
		)
		// One gap, the removal's: the new row's retention is its own, not
		// shortened from the removed row's.
		if len(d.Gaps) != 1 || d.Gaps[0].Kind != digest.GapCount || !strings.Contains(d.Gaps[0].Detail, "after its removal") || len(d.Rows) != 1 {
			t.Fatalf("gaps %v rows %v", d.Gaps, d.Rows)
		}
		if row := d.Rows[0]; row.From != 0 || row.Count != 1 || row.Head != "x" || row.Removed != "" {
			t.Fatalf("row %+v", row)
		}
	})
	t.Run("a row written again after its lawful removal is a new row", func(t *testing.T) {
		r := newChainRig(t)
		soon := r.now.Add(time.Hour)
		r.write(r.rec(digest.Insert, "k", nil, imgAt(soon, "a")))
		r.now = soon.Add(digest.RetentionSlack)
		ttl := r.rec(digest.Remove, "k", imgAt(soon, "a"), nil)
		ttl.Removal = digest.RemovedTTL
		r.write(ttl)
		c := r.load()
		// Written again, not yet digested: pending, not reappeared.
		if got := c.CheckHashes("k", []string{"x"}, r.now, r.now); !slices.Equal(findCodes(got, ""), []string{digest.CodePending}) {
			t.Fatalf("new row before its digest: %v", got)
		}
		// The removed row itself back in the table: reappeared.
		if got := c.CheckHashes("k", []string{"a"}, r.now, r.now); !slices.Equal(findCodes(got, ""), []string{digest.CodeReappeared}) {
			t.Fatalf("the removed row back: %v", got)
		}
		r.write(r.rec(digest.Insert, "k", nil, imgAt(r.now.Add(400*24*time.Hour), "x")))
		c = r.load()
		if got := append(c.Findings, c.CheckHashes("k", []string{"x"}, r.now, r.now)...); len(got) != 0 {
			t.Fatalf("new row after its digest: %v", got)
		}
	})
}

// TestTimeIsChecked: a digest's at may not decrease along the chain nor
// lie ahead of the verifier's clock; the newest digest may not be older
// than the stale bound, nor a row pending longer.
func TestTimeIsChecked(t *testing.T) {
	r := newChainRig(t)
	r.write(r.rec(digest.Insert, "k", nil, imgAt(r.now.Add(time.Hour), "a")))
	r.write(r.rec(digest.Modify, "k", imgAt(r.now.Add(time.Hour), "a"), imgAt(r.now.Add(time.Hour), "a", "b")))
	if c := r.load(); len(c.Findings) != 0 || c.Newest != 2 {
		t.Fatalf("clean chain: %v", c.Findings)
	}
	t.Run("the writer never sets at back", func(t *testing.T) {
		r := newChainRig(t)
		first := r.write()
		r.now = r.now.Add(-time.Hour) // a writer whose clock is behind
		if d := r.write(); !d.At.Equal(first.At) {
			t.Fatalf("at %v", d.At)
		}
	})
	t.Run("at-decreased", func(t *testing.T) {
		rr := *r
		rr.store = digest.NewMemStore()
		for seq := uint64(1); seq <= 2; seq++ {
			raw, _ := r.store.Get(context.Background(), seq)
			_ = rr.store.Put(context.Background(), seq, raw, time.Time{})
		}
		raw, _ := r.store.Get(context.Background(), 2)
		o, d2, _ := digest.Parse(raw)
		rr.seal(digest.Digest{Seq: 3, Prev: digest.Hash([]byte(o.Body)), At: d2.At.Add(-time.Second)})
		c := rr.load()
		if !slices.Equal(findCodes(c.Findings, ""), []string{digest.CodeAtDecreased}) || c.Findings[0].Seq != 3 {
			t.Fatalf("findings %v", c.Findings)
		}
	})
	t.Run("at-future", func(t *testing.T) {
		c, err := digest.LoadWith(context.Background(), r.store, r.signer.Verifier(), digest.Options{Now: r.now.Add(-10*time.Minute - digest.DefaultSkew)})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(findCodes(c.Findings, ""), []string{digest.CodeAtFuture}) || c.Findings[0].Seq != 2 {
			t.Fatalf("findings %v", c.Findings)
		}
	})
	t.Run("stale", func(t *testing.T) {
		bound := digest.StaleAfter(digest.DefaultInterval)
		if bound != 15*time.Minute || digest.StaleAfter(5*time.Second) != 7*time.Minute || digest.StaleAfter(90*time.Second) != 9*time.Minute {
			t.Fatalf("the bounds are %s, %s, %s", bound, digest.StaleAfter(5*time.Second), digest.StaleAfter(90*time.Second))
		}
		at := r.now.Add(-5 * time.Minute) // digest 2's at
		for _, tc := range []struct {
			age  time.Duration
			want []string
		}{{bound, nil}, {bound + time.Second, []string{digest.CodeStale}}} {
			c, err := digest.LoadWith(context.Background(), r.store, r.signer.Verifier(), digest.Options{Now: at.Add(tc.age)})
			if err != nil {
				t.Fatal(err)
			}
			if got := findCodes(c.Findings, ""); !slices.Equal(got, tc.want) {
				t.Fatalf("newest %s old: findings %v", tc.age, c.Findings)
			}
		}
	})
	t.Run("pending-too-long", func(t *testing.T) {
		c := r.load()
		last := r.now.Add(-20 * time.Minute)
		got := c.CheckHashes("k", []string{"a", "b", "c"}, last, last.Add(digest.StaleAfter(0)))
		if !slices.Equal(findCodes(got, ""), []string{digest.CodePending}) || got[0].Fail {
			t.Fatalf("pending within the bound: %v", got)
		}
		got = c.CheckHashes("k", []string{"a", "b", "c"}, last, last.Add(digest.StaleAfter(0)+time.Second))
		if !slices.Equal(findCodes(got, ""), []string{digest.CodePendingTooLong}) || !got[0].Fail {
			t.Fatalf("pending past the bound: %v", got)
		}
	})
}

// TestDigestShapeFindings: a digest of another format, a key twice, a row
// record with no entries, an object that is not a digest name and a delete
// marker over a digest each have their own code.
func TestDigestShapeFindings(t *testing.T) {
	r := newChainRig(t)
	r.write(r.rec(digest.Insert, "k", nil, imgAt(r.now.Add(time.Hour), "a")))
	raw1, _ := r.store.Get(context.Background(), 1)
	o1, _, _ := digest.Parse(raw1)
	prev := digest.Hash([]byte(o1.Body))
	cases := []struct {
		name   string
		tamper func(s *digest.MemStore)
		want   []string
	}{
		{"a key twice", func(s *digest.MemStore) {
			// Body sorts rows but keeps both.
			d := digest.Digest{Seq: 2, Prev: prev, At: r.now, Rows: []digest.Row{{Key: "k", From: 1, Count: 2, Head: "b"}, {Key: "k", From: 2, Count: 3, Head: "c"}}}
			raw, _, _ := digest.Seal(context.Background(), r.signer, d)
			_ = s.Put(context.Background(), 2, raw, time.Time{})
		}, []string{digest.CodeDuplicate}},
		{"a row record with no entries", func(s *digest.MemStore) {
			raw, _, _ := digest.Seal(context.Background(), r.signer, digest.Digest{Seq: 2, Prev: prev, At: r.now, Rows: []digest.Row{{Key: "k", From: 0, Count: 0}}})
			_ = s.Put(context.Background(), 2, raw, time.Time{})
		}, []string{digest.CodeMalformed}},
		{"another algorithm", func(s *digest.MemStore) {
			raw, _, _ := digest.Seal(context.Background(), r.signer, digest.Digest{Seq: 2, Prev: prev, At: r.now})
			_ = s.Put(context.Background(), 2, []byte(replaceOnce(string(raw), digest.Algorithm, "ECDSA_SHA_384")), time.Time{})
		}, []string{digest.CodeFormat}},
		{"a foreign object", func(s *digest.MemStore) { s.AddForeign("digests/2.json") }, []string{digest.CodeForeign}},
		{"a delete marker", func(s *digest.MemStore) { s.MarkDeleted(1) }, []string{digest.CodeDeleteMarker}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := digest.NewMemStore()
			_ = s.Put(context.Background(), 1, raw1, time.Time{})
			tc.tamper(s)
			c, err := digest.LoadWith(context.Background(), s, r.signer.Verifier(), digest.Options{Now: r.now})
			if err != nil {
				t.Fatal(err)
			}
			if got := findCodes(c.Findings, ""); !slices.Equal(got, tc.want) {
				t.Fatalf("findings %v", c.Findings)
			}
			for _, f := range c.Findings {
				if f.String()[:len(f.Code)+1] != f.Code+" " {
					t.Errorf("line does not start with its code: %q", f.String())
				}
			}
		})
	}
}

func replaceOnce(s, old, new string) string { return strings.Replace(s, old, new, 1) }

// TestHeartbeat: on a quiet table a tick writes a digest of no rows,
// chained to the newest, once the newest is older than the bound; a tick
// while the newest is fresh writes nothing; ticks racing each other and a
// stream batch leave one chain with one heartbeat.
func TestHeartbeat(t *testing.T) {
	r := newChainRig(t)
	r.write(r.rec(digest.Insert, "k", nil, imgAt(r.now.Add(time.Hour), "a")))
	if _, err := r.w.Heartbeat(context.Background(), 5*time.Minute); !errors.Is(err, digest.ErrFresh) {
		t.Fatalf("a tick 5m after a digest: %v", err)
	}
	r.now = r.now.Add(time.Second)
	d, err := r.w.Heartbeat(context.Background(), 5*time.Minute)
	if err != nil || d.Seq != 2 || len(d.Rows) != 0 || len(d.Positions) != 0 || !d.At.Equal(r.now) {
		t.Fatalf("heartbeat %+v: %v", d, err)
	}
	// A stale chain after a quiet hour, unless the ticks ran.
	r.now = r.now.Add(time.Hour)
	if c := r.load(); !hasCode(c.Findings, digest.CodeStale) {
		t.Fatalf("no tick for an hour: %v", c.Findings)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &digest.Writer{Store: r.store, Signer: r.signer, Clock: func() time.Time { return r.now }}
			if i == 0 {
				_, errs[i] = w.Write(context.Background(), digest.Collect([]digest.Record{{Shard: "s1", Seq: "900", Event: digest.Modify, At: r.now, Key: "k",
					Old: imgAt(r.now, "a"), New: imgAt(r.now, "a", "b")}}, r.now))
				return
			}
			_, errs[i] = w.Heartbeat(context.Background(), 5*time.Minute)
		}()
	}
	wg.Wait()
	heartbeats := 0
	for i, err := range errs {
		switch {
		case err == nil && i > 0:
			heartbeats++
		case err != nil && !(i > 0 && errors.Is(err, digest.ErrFresh)):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	c := r.load()
	if len(c.Findings) != 0 || c.Digests != 3+heartbeats || heartbeats > 1 {
		t.Fatalf("after the race: %d digests, %d heartbeats, findings %v", c.Digests, heartbeats, c.Findings)
	}
}

// TestRetentionShortenedInStepsAcrossDigests: a TTL moved earlier in two
// steps, each within the slack and recorded in a different digest (each
// digest holds its batch's highest, so the second step's value reaches
// none), is shortened when the table's row is checked.
func TestRetentionShortenedInStepsAcrossDigests(t *testing.T) {
	r := newChainRig(t)
	r0 := r.now.Add(400 * 24 * time.Hour).Truncate(time.Second)
	step := digest.RetentionSlack - time.Hour
	r1, r2 := r0.Add(-step), r0.Add(-2*step)
	r.write(r.rec(digest.Insert, "k", nil, imgAt(r0, "h0")))
	r.write(r.rec(digest.Modify, "k", imgAt(r0, "h0"), imgAt(r1, "h0", "h1")))
	r.write(r.rec(digest.Modify, "k", imgAt(r1, "h0", "h1"), imgAt(r2, "h0", "h1", "h2")))
	c := r.load()
	if hasCode(c.Findings, digest.CodeShortened) || hasCode(c.Findings, digest.CodeGap) {
		t.Fatalf("each step is within the slack: %v", findCodes(c.Findings, ""))
	}
	row := ledgerRow("k", r2, "h0", "h1", "h2")
	if got := findCodes(c.CheckRow(row, r.now), "k"); !slices.Contains(got, digest.CodeShortened) {
		t.Fatalf("the table's row holds a retention %s earlier than recorded: findings %v, want shortened", 2*step, got)
	}
	if got := findCodes(c.CheckRow(ledgerRow("k", r0, "h0", "h1", "h2"), r.now), "k"); slices.Contains(got, digest.CodeShortened) {
		t.Fatalf("a row at its recorded retention: %v", got)
	}
}

// ledgerRow is the table's row key, retained until until, whose history
// entries have the given hashes.
func ledgerRow(key string, until time.Time, hashes ...string) ledger.Entry {
	e := ledger.Entry{Key: key, RetainUntil: until}
	for _, h := range hashes {
		e.History = append(e.History, ledger.Event{Hash: h})
	}
	return e
}
