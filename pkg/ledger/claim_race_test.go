package ledger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

// createHookStore runs a hook once, just before the first Create: another
// consumer claims the same identity between this one's read and its write.
type createHookStore struct {
	ledger.Store
	once         sync.Once
	beforeCreate func()
}

func (s *createHookStore) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	s.once.Do(s.beforeCreate)
	return s.Store.Create(ctx, e)
}

func TestClaimLosesCreateRace(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name         string
		otherBody    string // "" means the same content
		wantOutcome  ledger.ClaimOutcome
		wantMismatch int
	}{
		{"same content", "", ledger.ClaimDuplicate, 0},
		{"different content", "other wording", ledger.ClaimMismatch, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, sealed := ledgertest.Intent(95, ledger.Email, e.Clock.Now(), ttl)
			otherIn, otherSealed := in, sealed
			if tt.otherBody != "" {
				m := ledgertest.Message(95, ledger.Email)
				m.Body = tt.otherBody
				otherIn.ContentHash, otherSealed = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m), ledgertest.Seal(m)
			}
			other := *e.Svc
			svc := *e.Svc
			svc.Store = &createHookStore{Store: e.Store, beforeCreate: func() {
				if r, err := other.Claim(ctx, otherIn, otherSealed, "claim/other"); err != nil || r.Outcome != ledger.ClaimCreated {
					t.Errorf("other claim: %s %v", r.Outcome, err)
				}
			}}
			res, err := svc.Claim(ctx, in, sealed, "claim/me")
			if err != nil || res.Outcome != tt.wantOutcome {
				t.Fatalf("claim: %s %v, want %s", res.Outcome, err, tt.wantOutcome)
			}
			row := e.get(t, in.Key())
			if row.ContentHash != otherIn.ContentHash || row.Mismatches != tt.wantMismatch || e.Content.Len() != 1 {
				t.Fatalf("row hash %s mismatches %d blobs %d", row.ContentHash, row.Mismatches, e.Content.Len())
			}
			checkHistory(t, row)
			// Whatever blob ended up stored, nothing that does not match
			// the row's content hash is ever sent.
			if _, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
			for _, s := range e.Transport.Sent {
				if ledger.ContentHash(in.TemplateID, in.TemplateVersion, s.Message) != row.ContentHash || s.ContentHash != row.ContentHash {
					t.Fatal("sent content that does not match the row")
				}
			}
			if tt.otherBody == "" && e.Transport.Recorded(in.Key()) != 1 {
				t.Fatalf("recorded %d", e.Transport.Recorded(in.Key()))
			}
		})
	}
}

func TestReconcileRetryWithoutContent(t *testing.T) {
	e := newEnv(t)
	e.Transport.Window = 24 * time.Hour
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.FailBeforeReach }
	in, _, _ := e.claim(t, 96, ledger.SMS, ledger.ClaimCreated)
	mustDispatch(t, e, in.Key(), ledger.DispatchUnknown)
	_ = e.Content.Delete(context.Background(), e.contentKey(in.Key()))
	e.Clock.Advance(time.Minute)
	reconcile(t, e)
	got := e.get(t, in.Key())
	if got.State != ledger.Quarantined || !strings.Contains(got.Reason, "content unavailable") || e.Transport.Calls() != 1 {
		t.Fatalf("row %s %q, calls %d", got.State, got.Reason, e.Transport.Calls())
	}
	checkHistory(t, got)
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ledger.Policy)
		ok     bool
	}{
		{"default", func(*ledger.Policy) {}, true},
		{"zero margin", func(p *ledger.Policy) { p.ExpiryMargin = 0 }, true},
		{"no version", func(p *ledger.Policy) { p.Version = "" }, false},
		{"zero lease", func(p *ledger.Policy) { p.Lease = 0 }, false},
		{"negative margin", func(p *ledger.Policy) { p.ExpiryMargin = -time.Second }, false},
		{"zero retention", func(p *ledger.Policy) { p.Retention = 0 }, false},
		{"zero attempts", func(p *ledger.Policy) { p.MaxAttempts = 0 }, false},
		{"zero recheck", func(p *ledger.Policy) { p.RecheckAfter = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ledger.DefaultPolicy()
			tt.mutate(&p)
			if err := p.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestRejectionIsDistinguishable(t *testing.T) {
	err := error(&ledger.Rejection{Reason: "invalid destination"})
	wrapped := errors.Join(errors.New("sms"), err)
	var rej *ledger.Rejection
	if !errors.As(wrapped, &rej) || rej.Reason != "invalid destination" || err.Error() != "transport rejected: invalid destination" {
		t.Fatalf("%v", wrapped)
	}
}
