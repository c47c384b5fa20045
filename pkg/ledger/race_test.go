package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

// hookStore runs its hooks once, at a chosen point of the first matching
// call, to interleave another worker deterministically.
type hookStore struct {
	ledger.Store
	once        sync.Once
	afterGet    func()
	beforeBegin func() // before the claimed -> dispatching write
}

func (s *hookStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	e, err := s.Store.Get(ctx, key)
	if s.afterGet != nil {
		s.once.Do(s.afterGet)
	}
	return e, err
}

func (s *hookStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if s.beforeBegin != nil && c.Next.State == ledger.Dispatching {
		s.once.Do(s.beforeBegin)
	}
	return s.Store.Apply(ctx, c)
}

type hookContent struct {
	ledger.ContentStore
	once      sync.Once
	beforeGet func()
}

func (c *hookContent) Get(ctx context.Context, key string) ([]byte, error) {
	c.once.Do(c.beforeGet)
	return c.ContentStore.Get(ctx, key)
}

// Dispatch must stay harmless when another writer changes the row between
// its read and its conditional write: the conditional write decides, a lost
// race is a skip (not an error that fails the batch), and a write that did
// not change the state (a content-mismatch event) must not cost the send.
func TestDispatchInterleavings(t *testing.T) {
	ctx := context.Background()
	// dispatchFirst is a hook in which other dispatches key to accepted.
	dispatchFirst := func(t *testing.T, other *ledger.Service, key string) func() {
		return func() {
			if r, err := other.Dispatch(ctx, key, "dispatch/other"); err != nil || r.Outcome != ledger.DispatchAccepted {
				t.Errorf("other dispatch: %s %v", r.Outcome, err)
			}
		}
	}
	// mismatchFirst is a hook in which other claims in again with changed
	// content: a content-mismatch event on the row.
	mismatchFirst := func(t *testing.T, other *ledger.Service, in ledger.Intent) func() {
		return func() {
			m := ledgertest.Message(60, ledger.Email)
			m.Body = "tampered"
			bad := in
			bad.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
			if r, err := other.Claim(ctx, bad, ledgertest.Seal(m), "claim/other"); err != nil || r.Outcome != ledger.ClaimMismatch {
				t.Errorf("mismatch claim: %s %v", r.Outcome, err)
			}
		}
	}
	tests := []struct {
		name string
		// wire installs the interleaving on svc (the worker under test);
		// other is an untouched service over the same stores.
		wire      func(t *testing.T, e *env, svc *ledger.Service, other *ledger.Service, in ledger.Intent)
		want      ledger.DispatchOutcome
		wantState ledger.State
		wantCalls int
	}{
		{"another worker dispatched and purged the content first", func(t *testing.T, e *env, svc, other *ledger.Service, in ledger.Intent) {
			svc.Content = &hookContent{ContentStore: e.Content, beforeGet: dispatchFirst(t, other, in.Key())}
		}, ledger.DispatchSkipped, ledger.Accepted, 1},
		{"another worker expired the row first", func(t *testing.T, e *env, svc, other *ledger.Service, in ledger.Intent) {
			e.Clock.Advance(time.Hour)
			svc.Store = &hookStore{Store: e.Store, afterGet: func() {
				if _, err := other.ExpireSweep(ctx, "expire/other", 10); err != nil {
					t.Error(err)
				}
			}}
		}, ledger.DispatchSkipped, ledger.Expired, 0},
		{"another worker won the move to dispatching", func(t *testing.T, e *env, svc, other *ledger.Service, in ledger.Intent) {
			svc.Store = &hookStore{Store: e.Store, beforeBegin: dispatchFirst(t, other, in.Key())}
		}, ledger.DispatchSkipped, ledger.Accepted, 1},
		{"a content-mismatch event landed between read and write", func(t *testing.T, e *env, svc, other *ledger.Service, in ledger.Intent) {
			svc.Store = &hookStore{Store: e.Store, beforeBegin: mismatchFirst(t, other, in)}
		}, ledger.DispatchAccepted, ledger.Accepted, 1},
		{"a content-mismatch event landed while the send was in flight", func(t *testing.T, e *env, svc, other *ledger.Service, in ledger.Intent) {
			var once sync.Once
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior {
				once.Do(mismatchFirst(t, other, in))
				return ledgertest.Accept
			}
		}, ledger.DispatchAccepted, ledger.Accepted, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, _, _ := e.claim(t, 60, ledger.Email, ledger.ClaimCreated)
			svc, other := *e.Svc, *e.Svc
			tt.wire(t, e, &svc, &other, in)
			res, err := svc.Dispatch(ctx, in.Key(), "dispatch/me")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			got := e.get(t, in.Key())
			if got.State != tt.wantState || e.Transport.Calls() != tt.wantCalls || e.Transport.Recorded(in.Key()) != tt.wantCalls {
				t.Fatalf("row %s, calls %d, recorded %d", got.State, e.Transport.Calls(), e.Transport.Recorded(in.Key()))
			}
			if s := e.Transport.Sent; len(s) == 1 && s[0].ContentHash != in.ContentHash {
				t.Fatal("sent the mismatching content")
			}
			if e.hasContent(t, in.Key()) {
				t.Fatal("content left after the row closed")
			}
			checkHistory(t, got)
		})
	}
}
