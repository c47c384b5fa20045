package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ScenarioPolicyVersion differs from the intents' PolicyVersion ("policy-1") so
// tests can tell the service's policy version from the producer's.
const ScenarioPolicyVersion = "policy-test-7"

const ScenarioTTL = 10 * time.Minute

// Scenario is the use cases over a fresh memory store, with deterministic event ids.
type Scenario struct {
	*Env
	Mem *memstore.Store
	ids atomic.Int64
}

func NewScenario(t *testing.T) *Scenario {
	t.Helper()
	mem := &memstore.Store{}
	e := &Scenario{Env: NewEnv(mem), Mem: mem}
	e.Cases.Policy.Version = ScenarioPolicyVersion
	e.Cases.NewID = func() string { return fmt.Sprintf("ev-%03d", e.ids.Add(1)) }
	if err := e.Cases.Policy.Validate(); err != nil {
		t.Fatal(err)
	}
	return e
}

// Claim claims intent i on ch, expiring ttl from now, and fails the test
// unless the outcome is want.
func (e *Scenario) Claim(t *testing.T, i int, ch ledger.Channel, want ledger.Outcome) (ledger.Intent, []byte, ledger.Entry) {
	t.Helper()
	in, sealed := Intent(i, ch, e.Clock.Now(), ScenarioTTL)
	res, err := e.Cases.Claim(context.Background(), in, sealed, "claim/req-1")
	if err != nil {
		t.Fatalf("claim %d/%s: %v", i, ch, err)
	}
	if res.Outcome != want {
		t.Fatalf("claim %d/%s: outcome %s, want %s", i, ch, res.Outcome, want)
	}
	return in, sealed, res.Entry
}

func (e *Scenario) Get(t *testing.T, key string) ledger.Entry {
	t.Helper()
	got, err := e.Store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return got
}

// ContentKey returns the content-store key of the row with dedupe key key.
func (e *Scenario) ContentKey(key string) string {
	row, err := e.Store.Get(context.Background(), key)
	if err != nil {
		return key
	}
	return ledger.ContentKey(row)
}

// HasContent reports whether sealed content is stored for key.
func (e *Scenario) HasContent(t *testing.T, key string) bool {
	t.Helper()
	_, err := e.Content.Get(context.Background(), e.ContentKey(key))
	switch {
	case err == nil:
		return true
	case errors.Is(err, ledger.ErrNotFound):
		return false
	}
	t.Fatalf("content get %s: %v", key, err)
	return false
}

func MustVerify(t *testing.T, e ledger.Entry) {
	t.Helper()
	if err := e.Verify(); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

// CrashStore loses the write that follows a transport attempt: Apply of a
// change leaving dispatching fails, as if the worker died after the send and
// before recording its outcome. The row stays dispatching.
type CrashStore struct {
	ledger.Store
	crashes atomic.Int64
}

func (s *CrashStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if c.From == ledger.Dispatching {
		s.crashes.Add(1)
		return ledger.Entry{}, errors.New("worker crashed")
	}
	return s.Store.Apply(ctx, c)
}

// StuckDispatching claims intent i and dispatches it through a worker that
// crashes after the send, leaving the row in dispatching. behavior scripts
// the provider's side of that one send.
func (e *Scenario) StuckDispatching(t *testing.T, i int, ch ledger.Channel, behavior Behavior) ledger.Intent {
	t.Helper()
	in, _, _ := e.Claim(t, i, ch, ledger.OutcomeClaimed)
	prevScript := e.Transport.Script
	e.Transport.Script = func(ledger.Send) Behavior { return behavior }
	crashing := *e.Cases
	crashing.Store = &CrashStore{Store: e.Store}
	if _, err := crashing.Dispatch(context.Background(), in.Key(), "dispatch/crash"); err == nil {
		t.Fatal("crashing dispatch returned no error")
	}
	e.Transport.Script = prevScript
	if got := e.Get(t, in.Key()); got.State != ledger.Dispatching {
		t.Fatalf("after crash: %s, want dispatching", got.State)
	}
	return in
}

// HistoryPath returns "from>to" for every history entry.
func HistoryPath(e ledger.Entry) string {
	var b strings.Builder
	for i, ev := range e.History {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s>%s", ev.From, ev.To)
	}
	return b.String()
}

var EmailThenSMS = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}

func FallbackIntent(i int, ch ledger.Channel, now time.Time) (ledger.Intent, []byte) {
	in, sealed := Intent(i, ch, now, ScenarioTTL)
	in.Workflow = ledger.Workflow{Kind: EmailThenSMS.Kind, Order: append([]ledger.Channel(nil), EmailThenSMS.Order...)}
	return in, sealed
}

// ClaimFallbackPair claims challenge i's email-then-SMS fallback pair and
// returns both intents.
func ClaimFallbackPair(t *testing.T, e *Scenario, i int) (email, sms ledger.Intent) {
	t.Helper()
	email, emailSealed := FallbackIntent(i, ledger.Email, e.Clock.Now())
	sms, smsSealed := FallbackIntent(i, ledger.SMS, e.Clock.Now())
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

func MustDispatch(t *testing.T, e *Scenario, key string, want ledger.Outcome) ledger.Entry {
	t.Helper()
	res, err := e.Cases.Dispatch(context.Background(), key, "dispatch/req-1")
	if err != nil || res.Outcome != want {
		t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, want)
	}
	return res.Entry
}

func MustReconcile(t *testing.T, e *Scenario) ledger.SweepReport {
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

// CheckHistory asserts the chain verifies, every transition is in the
// hand-written table and every other event keeps the state.
func CheckHistory(t *testing.T, got ledger.Entry) {
	t.Helper()
	MustVerify(t, got)
	for i, ev := range got.History {
		if ev.Kind == ledger.KindTransition && !AllowedTransitions[[2]ledger.State{ev.From, ev.To}] {
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

// RecordingScheduler records what the service asked to be dispatched when.
type RecordingScheduler struct {
	mu  sync.Mutex
	got map[string][]time.Time
}

func (s *RecordingScheduler) Schedule(_ context.Context, key string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = map[string][]time.Time{}
	}
	s.got[key] = append(s.got[key], at)
	return nil
}

func (s *RecordingScheduler) Last(key string) (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.got[key]
	if len(g) == 0 {
		return time.Time{}, 0
	}
	return g[len(g)-1], len(g)
}

// PacedScenario is newEnv with a scheduler, a jitter that tests can set, and a
// Sleep that advances the test clock instead of waiting.
func PacedScenario(t *testing.T) (*Scenario, *RecordingScheduler) {
	e := NewScenario(t)
	sch := &RecordingScheduler{}
	e.Cases.Scheduler = sch
	e.Cases.Jitter = func() float64 { return 0.5 }
	e.Cases.Sleep = func(_ context.Context, d time.Duration) error { e.Clock.Advance(d); return nil }
	return e, sch
}

// ProviderEvent is an event of kind k for the row key, as the decoder would
// produce it, with the message id the test transport acknowledged.
func (e *Scenario) ProviderEvent(t *testing.T, key string, ch ledger.Channel, k ledger.EventKind, typ, detail string, permanent bool) ledger.ProviderEvent {
	t.Helper()
	ack, ok, err := e.Transport.Lookup(context.Background(), key)
	if err != nil || !ok {
		t.Fatalf("the provider recorded no message for %s", key)
	}
	p := ledger.ProviderEvent{
		Key: key, Channel: ch, Kind: k, Type: typ, Detail: detail, MessageID: ack.ID,
		At: e.Clock.Now().Add(-time.Second), Permanent: permanent,
	}
	e.Prove(t, &p)
	return p
}

// Prove gives p the attempt number and proof the newest send for its key
// carried, as the provider copies them into its events: a genuine event.
// The transport must report events (Transport.Events), or the send carried
// no proof.
func (e *Scenario) Prove(t *testing.T, p *ledger.ProviderEvent) {
	t.Helper()
	attempt, proof, ok := e.Transport.Carried(p.Key)
	if !ok || proof == "" {
		t.Fatalf("no send for %s carried an attempt proof (is Transport.Events set?)", p.Key)
	}
	p.Attempt, p.Proof = attempt, proof
}

func (e *Scenario) Record(t *testing.T, p ledger.ProviderEvent, want ledger.Outcome) ledger.Entry {
	t.Helper()
	res, err := e.Cases.RecordProviderEvent(context.Background(), p, "events/req-1")
	if err != nil || res.Outcome != want {
		t.Fatalf("record %s: %s %v, want %s", p.Kind, res.Outcome, err, want)
	}
	MustVerify(t, res.Entry)
	return res.Entry
}

// AllowedTransitions is the state diagram of docs/design.md written out by hand, not derived from the
// code: a change to the transition table must change this list too.
var AllowedTransitions = map[[2]ledger.State]bool{
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

// LimitedScenario is an env whose dispatch admits rows through limits, counted
// in a memory limit store.
func LimitedScenario(t *testing.T, l ledger.Limits) (*Scenario, *memstore.Limits) {
	t.Helper()
	e := NewScenario(t)
	store := &memstore.Limits{}
	e.Cases.Limits = l
	e.Cases.Limiter, e.Cases.Challenges = store, store
	e.Cases.Fingerprints = &fingerprint.Local{Key: []byte("limits test key")}
	e.Cases.NumberOf = func(n string) (ledger.PhoneNumber, error) {
		switch {
		case strings.HasPrefix(n, "+1"):
			return ledger.PhoneNumber{Region: "US", Kind: "fixed_line_or_mobile"}, nil
		case strings.HasPrefix(n, "+44"):
			return ledger.PhoneNumber{Region: "GB", Kind: "mobile"}, nil
		case strings.HasPrefix(n, "+882"):
			return ledger.PhoneNumber{}, errors.New("no region")
		}
		return ledger.PhoneNumber{}, errors.New("invalid number")
	}
	return e, store
}

// CountingStore counts reads.
type CountingStore struct {
	ledger.Store
	Gets int
}

func (s *CountingStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	s.Gets++
	return s.Store.Get(ctx, key)
}

// SignProof returns the proof of the attempt p names, as only the senders could
// make it.
func SignProof(t *testing.T, e *Scenario, p ledger.ProviderEvent) string {
	t.Helper()
	proof, err := e.Proofs.Sign(context.Background(), ledger.AttemptRef{Key: p.Key, Channel: p.Channel, Attempt: p.Attempt})
	if err != nil {
		t.Fatal(err)
	}
	return proof
}

// ClaimTo claims challenge i on ch to address to, for subject (none if
// ""), expiring ttl+extra from now.
func (e *Scenario) ClaimTo(t *testing.T, i int, ch ledger.Channel, to, subject string, extra time.Duration) ledger.Intent {
	t.Helper()
	in, _ := Intent(i, ch, e.Clock.Now(), ScenarioTTL+extra)
	m := ledger.Message{To: to, Subject: "Reset your password", Body: fmt.Sprintf("reset link %d", i)}
	in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	in.SubjectRef = subject
	// extra orders challenges: a greater one was issued (and expires) later.
	in.IssuedAt = e.Clock.Now().Add(extra - 5*time.Minute)
	if _, err := e.Cases.Claim(context.Background(), in, Seal(m), "claim/req-1"); err != nil {
		t.Fatal(err)
	}
	return in
}

// DispatchCutAfterCount dispatches the claimed row key with a begin write
// that fails after the limits counted it: the row stays claimed.
func (e *Scenario) DispatchCutAfterCount(t *testing.T, key string) {
	t.Helper()
	real := e.Cases.Store
	e.Cases.Store = failBegin{real}
	_, err := e.Cases.Dispatch(context.Background(), key, "dispatch/1")
	e.Cases.Store = real
	if err == nil {
		t.Fatal("the failing begin write reported no error")
	}
	if got := e.Get(t, key); got.State != ledger.Claimed {
		t.Fatalf("state %s, want still claimed", got.State)
	}
}

type failBegin struct{ ledger.Store }

func (f failBegin) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if c.Next.State == ledger.Dispatching {
		return ledger.Entry{}, errors.New("throttled")
	}
	return f.Store.Apply(ctx, c)
}

// Count is how many hand-offs s has taken.
func (s *RecordingScheduler) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, at := range s.got {
		n += len(at)
	}
	return n
}
