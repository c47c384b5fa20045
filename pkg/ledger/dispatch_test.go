package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestDispatchOutcomes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name        string
		behavior    ledgertest.Behavior
		want        ledger.DispatchOutcome
		state       ledger.State
		reason      string // prefix
		ackID       string
		keepContent bool
		recorded    int
	}{
		{"accepted", ledgertest.Accept, ledger.DispatchAccepted, ledger.Accepted, "transport accepted", "msg-1", false, 1},
		{"rejected", ledgertest.Reject, ledger.DispatchRejected, ledger.Rejected, "transport rejected: destination suppressed", "", false, 0},
		{"lost acknowledgement", ledgertest.AcceptThenDrop, ledger.DispatchUnknown, ledger.Unknown, "no acknowledgement: ", "", true, 1},
		{"never reached the provider", ledgertest.FailBeforeReach, ledger.DispatchUnknown, ledger.Unknown, "no acknowledgement: ", "", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return tt.behavior }
			in, _, _ := e.claim(t, 30, ledger.Email, ledger.ClaimCreated)
			e.Clock.Advance(time.Minute)
			start := e.Clock.Now()

			res, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-9")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			got := e.get(t, in.Key())
			if got.State != tt.state || got.AckID != tt.ackID || !strings.HasPrefix(got.Reason, tt.reason) {
				t.Fatalf("row %s ack %q reason %q", got.State, got.AckID, got.Reason)
			}
			if got.Attempts != 1 || !got.FirstAttemptAt.Equal(start) || !got.LeaseUntil.IsZero() {
				t.Fatalf("attempts %d first %v lease %v", got.Attempts, got.FirstAttemptAt, got.LeaseUntil)
			}
			if tt.state == ledger.Unknown {
				if want := start.Add(e.Svc.Policy.RecheckAfter); !got.NextCheckAt.Equal(want) || !got.OpenDue().Equal(want) {
					t.Fatalf("NextCheckAt %v, want %v", got.NextCheckAt, want)
				}
			}
			if p := historyPath(got); p != "none>claimed claimed>dispatching dispatching>"+string(tt.state) {
				t.Fatalf("history %s", p)
			}
			if e.hasContent(t, in.Key()) != tt.keepContent {
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
			mustVerify(t, got)

			// A duplicate stream record or invocation is harmless.
			again, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-10")
			if err != nil || again.Outcome != ledger.DispatchSkipped || e.Transport.Calls() != 1 {
				t.Fatalf("duplicate dispatch: %s %v, calls %d", again.Outcome, err, e.Transport.Calls())
			}
			if e.get(t, in.Key()).Version != got.Version {
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
		prepare func(e *env, key string)
		// wantErr: dispatch fails and the row stays claimed with its
		// content; otherwise the row is quarantined and the content purged.
		wantErr bool
	}{
		{"content missing", func(e *env, key string) { _ = e.Content.Delete(ctx, e.contentKey(key)) }, false},
		{"content cannot be opened", func(e *env, key string) {
			_ = e.Content.Delete(ctx, e.contentKey(key))
			_, _ = e.Content.Put(ctx, e.contentKey(key), []byte("not a sealed message"), ledgertest.Epoch.Add(ttl))
		}, false},
		{"opener refuses to authenticate", func(e *env, _ string) {
			e.Svc.Opener = failingOpener{fmt.Errorf("kms: bad ciphertext: %w", ledger.ErrContentUnavailable)}
		}, false},
		{"opened content does not match the hash", func(e *env, key string) {
			_ = e.Content.Delete(ctx, e.contentKey(key))
			_, _ = e.Content.Put(ctx, e.contentKey(key), ledgertest.Seal(otherMessage), ledgertest.Epoch.Add(ttl))
		}, false},
		{"opener unavailable (transient)", func(e *env, _ string) {
			e.Svc.Opener = failingOpener{errors.New("kms: throttled")}
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, _, _ := e.claim(t, 31, ledger.Email, ledger.ClaimCreated)
			tt.prepare(e, in.Key())
			res, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
			got := e.get(t, in.Key())
			if e.Transport.Calls() != 0 {
				t.Fatalf("sent %d messages with unusable content", e.Transport.Calls())
			}
			if tt.wantErr {
				if err == nil || got.State != ledger.Claimed || got.Version != 1 || !e.hasContent(t, in.Key()) {
					t.Fatalf("err %v state %s v%d", err, got.State, got.Version)
				}
				return
			}
			if err != nil || res.Outcome != ledger.DispatchQuarantined || got.State != ledger.Quarantined {
				t.Fatalf("dispatch: %s %v, row %s", res.Outcome, err, got.State)
			}
			if got.Last().Reason == "" || got.Attempts != 0 || got.Last().Attempt != 0 {
				t.Fatalf("quarantine event %+v", got.Last())
			}
			if e.hasContent(t, in.Key()) {
				t.Fatal("content kept after quarantine")
			}
			if got.OpenDue().IsZero() {
				t.Fatal("quarantined row is not in the open index")
			}
			if strings.Contains(got.Reason, "attacker") || strings.Contains(got.Last().Reason, "@") {
				t.Fatalf("reason leaks content: %q", got.Last().Reason)
			}
			mustVerify(t, got)
		})
	}
}

func TestDispatchWithoutTransport(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	delete(e.Svc.Transports, ledger.SMS)
	in, _, _ := e.claim(t, 32, ledger.SMS, ledger.ClaimCreated)
	_, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if !errors.Is(err, ledger.ErrNoTransport) {
		t.Fatalf("want ErrNoTransport, got %v", err)
	}
	got := e.get(t, in.Key())
	if got.State != ledger.Claimed || got.Version != 1 || !e.hasContent(t, in.Key()) || e.Transport.Calls() != 0 {
		t.Fatalf("row %s v%d, calls %d", got.State, got.Version, e.Transport.Calls())
	}
}

func TestDispatchMissingRow(t *testing.T) {
	e := newEnv(t)
	_, err := e.Svc.Dispatch(context.Background(), ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "nope", Channel: ledger.Email}.Key(), "dispatch/req-1")
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
		want    ledger.DispatchOutcome
	}{
		{"just before the margin", ttl - margin - time.Second, ledger.DispatchAccepted},
		{"at the margin", ttl - margin, ledger.DispatchExpired},
		{"past expiry", ttl + time.Hour, ledger.DispatchExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, _, _ := e.claim(t, 33, ledger.SMS, ledger.ClaimCreated)
			e.Clock.Advance(tt.advance)
			res, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
			if err != nil || res.Outcome != tt.want {
				t.Fatalf("dispatch: %s %v, want %s", res.Outcome, err, tt.want)
			}
			if tt.want == ledger.DispatchExpired {
				got := e.get(t, in.Key())
				if got.State != ledger.Expired || got.Reason == "" || e.Transport.Calls() != 0 || e.hasContent(t, in.Key()) {
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
	e := newEnv(t)
	in, _, _ := e.claim(t, 34, ledger.Email, ledger.ClaimCreated)
	e.Svc.Store = &expiringStore{Store: e.Store, clock: e.Clock, by: 2 * ttl}
	res, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || res.Outcome != ledger.DispatchExpired {
		t.Fatalf("dispatch: %s %v, want expired", res.Outcome, err)
	}
	got := e.get(t, in.Key())
	if got.State != ledger.Expired || e.Transport.Calls() != 0 || e.hasContent(t, in.Key()) {
		t.Fatalf("row %s, calls %d", got.State, e.Transport.Calls())
	}
}
