package digest_test

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

// streamed wraps a ledger.Store and emits one stream record per write that
// landed, with the old and new images, as DynamoDB Streams would.
type streamed struct {
	ledger.Store
	mu      sync.Mutex
	last    map[string]ledger.Entry
	records []digest.Record
	seq     int
}

func (s *streamed) emit(e ledger.Entry, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, had := s.last[e.Key]
	if had && old.Version == e.Version {
		return
	}
	s.seq++
	r := digest.Record{Shard: "shard-1", Seq: fmt.Sprintf("%021d", s.seq*100), At: at, Key: e.Key, New: digest.ImageOf(e), Event: digest.Insert}
	if had {
		r.Event, r.Old = digest.Modify, digest.ImageOf(old)
	}
	s.last[e.Key] = e
	s.records = append(s.records, r)
}

func (s *streamed) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	got, err := s.Store.Create(ctx, e)
	if err == nil {
		s.emit(got, got.UpdatedAt)
	}
	return got, err
}

func (s *streamed) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if err == nil {
		s.emit(got, got.UpdatedAt)
	}
	return got, err
}

// take returns the records emitted since the last take.
func (s *streamed) take() []digest.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records
	s.records = nil
	return r
}

// ledgerRig is a ledger of rows in every state, its stream digested every
// few records into a digest chain.
type ledgerRig struct {
	t      *testing.T
	clock  *ledgertest.Clock
	store  *streamed
	cases  *ledgertest.UseCases
	keys   []string
	crash  map[string]bool // dispatch of these keys dies mid-send
	digs   *digest.MemStore
	signer *digest.LocalSigner
	writer *digest.Writer
}

func newRig(t *testing.T) *ledgerRig {
	t.Helper()
	clock := ledgertest.NewClock()
	st := &streamed{Store: &memstore.Store{}, last: map[string]ledger.Entry{}}
	crash := map[string]bool{}
	behave := func(s ledger.Send) ledgertest.Behavior {
		if crash[s.IdempotencyKey] {
			panic("worker died mid-send")
		}
		// Accept, Reject, AcceptThenDrop, FailBeforeReach or Throttle, by key.
		return ledgertest.Behavior(int(s.IdempotencyKey[0]) % 5)
	}
	r := &ledgerRig{
		t: t, clock: clock, store: st,
		cases: &ledgertest.UseCases{Ports: assemble.Ports{
			Store: st, Content: &memstore.Content{}, Opener: ledgertest.PlainOpener{},
			Transports: map[ledger.Channel]ledger.Transport{
				ledger.Email: &ledgertest.Transport{Script: behave},
				ledger.SMS:   &ledgertest.Transport{Script: behave},
			},
			Clock: clock.Now, Policy: ledger.DefaultPolicy(),
		}},
		crash: crash, digs: digest.NewMemStore(), signer: digest.NewLocalSigner("local:digest"),
	}
	r.writer = &digest.Writer{Store: r.digs, Signer: r.signer, Clock: clock.Now, Retention: r.cases.Policy.Retention}
	return r
}

// populate claims n challenges and drives them into every state, writing a
// digest after every step.
func (r *ledgerRig) populate(n int) {
	r.t.Helper()
	ctx := context.Background()
	for i := range n {
		ch := ledger.Email
		if i%2 == 1 {
			ch = ledger.SMS
		}
		ttl := time.Hour
		if i%7 == 6 {
			ttl = 2 * time.Minute // expires before dispatch
		}
		key := r.claimOn(i, ch, ttl)
		if i%7 < 5 {
			if _, err := r.cases.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				r.t.Fatalf("dispatch %d: %v", i, err)
			}
		}
		if i%40 == 39 {
			r.digest()
		}
	}
	r.clock.Advance(10 * time.Minute)
	if _, err := r.cases.ExpireSweep(ctx, "expire/req-1", 0); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.cases.Reconcile(ctx, "reconcile/req-1", 0); err != nil {
		r.t.Fatal(err)
	}
	// Rows left unknown and dispatching after the sweep.
	for i := n; i < n+n/10; i++ {
		key := r.claim(i, time.Hour)
		if i%3 == 0 {
			r.crash[key] = true
			func() {
				defer func() { _ = recover() }()
				_, _ = r.cases.Dispatch(ctx, key, "dispatch/req-crash")
			}()
		} else if _, err := r.cases.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
			r.t.Fatal(err)
		}
	}
	r.digest()
}

// claim claims challenge i by email and returns its key.
func (r *ledgerRig) claim(i int, ttl time.Duration) string { return r.claimOn(i, ledger.Email, ttl) }

func (r *ledgerRig) claimOn(i int, ch ledger.Channel, ttl time.Duration) string {
	r.t.Helper()
	in, sealed := ledgertest.Intent(i, ch, r.clock.Now(), ttl)
	res, err := r.cases.Claim(context.Background(), in, sealed, ledger.Worker(fmt.Sprintf("claim/req-%d", i)))
	if err != nil {
		r.t.Fatalf("claim %d: %v", i, err)
	}
	r.keys = append(r.keys, res.Entry.Key)
	return res.Entry.Key
}

// digest writes one digest of the records since the last.
func (r *ledgerRig) digest() digest.Digest {
	r.t.Helper()
	recs := r.store.take()
	d, err := r.writer.Write(context.Background(), digest.Collect(recs, r.clock.Now()))
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// table reads every row as verify would find it.
func (r *ledgerRig) table() map[string]ledger.Entry {
	r.t.Helper()
	out := map[string]ledger.Entry{}
	for _, k := range r.keys {
		e, err := r.cases.Store.Get(context.Background(), k)
		if err != nil {
			r.t.Fatal(err)
		}
		out[k] = e
	}
	return out
}

// verify checks table against the rig's digests with v and returns the
// failures (chain breaks included) and the pending rows.
func verify(t *testing.T, digs digest.Store, v digest.Verifier, table map[string]ledger.Entry, now time.Time) (fails, pending []digest.Finding) {
	t.Helper()
	c, err := digest.Load(context.Background(), digs, v)
	if err != nil {
		t.Fatal(err)
	}
	all := append([]digest.Finding(nil), c.Findings...)
	for _, e := range table {
		if err := e.Verify(); err != nil {
			all = append(all, digest.Finding{Kind: digest.FindRow, Key: e.Key, Fail: true, Detail: err.Error()})
		}
		all = append(all, c.CheckRow(e, now)...)
	}
	all = append(all, c.Missing(now)...)
	for _, f := range all {
		if f.Fail {
			fails = append(fails, f)
		} else {
			pending = append(pending, f)
		}
	}
	return fails, pending
}
