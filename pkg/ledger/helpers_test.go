package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// testPolicyVersion differs from the intents' PolicyVersion ("policy-1") so
// tests can tell the service's policy version from the producer's.
const testPolicyVersion = "policy-test-7"

const ttl = 10 * time.Minute

// env is the use cases over a fresh memory store, with deterministic event ids.
type env struct {
	*ledgertest.Env
	mem *memstore.Store
	ids atomic.Int64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	mem := &memstore.Store{}
	e := &env{Env: ledgertest.NewEnv(mem), mem: mem}
	e.Cases.Policy.Version = testPolicyVersion
	e.Cases.NewID = func() string { return fmt.Sprintf("ev-%03d", e.ids.Add(1)) }
	if err := e.Cases.Policy.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

// claim claims intent i on ch, expiring ttl from now, and fails the test
// unless the outcome is want.
func (e *env) claim(t *testing.T, i int, ch ledger.Channel, want ledger.Outcome) (ledger.Intent, []byte, ledger.Entry) {
	t.Helper()
	in, sealed := ledgertest.Intent(i, ch, e.Clock.Now(), ttl)
	res, err := e.Cases.Claim(context.Background(), in, sealed, "claim/req-1")
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
	in, _, _ := e.claim(t, i, ch, ledger.OutcomeClaimed)
	prevScript := e.Transport.Script
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return behavior }
	crashing := *e.Cases
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

var emailThenSMS = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}

func fallbackIntent(i int, ch ledger.Channel, now time.Time) (ledger.Intent, []byte) {
	in, sealed := ledgertest.Intent(i, ch, now, ttl)
	in.Workflow = ledger.Workflow{Kind: emailThenSMS.Kind, Order: append([]ledger.Channel(nil), emailThenSMS.Order...)}
	return in, sealed
}

// claimFallbackPair claims challenge i's email-then-SMS fallback pair and
// returns both intents.
func claimFallbackPair(t *testing.T, e *env, i int) (email, sms ledger.Intent) {
	t.Helper()
	email, emailSealed := fallbackIntent(i, ledger.Email, e.Clock.Now())
	sms, smsSealed := fallbackIntent(i, ledger.SMS, e.Clock.Now())
	for _, c := range []struct {
		in     ledger.Intent
		sealed []byte
	}{{email, emailSealed}, {sms, smsSealed}} {
		if _, err := e.Cases.Claim(context.Background(), c.in, c.sealed, "claim/req-1"); err != nil {
			t.Fatal(err)
		}
	}
	return email, sms
}

func mustDispatch(t *testing.T, e *env, key string, want ledger.Outcome) ledger.Entry {
	t.Helper()
	res, err := e.Cases.Dispatch(context.Background(), key, "dispatch/req-1")
	if err != nil || res.Outcome != want {
		t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, want)
	}
	return res.Entry
}

func reconcile(t *testing.T, e *env) ledger.SweepReport {
	t.Helper()
	rep, err := e.Cases.Reconcile(context.Background(), "reconcile/req-1", 100)
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("reconcile rows: %v", err)
	}
	return rep
}

// checkHistory asserts the chain verifies, every transition is in the
// hand-written table and every other event keeps the state.
func checkHistory(t *testing.T, got ledger.Entry) {
	t.Helper()
	mustVerify(t, got)
	for i, ev := range got.History {
		if ev.Kind == ledger.KindTransition && !allowed[[2]ledger.State{ev.From, ev.To}] {
			t.Fatalf("entry %d: forbidden transition %s -> %s", i, ev.From, ev.To)
		}
		if ev.Kind != ledger.KindTransition && ev.From != ev.To {
			t.Fatalf("entry %d: %s event changed state %s -> %s", i, ev.Kind, ev.From, ev.To)
		}
		if i > 0 && ev.From != got.History[i-1].To {
			t.Fatalf("entry %d starts in %s, previous ended in %s", i, ev.From, got.History[i-1].To)
		}
	}
}

// scheduler records what the service asked to be dispatched when.
type scheduler struct {
	mu  sync.Mutex
	got map[string][]time.Time
}

func (s *scheduler) Schedule(_ context.Context, key string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = map[string][]time.Time{}
	}
	s.got[key] = append(s.got[key], at)
	return nil
}

func (s *scheduler) last(key string) (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got[key]
	if len(g) == 0 {
		return time.Time{}, 0
	}
	return g[len(g)-1], len(g)
}

// pacedEnv is newEnv with a scheduler, a jitter that tests can set, and a
// Sleep that advances the test clock instead of waiting.
func pacedEnv(t *testing.T) (*env, *scheduler) {
	e := newEnv(t)
	sch := &scheduler{}
	e.Cases.Scheduler = sch
	e.Cases.Jitter = func() float64 { return 0.5 }
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error { e.Clock.Advance(d); return nil }
	return e, sch
}

// providerEvent is an event of kind k for the row key, as the decoder would
// produce it, with the message id the test transport acknowledged.
func (e *env) providerEvent(t *testing.T, key string, ch ledger.Channel, k ledger.EventKind, typ, detail string, permanent bool) ledger.ProviderEvent {
	t.Helper()
	ack, ok, err := e.Transport.Lookup(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("the provider recorded no message for %s", key)
	}
	p := ledger.ProviderEvent{
		Key: key, Channel: ch, Kind: k, Type: typ, Detail: detail, MessageID: ack.ID,
		At: e.Clock.Now().Add(-time.Second), Permanent: permanent,
	}
	e.prove(t, &p)
	return p
}

// prove gives p the attempt number and proof the newest send for its key
// carried, as the provider copies them into its events: a genuine event.
// The transport must report events (Transport.Events), or the send carried
// no proof.
func (e *env) prove(t *testing.T, p *ledger.ProviderEvent) {
	t.Helper()
	attempt, proof, ok := e.Transport.Carried(p.Key)
	if !ok || proof == "" {
		t.Fatalf("no send for %s carried an attempt proof (is Transport.Events set?)", p.Key)
	}
	p.Attempt, p.Proof = attempt, proof
}

func (e *env) record(t *testing.T, p ledger.ProviderEvent, want ledger.Outcome) ledger.Entry {
	t.Helper()
	res, err := e.Cases.RecordProviderEvent(context.Background(), p, "events/req-1")
	if err != nil || res.Outcome != want {
		t.Fatalf("record %s: %s %v, want %s", p.Kind, res.Outcome, err, want)
	}
	mustVerify(t, res.Entry)
	return res.Entry
}

// allowed is the state diagram of docs/design.md written out by hand, not derived from the
// code: a change to the transition table must change this list too.
var allowed = map[[2]ledger.State]bool{
	{ledger.None, ledger.Claimed}:    true, // new intent
	{ledger.None, ledger.Expired}:    true, // intent arrived expired
	{ledger.None, ledger.Suppressed}: true, // fallback channel not needed
	{ledger.None, ledger.Held}:       true, // fallback channel waits for the earlier one

	{ledger.Held, ledger.Claimed}:    true, // earlier channel ended rejected, or hard-bounced
	{ledger.Held, ledger.Suppressed}: true, // earlier channel ended otherwise
	{ledger.Held, ledger.Expired}:    true, // challenge expired while held

	{ledger.Claimed, ledger.Dispatching}: true,
	{ledger.Claimed, ledger.Deferred}:    true, // send-rate budget: slot booked later than the in-process wait
	{ledger.Claimed, ledger.Expired}:     true, // expired before dispatch
	{ledger.Claimed, ledger.Quarantined}: true, // sealed content unavailable
	{ledger.Claimed, ledger.Limited}:     true, // a send limit stopped it
	{ledger.Claimed, ledger.Suppressed}:  true, // superseded by a newer challenge of its subject

	{ledger.Dispatching, ledger.Accepted}: true,
	{ledger.Dispatching, ledger.Rejected}: true,
	{ledger.Dispatching, ledger.Unknown}:  true, // timeout, crash, lease expired
	{ledger.Dispatching, ledger.Deferred}: true, // provider did not take it for now
	{ledger.Dispatching, ledger.Expired}:  true, // not sent, and no attempt fits before expiry

	{ledger.Deferred, ledger.Dispatching}: true, // next attempt, same key
	{ledger.Deferred, ledger.Expired}:     true, // not sent before the challenge expired
	{ledger.Deferred, ledger.Quarantined}: true, // sealed content unavailable at the retry
	{ledger.Deferred, ledger.Accepted}:    true, // a provider event shows an earlier attempt was taken
	{ledger.Deferred, ledger.Suppressed}:  true, // superseded while waiting for its first slot

	{ledger.Unknown, ledger.Accepted}:    true, // lookup found / provider event / same-key retry / decision with evidence
	{ledger.Unknown, ledger.Rejected}:    true, // same-key retry refused / decision with evidence
	{ledger.Unknown, ledger.Quarantined}: true,
	{ledger.Unknown, ledger.Abandoned}:   true,
	{ledger.Unknown, ledger.Deferred}:    true, // the not-sent answer arrived after the lease expired

	{ledger.Quarantined, ledger.Accepted}:  true, // operator, with evidence; or a provider event
	{ledger.Quarantined, ledger.Rejected}:  true, // operator, with evidence
	{ledger.Quarantined, ledger.Abandoned}: true, // operator, outcome unknown
}
