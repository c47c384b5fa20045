package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// FirstReadsPorts is a ledger.FirstReads and the three ports it reads
// together.
type FirstReadsPorts struct {
	FirstReads ledger.FirstReads
	Store      ledger.Store
	Challenges ledger.Challenges
	Content    ledger.ContentStore
}

// RunFirstReadsContract checks that FirstReads returns what the three
// ports return read one by one: the row, the newest challenge and the
// content, each found or not, and ErrNotFound for a missing row.
func RunFirstReadsContract(t *testing.T, newPorts func(t *testing.T) FirstReadsPorts) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	t.Run("all three", func(t *testing.T) {
		p := newPorts(t)
		e := claimedEntry(t, p.Store, 1, now)
		stream := ledger.SubjectStream{Subject: "acct-1", Purpose: e.Identity.Purpose, Channel: e.Identity.Channel}
		newest := ledger.Challenge{ID: "chal-newer", IssuedAt: now, ExpiresAt: now.Add(10 * time.Minute)}
		if err := p.Challenges.Note(ctx, stream, newest); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Content.Put(ctx, ledger.ContentKey(e), []byte("sealed-1"), now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		r, err := p.FirstReads.ReadFirst(ctx, ledger.FirstQuery{Key: e.Key, Stream: &stream, ContentKey: ledger.ContentKey(e)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := p.Store.Get(ctx, e.Key)
		if r.Entry.Key != want.Key || r.Entry.Version != want.Version || r.Entry.Last().Hash != want.Last().Hash {
			t.Fatalf("row %+v, want %+v", r.Entry, want)
		}
		if r.Newest == nil || !r.Newest.OK || r.Newest.Value.ID != newest.ID || !r.Newest.Value.IssuedAt.Equal(newest.IssuedAt) || !r.Newest.Value.ExpiresAt.Equal(newest.ExpiresAt) {
			t.Fatalf("newest %+v, want %+v", r.Newest, newest)
		}
		if r.Content == nil || !r.Content.OK || !bytes.Equal(r.Content.Value, []byte("sealed-1")) {
			t.Fatalf("content %+v", r.Content)
		}
	})
	t.Run("none stored", func(t *testing.T) {
		p := newPorts(t)
		e := claimedEntry(t, p.Store, 2, now)
		stream := ledger.SubjectStream{Subject: "acct-2", Purpose: e.Identity.Purpose, Channel: e.Identity.Channel}
		r, err := p.FirstReads.ReadFirst(ctx, ledger.FirstQuery{Key: e.Key, Stream: &stream, ContentKey: ledger.ContentKey(e)})
		if err != nil || r.Newest == nil || r.Newest.OK || r.Content == nil || r.Content.OK {
			t.Fatalf("nothing stored: %+v %+v %v", r.Newest, r.Content, err)
		}
		r, err = p.FirstReads.ReadFirst(ctx, ledger.FirstQuery{Key: e.Key})
		if err != nil || r.Newest != nil || r.Content != nil || r.Entry.Key != e.Key {
			t.Fatalf("row alone: %+v %+v %v", r.Newest, r.Content, err)
		}
	})
	t.Run("no row", func(t *testing.T) {
		p := newPorts(t)
		if _, err := p.FirstReads.ReadFirst(ctx, ledger.FirstQuery{Key: "no-such-row", ContentKey: "no-such-row:h"}); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("missing row: %v, want ErrNotFound", err)
		}
	})
}

// claimedEntry creates the claimed row of intent i in store.
func claimedEntry(t *testing.T, store ledger.Store, i int, now time.Time) ledger.Entry {
	t.Helper()
	env := NewEnv(store)
	in, sealed := Intent(i, ledger.Email, now, 10*time.Minute)
	env.Clock.Advance(now.Sub(env.Clock.Now()))
	res, err := env.Cases.Claim(context.Background(), in, sealed, "claim/first-reads")
	if err != nil {
		t.Fatal(err)
	}
	return res.Entry
}
