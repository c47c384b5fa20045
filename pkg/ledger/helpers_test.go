package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// testPolicyVersion differs from the intents' PolicyVersion ("policy-1") so
// tests can tell the service's policy version from the producer's.
const testPolicyVersion = "policy-test-7"

const ttl = 10 * time.Minute

// env is a Service over a fresh memory store, with deterministic event ids.
type env struct {
	*ledgertest.Env
	mem *memstore.Store
	ids atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	mem := &memstore.Store{}
	e := &env{Env: ledgertest.NewEnv(mem), mem: mem}
	e.Svc.Policy.Version = testPolicyVersion
	e.Svc.NewID = func() string { return fmt.Sprintf("ev-%03d", e.ids.Add(1)) }
	if err := e.Svc.Policy.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

// claim claims intent i on ch, expiring ttl from now, and fails the test
// unless the outcome is want.
func (e *env) claim(t *testing.T, i int, ch ledger.Channel, want ledger.ClaimOutcome) (ledger.Intent, []byte, ledger.Entry) {
	t.Helper()
	in, sealed := ledgertest.Intent(i, ch, e.Clock.Now(), ttl)
	res, err := e.Svc.Claim(context.Background(), in, sealed, "claim/req-1")
	if err != nil {
		t.Fatalf("claim %d/%s: %v", i, ch, err)
	}
	if res.Outcome != want {
		t.Fatalf("claim %d/%s: outcome %s, want %s", i, ch, res.Outcome, want)
	}
	return in, sealed, res.Entry
}

func (e *env) get(t *testing.T, key string) ledger.Entry {
	t.Helper()
	got, err := e.Store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return got
}

// contentKey returns the content-store key of the row with dedupe key key.
func (e *env) contentKey(key string) string {
	row, err := e.Store.Get(context.Background(), key)
	if err != nil {
		return key
	}
	return ledger.ContentKey(row)
}

// hasContent reports whether sealed content is stored for key.
func (e *env) hasContent(t *testing.T, key string) bool {
	t.Helper()
	_, err := e.Content.Get(context.Background(), e.contentKey(key))
	switch {
	case err == nil:
		return true
	case errors.Is(err, ledger.ErrNotFound):
		return false
	}
	t.Fatalf("content get %s: %v", key, err)
	return false
}

func mustVerify(t *testing.T, e ledger.Entry) {
	t.Helper()
	if err := e.Verify(); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// crashStore loses the write that follows a transport attempt: Apply of a
// change leaving dispatching fails, as if the worker died after the send and
// before recording its outcome. The row stays dispatching.
type crashStore struct {
	ledger.Store
	crashes atomic.Int64
}

func (s *crashStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if c.From == ledger.Dispatching {
		s.crashes.Add(1)
		return ledger.Entry{}, errors.New("worker crashed")
	}
	return s.Store.Apply(ctx, c)
}

// stuckDispatching claims intent i and dispatches it through a worker that
// crashes after the send, leaving the row in dispatching. behavior scripts
// the provider's side of that one send.
func (e *env) stuckDispatching(t *testing.T, i int, ch ledger.Channel, behavior ledgertest.Behavior) ledger.Intent {
	t.Helper()
	in, _, _ := e.claim(t, i, ch, ledger.ClaimCreated)
	prevScript := e.Transport.Script
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return behavior }
	crashing := *e.Svc
	crashing.Store = &crashStore{Store: e.Store}
	if _, err := crashing.Dispatch(context.Background(), in.Key(), "dispatch/crash"); err == nil {
		t.Fatal("crashing dispatch returned no error")
	}
	e.Transport.Script = prevScript
	if got := e.get(t, in.Key()); got.State != ledger.Dispatching {
		t.Fatalf("after crash: %s, want dispatching", got.State)
	}
	return in
}

// historyPath returns "from>to" for every history entry.
func historyPath(e ledger.Entry) string {
	var b strings.Builder
	for i, ev := range e.History {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s>%s", ev.From, ev.To)
	}
	return b.String()
}
