package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestDispatchOutcomes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		behavior    ledgertest.Behavior
		want        ledger.Outcome
		state       ledger.State
		reason      string // prefix
		ackID       string
		keepContent bool
		recorded    int
	}{
		{"accepted", ledgertest.Accept, ledger.OutcomeAccepted, ledger.Accepted, "transport accepted", "msg-1", false, 1},
		{"rejected", ledgertest.Reject, ledger.OutcomeRejected, ledger.Rejected, "transport rejected: destination suppressed", "", false, 0},
		{"lost acknowledgement", ledgertest.AcceptThenDrop, ledger.OutcomeUnknown, ledger.Unknown, "no acknowledgement: ", "", true, 1},
		{"never reached the provider", ledgertest.FailBeforeReach, ledger.OutcomeUnknown, ledger.Unknown, "no acknowledgement: ", "", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return tt.behavior }
			in, _, _ := e.Claim(t, 30, ledger.Email, ledger.OutcomeClaimed)
			e.Clock.Advance(time.Minute)
			start := e.Clock.Now()

			res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-9")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			got := e.Get(t, in.Key())
			if got.State != tt.state || got.AckID != tt.ackID || !strings.HasPrefix(got.Reason, tt.reason) {
				t.Fatalf("row %s ack %q reason %q", got.State, got.AckID, got.Reason)
			}
			if got.Attempts != 1 || !got.FirstAttemptAt.Equal(start) || !got.LeaseUntil.IsZero() {
				t.Fatalf("attempts %d first %v lease %v", got.Attempts, got.FirstAttemptAt, got.LeaseUntil)
			}
			if tt.state == ledger.Unknown {
				if want := start.Add(e.Cases.Policy.RecheckAfter); !got.NextCheckAt.Equal(want) || !got.OpenDue().Equal(want) {
					t.Fatalf("NextCheckAt %v, want %v", got.NextCheckAt, want)
				}
			}
			if p := ledgertest.HistoryPath(got); p != "none>claimed claimed>dispatching dispatching>"+string(tt.state) {
				t.Fatalf("history %s", p)
			}
			if e.HasContent(t, in.Key()) != tt.keepContent {
				t.Fatalf("content kept = %v, want %v", !tt.keepContent, tt.keepContent)
			}
			if e.Transport.Calls() != 1 || e.Transport.Recorded(in.Key()) != tt.recorded {
				t.Fatalf("calls %d recorded %d", e.Transport.Calls(), e.Transport.Recorded(in.Key()))
			}
			s := e.Transport.Sent[0]
			if s.IdempotencyKey != in.Key() || s.ContentHash != in.ContentHash || s.Attempt != 1 || s.Channel != ledger.Email ||
				!s.ExpiresAt.Equal(in.ExpiresAt) || s.Message != ledgertest.Message(30, ledger.Email) {
				t.Fatalf("send %+v", s)
			}
			if strings.Contains(got.Reason, ledgertest.Canary) || strings.Contains(got.Reason, "@") {
				t.Fatalf("reason leaks content: %q", got.Reason)
			}
			ledgertest.MustVerify(t, got)

			// A duplicate stream record or invocation is harmless.
			again, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-10")
			if err != nil || again.Outcome != ledger.OutcomeSkipped || e.Transport.Calls() != 1 {
				t.Fatalf("duplicate dispatch: %s %v, calls %d", again.Outcome, err, e.Transport.Calls())
			}
			if e.Get(t, in.Key()).Version != got.Version {
				t.Fatal("duplicate dispatch wrote")
			}
		})
	}
}

type failingOpener struct{ err error }

func (o failingOpener) Open(context.Context, string, []byte) (ledger.Message, error) {
	return ledger.Message{}, o.err
}

func TestDispatchContentProblems(t *testing.T) {
	ctx := context.Background()
	otherMessage := ledgertest.Message(31, ledger.Email)
	otherMessage.To = "attacker@example.test"
	tests := []struct {
		name    string
		prepare func(e *ledgertest.Scenario, key string)
		// wantErr: dispatch fails and the row stays claimed with its
		// content; otherwise the row is quarantined and the content purged.
		wantErr bool
	}{
		{"content missing", func(e *ledgertest.Scenario, key string) { _ = e.Content.Delete(ctx, e.ContentKey(key)) }, false},
		{"content cannot be opened", func(e *ledgertest.Scenario, key string) {
			_ = e.Content.Delete(ctx, e.ContentKey(key))
			_, _ = e.Content.Put(ctx, e.ContentKey(key), []byte("not a sealed message"), ledgertest.Epoch.Add(ledgertest.ScenarioTTL))
		}, false},
		{"opener refuses to authenticate", func(e *ledgertest.Scenario, _ string) {
			e.Cases.Opener = failingOpener{fmt.Errorf("kms: bad ciphertext: %w", ledger.ErrContentUnavailable)}
		}, false},
		{"opened content does not match the hash", func(e *ledgertest.Scenario, key string) {
			_ = e.Content.Delete(ctx, e.ContentKey(key))
			_, _ = e.Content.Put(ctx, e.ContentKey(key), ledgertest.Seal(otherMessage), ledgertest.Epoch.Add(ledgertest.ScenarioTTL))
		}, false},
		{"opener unavailable (transient)", func(e *ledgertest.Scenario, _ string) {
			e.Cases.Opener = failingOpener{errors.New("kms: throttled")}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, _, _ := e.Claim(t, 31, ledger.Email, ledger.OutcomeClaimed)
			tt.prepare(e, in.Key())
			res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
			got := e.Get(t, in.Key())
			if e.Transport.Calls() != 0 {
				t.Fatalf("sent %d messages with unusable content", e.Transport.Calls())
			}
			if tt.wantErr {
				if err == nil || got.State != ledger.Claimed || got.Version != 1 || !e.HasContent(t, in.Key()) {
					t.Fatalf("err %v state %s v%d", err, got.State, got.Version)
				}
				return
			}
			if err != nil || res.Outcome != ledger.OutcomeQuarantined || got.State != ledger.Quarantined {
				t.Fatalf("dispatch: %s %v, row %s", res.Outcome, err, got.State)
			}
			if got.Last().Reason == "" || got.Attempts != 0 || got.Last().Attempt != 0 {
				t.Fatalf("quarantine event %+v", got.Last())
			}
			if e.HasContent(t, in.Key()) {
				t.Fatal("content kept after quarantine")
			}
			if got.OpenDue().IsZero() {
				t.Fatal("quarantined row is not in the open index")
			}
			if strings.Contains(got.Reason, "attacker") || strings.Contains(got.Last().Reason, "@") {
				t.Fatalf("reason leaks content: %q", got.Last().Reason)
			}
			ledgertest.MustVerify(t, got)
		})
	}
}

func TestDispatchWithoutTransport(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	delete(e.Cases.Transports, ledger.SMS)
	in, _, _ := e.Claim(t, 32, ledger.SMS, ledger.OutcomeClaimed)
	_, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if !errors.Is(err, ledger.ErrNoTransport) {
		t.Fatalf("want ErrNoTransport, got %v", err)
	}
	got := e.Get(t, in.Key())
	if got.State != ledger.Claimed || got.Version != 1 || !e.HasContent(t, in.Key()) || e.Transport.Calls() != 0 {
		t.Fatalf("row %s v%d, calls %d", got.State, got.Version, e.Transport.Calls())
	}
}

func TestDispatchMissingRow(t *testing.T) {
	e := ledgertest.NewScenario(t)
	_, err := e.Cases.Dispatch(context.Background(), ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "nope", Channel: ledger.Email}.Key(), "dispatch/req-1")
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("want ErrNotFound, got %v", err)
	}
}

func TestDispatchAfterExpiry(t *testing.T) {
	ctx := context.Background()
	margin := ledger.DefaultPolicy().ExpiryMargin
	tests := []struct {
		name    string
		advance time.Duration
		want    ledger.Outcome
	}{
		{"just before the margin", ledgertest.ScenarioTTL - margin - time.Second, ledger.OutcomeAccepted},
		{"at the margin", ledgertest.ScenarioTTL - margin, ledger.OutcomeExpired},
		{"past expiry", ledgertest.ScenarioTTL + time.Hour, ledger.OutcomeExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, _, _ := e.Claim(t, 33, ledger.SMS, ledger.OutcomeClaimed)
			e.Clock.Advance(tt.advance)
			res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			if tt.want == ledger.OutcomeExpired {
				got := e.Get(t, in.Key())
				if got.State != ledger.Expired || got.Reason == "" || e.Transport.Calls() != 0 || e.HasContent(t, in.Key()) {
					t.Fatalf("row %s reason %q calls %d", got.State, got.Reason, e.Transport.Calls())
				}
			}
		})
	}
}

// expiringStore moves the clock past the challenge's expiry between
// dispatch's read and its conditional write, so only the database
// condition (NotExpiredBy) can stop the send.
type expiringStore struct {
	ledger.Store
	clock *ledgertest.Clock
	by    time.Duration
	done  bool
}

func (s *expiringStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	if c.Next.State == ledger.Dispatching && !s.done {
		s.done = true
		s.clock.Advance(s.by)
		// The service computed the condition from its earlier clock; the
		// store checks against the row, so pretend the condition used now.
		c.NotExpiredBy = s.clock.Now()
	}
	return s.Store.Apply(ctx, c)
}

func TestDispatchExpiryConditionInTheWrite(t *testing.T) {
	ctx := context.Background()
	e := ledgertest.NewScenario(t)
	in, _, _ := e.Claim(t, 34, ledger.Email, ledger.OutcomeClaimed)
	e.Cases.Store = &expiringStore{Store: e.Store, clock: e.Clock, by: 2 * ledgertest.ScenarioTTL}
	res, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || res.Outcome != ledger.OutcomeExpired {
		t.Fatalf("dispatch: %s %v, want expired", res.Outcome, err)
	}
	got := e.Get(t, in.Key())
	if got.State != ledger.Expired || e.Transport.Calls() != 0 || e.HasContent(t, in.Key()) {
		t.Fatalf("row %s, calls %d", got.State, e.Transport.Calls())
	}
}

// TestDispatchRowReadsTheRowOnceAndToleratesAStaleRecord: a stream record
// costs one consistent read of the row, which the decision rests on
// (docs/design.md, "A function acts only on what its own source delivered").
func TestDispatchRowReadsTheRowOnceAndToleratesAStaleRecord(t *testing.T) {
	e := ledgertest.NewScenario(t)
	counting := &ledgertest.CountingStore{Store: e.Cases.Store}
	e.Cases.Store = counting
	ctx := context.Background()
	_, _, claimed := e.Claim(t, 5, ledger.Email, ledger.OutcomeClaimed)
	counting.Gets = 0
	res, err := e.Cases.DispatchRow(ctx, claimed, "dispatch/req-1")
	if err != nil || res.Outcome != ledger.OutcomeAccepted || counting.Gets != 1 {
		t.Fatalf("fresh row: %s %v, %d reads; want accepted after one read", res.Outcome, err, counting.Gets)
	}
	// The same stream record again: its image still says claimed.
	res, err = e.Cases.DispatchRow(ctx, claimed, "dispatch/req-2")
	if err != nil || res.Outcome != ledger.OutcomeSkipped || res.Entry.State != ledger.Accepted {
		t.Fatalf("stale row: %s %v (row %s)", res.Outcome, err, res.Entry.State)
	}
	if got := e.Transport.Recorded(claimed.Key); got != 1 {
		t.Fatalf("provider recorded %d", got)
	}
}

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

// dispatchFirst returns a hook in which other dispatches key to accepted.
func dispatchFirst(t *testing.T, other *ledgertest.UseCases, key string) func() {
	return func() {
		if r, err := other.Dispatch(context.Background(), key, "dispatch/other"); err != nil || r.Outcome != ledger.OutcomeAccepted {
			t.Errorf("other dispatch: %s %v", r.Outcome, err)
		}
	}
}

// mismatchFirst returns a hook in which other claims in again with changed
// content: a content-mismatch event on the row.
func mismatchFirst(t *testing.T, other *ledgertest.UseCases, in ledger.Intent) func() {
	return func() {
		m := ledgertest.Message(60, ledger.Email)
		m.Body = "tampered"
		bad := in
		bad.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
		if r, err := other.Claim(context.Background(), bad, ledgertest.Seal(m), "claim/other"); err != nil || r.Outcome != ledger.OutcomeMismatch {
			t.Errorf("mismatch claim: %s %v", r.Outcome, err)
		}
	}
}

// Dispatch must stay harmless when another writer changes the row between
// its read and its conditional write: the conditional write decides, a lost
// race is a skip (not an error that fails the batch), and a write that did
// not change the state (a content-mismatch event) must not cost the send.
func TestDispatchInterleavings(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// wire installs the interleaving on cases (the worker under test);
		// other is an untouched set of use cases over the same stores.
		wire      func(t *testing.T, e *ledgertest.Scenario, cases *ledgertest.UseCases, other *ledgertest.UseCases, in ledger.Intent)
		want      ledger.Outcome
		wantState ledger.State
		wantCalls int
	}{
		{"another worker dispatched and purged the content first", func(t *testing.T, e *ledgertest.Scenario, cases, other *ledgertest.UseCases, in ledger.Intent) {
			cases.Content = &hookContent{ContentStore: e.Content, beforeGet: dispatchFirst(t, other, in.Key())}
		}, ledger.OutcomeSkipped, ledger.Accepted, 1},
		{"another worker expired the row first", func(t *testing.T, e *ledgertest.Scenario, cases, other *ledgertest.UseCases, in ledger.Intent) {
			e.Clock.Advance(time.Hour)
			cases.Store = &hookStore{Store: e.Store, afterGet: func() {
				if _, err := other.ExpireSweep(ctx, "expire/other", 10); err != nil {
					t.Error(err)
				}
			}}
		}, ledger.OutcomeSkipped, ledger.Expired, 0},
		{"another worker won the move to dispatching", func(t *testing.T, e *ledgertest.Scenario, cases, other *ledgertest.UseCases, in ledger.Intent) {
			cases.Store = &hookStore{Store: e.Store, beforeBegin: dispatchFirst(t, other, in.Key())}
		}, ledger.OutcomeSkipped, ledger.Accepted, 1},
		{"a content-mismatch event landed between read and write", func(t *testing.T, e *ledgertest.Scenario, cases, other *ledgertest.UseCases, in ledger.Intent) {
			cases.Store = &hookStore{Store: e.Store, beforeBegin: mismatchFirst(t, other, in)}
		}, ledger.OutcomeAccepted, ledger.Accepted, 1},
		{"a content-mismatch event landed while the send was in flight", func(t *testing.T, e *ledgertest.Scenario, cases, other *ledgertest.UseCases, in ledger.Intent) {
			var once sync.Once
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior {
				once.Do(mismatchFirst(t, other, in))
				return ledgertest.Accept
			}
		}, ledger.OutcomeAccepted, ledger.Accepted, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, _, _ := e.Claim(t, 60, ledger.Email, ledger.OutcomeClaimed)
			cases, other := *e.Cases, *e.Cases
			tt.wire(t, e, &cases, &other, in)
			res, err := cases.Dispatch(ctx, in.Key(), "dispatch/me")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			got := e.Get(t, in.Key())
			if got.State != tt.wantState || e.Transport.Calls() != tt.wantCalls || e.Transport.Recorded(in.Key()) != tt.wantCalls {
				t.Fatalf("row %s, calls %d, recorded %d", got.State, e.Transport.Calls(), e.Transport.Recorded(in.Key()))
			}
			if s := e.Transport.Sent; len(s) == 1 && s[0].ContentHash != in.ContentHash {
				t.Fatal("sent the mismatching content")
			}
			if e.HasContent(t, in.Key()) {
				t.Fatal("content left after the row closed")
			}
			ledgertest.CheckHistory(t, got)
		})
	}
}

// The write that starts an attempt is conditioned on the worker's clock at
// that write, not on a reading taken before the content was fetched (found
// by the simulator, sim/: the content read, decryption and budget booking
// between the two are network calls, and a send started past expires_at
// minus the margin by the sender's own clock).
func TestAttemptStartsOnTheClockOfItsWrite(t *testing.T) {
	ctx := context.Background()
	t.Run("dispatch", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		in, _, _ := e.Claim(t, 1, ledger.Email, ledger.OutcomeClaimed)
		slow := *e.Cases
		// The content read returns when the deadline has just passed.
		slow.Content = &hookContent{ContentStore: e.Content, beforeGet: func() {
			e.Clock.Advance(ledgertest.ScenarioTTL - e.Cases.Policy.ExpiryMargin)
		}}
		res, err := slow.Dispatch(ctx, in.Key(), "dispatch/slow")
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != ledger.OutcomeExpired || e.Transport.Calls() != 0 {
			t.Fatalf("outcome %s with %d sends; want expired and none", res.Outcome, e.Transport.Calls())
		}
		ledgertest.MustVerify(t, e.Get(t, in.Key()))
	})
	t.Run("reconcile same-key retry", func(t *testing.T) {
		e := ledgertest.NewScenario(t)
		e.Transport.Window = 24 * time.Hour
		in := e.StuckDispatching(t, 1, ledger.Email, ledgertest.FailBeforeReach)
		calls := e.Transport.Calls()
		// The lease has passed: the sweep marks the row unknown and retries
		// it under the same key; the retry's content read returns when the
		// deadline has just passed.
		e.Clock.Advance(e.Cases.Policy.Lease + time.Second)
		deadline := e.Get(t, in.Key()).ExpiresAt.Add(-e.Cases.Policy.ExpiryMargin)
		slow := *e.Cases
		slow.Content = &hookContent{ContentStore: e.Content, beforeGet: func() {
			e.Clock.Advance(deadline.Sub(e.Clock.Now()))
		}}
		if _, err := slow.Reconcile(ctx, "reconcile/slow", 10); err != nil {
			t.Fatal(err)
		}
		if got := e.Transport.Calls(); got != calls {
			t.Fatalf("%d sends after the deadline passed during the content read; want none", got-calls)
		}
		ledgertest.MustVerify(t, e.Get(t, in.Key()))
	})
}

func TestAcknowledgementArrivingAfterTheLeaseResolvesUnknown(t *testing.T) {
	e := ledgertest.NewScenario(t)
	ctx := context.Background()
	in, _, _ := e.Claim(t, 3, ledger.SMS, ledger.OutcomeClaimed)
	swept := false
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior {
		// The provider is slow: the lease runs out and reconcile marks the
		// row unknown while the request is still in flight.
		e.Clock.Advance(e.Cases.Policy.Lease + time.Second)
		rep, err := e.Cases.Reconcile(ctx, "reconcile/req-1", 10)
		swept = err == nil && rep.Actions["dispatching->unknown"] == 1
		return ledgertest.Accept
	}
	d, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || !swept {
		t.Fatalf("dispatch: %v, swept %v", err, swept)
	}
	row := e.Get(t, in.Key())
	last := row.Last()
	if row.State != ledger.Accepted || row.AckID == "" || (last.From != ledger.Unknown && last.From != ledger.Quarantined) || !strings.Contains(last.Reason, "after the lease expired") {
		t.Fatalf("row %s ack %q last %s->%s %q (outcome %s)", row.State, row.AckID, last.From, last.To, last.Reason, d.Outcome)
	}
	ledgertest.MustVerify(t, row)
}

// A row quarantined at dispatch says why in its current-state reason, not
// only in its history (found by the release gate: it kept "intent claimed").
func TestDispatchQuarantineRecordsItsReasonOnTheRow(t *testing.T) {
	ctx := context.Background()
	env := ledgertest.NewEnv(&memstore.Store{})
	in, _ := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	other := ledgertest.Message(2, ledger.Email) // sealed content that does not match the hash
	if _, err := env.Cases.Claim(ctx, in, ledgertest.Seal(other), "claim/test"); err != nil {
		t.Fatal(err)
	}
	res, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != ledger.OutcomeQuarantined || res.Entry.State != ledger.Quarantined {
		t.Fatalf("outcome %s state %s", res.Outcome, res.Entry.State)
	}
	if !strings.Contains(res.Entry.Reason, "nothing sent") || res.Entry.Reason != res.Entry.Last().Reason {
		t.Fatalf("row reason %q, last event reason %q", res.Entry.Reason, res.Entry.Last().Reason)
	}
	if env.Transport.Calls() != 0 {
		t.Fatalf("%d sends", env.Transport.Calls())
	}
}

// A deferred row whose earlier attempt the provider reports it took is not
// sent again: a same-key retry would reach an address that may have
// hard-bounced.
func TestNoRetryAfterProviderEvidence(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Events = true
	in, _, _ := e.Claim(t, 5, ledger.Email, ledger.OutcomeClaimed)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.Throttle }
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
	calls := e.Transport.Calls()
	// The provider later reports a hard bounce of a message with this key.
	p := ledger.ProviderEvent{
		Key: in.Key(), Channel: ledger.Email, Kind: ledger.KindBounced, Type: "Bounce", Detail: "Permanent/General",
		MessageID: "msg-earlier", At: e.Clock.Now(), Permanent: true,
	}
	e.Prove(t, &p)
	row := e.Record(t, p, ledger.OutcomeResolved)
	e.Clock.Advance(time.Minute)
	e.Transport.Script = nil
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeSkipped)
	if row.State != ledger.Accepted || e.Transport.Calls() != calls {
		t.Fatalf("row %s, %d more sends", row.State, e.Transport.Calls()-calls)
	}
}

// A provider event that arrives while the attempt is in flight stays in the
// history when the attempt's own answer defers the row (not sent for now):
// the next dispatch finds the evidence, accepts the row on it with its
// deferral cleared, and sends nothing again.
func TestDeferredRowWithProviderEvidenceIsNotSentAgain(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Events = true
	in, _, _ := e.Claim(t, 6, ledger.Email, ledger.OutcomeClaimed)
	p := ledger.ProviderEvent{
		Key: in.Key(), Channel: ledger.Email, Kind: ledger.KindProviderSent, Type: "Send",
		MessageID: "msg-in-flight", At: e.Clock.Now(),
	}
	e.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
		p.Attempt, p.Proof = s.Attempt, s.Proof // the provider's event carries what the send did
		e.Record(t, p, ledger.OutcomeRecorded)
		return ledgertest.Throttle
	}
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeDeferred)
	if row := e.Get(t, in.Key()); row.State != ledger.Deferred || !row.Holds(p.ID()) {
		t.Fatalf("after the throttled attempt: %s, holds the event: %v", row.State, row.Holds(p.ID()))
	}
	calls := e.Transport.Calls()
	e.Transport.Script = nil
	e.Clock.Advance(time.Hour)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeSkipped)
	row := e.Get(t, in.Key())
	if row.State != ledger.Accepted || row.AckID != p.MessageID || e.Transport.Calls() != calls {
		t.Fatalf("row %s ack %q, %d more sends", row.State, row.AckID, e.Transport.Calls()-calls)
	}
	if !row.NextAttemptAt.IsZero() || !row.SlotAt.IsZero() || row.NotSentCode != "" {
		t.Fatalf("accepted row keeps its deferral: next %v slot %v code %q", row.NextAttemptAt, row.SlotAt, row.NotSentCode)
	}
	if !strings.Contains(row.Last().Reason, "dispatch: not sent again") {
		t.Fatalf("last reason %q", row.Last().Reason)
	}
}
