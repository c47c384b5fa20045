package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestClaimNewIntent(t *testing.T) {
	e := newEnv(t)
	in, sealed, got := e.claim(t, 1, ledger.Email, ledger.ClaimCreated)
	if got.Key != in.Key() || got.State != ledger.Claimed || got.Version != 1 || got.ContentHash != in.ContentHash {
		t.Fatalf("row %+v", got)
	}
	if !got.ExpiresAt.Equal(in.ExpiresAt) || !got.CreatedAt.Equal(ledgertest.Epoch) {
		t.Fatalf("expires %v created %v", got.ExpiresAt, got.CreatedAt)
	}
	if want := ledgertest.Epoch.Add(e.Svc.Policy.Retention); !got.RetainUntil.Equal(want) {
		t.Fatalf("retain until %v, want %v", got.RetainUntil, want)
	}
	stored, err := e.Content.Get(context.Background(), e.contentKey(in.Key()))
	if err != nil || string(stored) != string(sealed) {
		t.Fatalf("content %q %v", stored, err)
	}
	mustVerify(t, got)
}

func TestClaimExpiredOnArrival(t *testing.T) {
	margin := ledger.DefaultPolicy().ExpiryMargin
	tests := []struct {
		name    string
		expires time.Duration // relative to now
		wantExp bool
	}{
		{"long expired", -time.Hour, true},
		{"expired a nanosecond ago", -time.Nanosecond, true},
		{"expires exactly now", 0, true},
		{"inside the margin", margin / 2, true},
		{"exactly at the margin", margin, true},
		{"just past the margin", margin + time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			e := newEnv(t)
			in, sealed := ledgertest.Intent(2, ledger.SMS, e.Clock.Now(), tt.expires)
			res, err := e.Svc.Claim(ctx, in, sealed, "claim/req-1")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantExp {
				if res.Outcome != ledger.ClaimCreated || !e.hasContent(t, in.Key()) {
					t.Fatalf("outcome %s, content %v", res.Outcome, e.hasContent(t, in.Key()))
				}
				return
			}
			if res.Outcome != ledger.ClaimExpired {
				t.Fatalf("outcome %s, want expired", res.Outcome)
			}
			got := e.get(t, in.Key())
			if got.State != ledger.Expired || got.Reason == "" || got.Last().Reason != got.Reason {
				t.Fatalf("state %s reason %q last %q", got.State, got.Reason, got.Last().Reason)
			}
			if p := historyPath(got); p != "none>expired" {
				t.Fatalf("history %s", p)
			}
			if e.Content.Len() != 0 {
				t.Fatal("sealed content stored for an expired intent")
			}
			d, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
			if err != nil || d.Outcome != ledger.DispatchSkipped {
				t.Fatalf("dispatch: %s %v", d.Outcome, err)
			}
			// A redelivery of the same intent is a duplicate; it does not
			// store content either.
			r, err := e.Svc.Claim(ctx, in, sealed, "claim/req-2")
			if err != nil || r.Outcome != ledger.ClaimDuplicate {
				t.Fatalf("redelivery: %s %v", r.Outcome, err)
			}
			if e.Transport.Calls() != 0 || e.Content.Len() != 0 {
				t.Fatalf("sent %d, content %d", e.Transport.Calls(), e.Content.Len())
			}
			mustVerify(t, e.get(t, in.Key()))
		})
	}
}

func TestClaimRedeliverySameContent(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		prepare   func(t *testing.T, e *env, key string)
		wantState ledger.State
	}{
		{"claimed", func(*testing.T, *env, string) {}, ledger.Claimed},
		{"accepted", func(t *testing.T, e *env, key string) {
			if _, err := e.Svc.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Accepted},
		{"unknown", func(t *testing.T, e *env, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			if _, err := e.Svc.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Unknown},
		{"expired while claimed", func(t *testing.T, e *env, key string) {
			e.Clock.Advance(time.Hour)
			if _, err := e.Svc.ExpireSweep(ctx, "expire/req-1", 10); err != nil {
				t.Fatal(err)
			}
		}, ledger.Expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, sealed, _ := e.claim(t, 3, ledger.Email, ledger.ClaimCreated)
			tt.prepare(t, e, in.Key())
			before := e.get(t, in.Key())
			if before.State != tt.wantState {
				t.Fatalf("prepared state %s, want %s", before.State, tt.wantState)
			}
			hadContent := e.hasContent(t, in.Key())
			calls := e.Transport.Calls()
			for i := range 3 {
				res, err := e.Svc.Claim(ctx, in, sealed, ledger.Worker("claim/redelivery-"+string(rune('a'+i))))
				if err != nil || res.Outcome != ledger.ClaimDuplicate {
					t.Fatalf("redelivery %d: %s %v", i, res.Outcome, err)
				}
				if res.Entry.Version != before.Version || res.Entry.State != before.State {
					t.Fatalf("redelivery returned v%d %s, want v%d %s", res.Entry.Version, res.Entry.State, before.Version, before.State)
				}
			}
			after := e.get(t, in.Key())
			if after.Version != before.Version || len(after.History) != len(before.History) || after.Mismatches != 0 {
				t.Fatalf("redelivery wrote: v%d->v%d, history %d->%d", before.Version, after.Version, len(before.History), len(after.History))
			}
			if e.hasContent(t, in.Key()) != hadContent {
				t.Fatalf("redelivery changed the content store (had %v)", hadContent)
			}
			if e.Transport.Calls() != calls {
				t.Fatal("redelivery sent")
			}
		})
	}
}

func TestClaimContentMismatch(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		prepare func(t *testing.T, e *env, key string)
	}{
		{"while claimed", func(*testing.T, *env, string) {}},
		{"after accepted", func(t *testing.T, e *env, key string) {
			if _, err := e.Svc.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, sealed, _ := e.claim(t, 4, ledger.Email, ledger.ClaimCreated)
			tt.prepare(t, e, in.Key())
			before := e.get(t, in.Key())
			calls := e.Transport.Calls()

			for n := 1; n <= 2; n++ {
				m := ledgertest.Message(4, ledger.Email)
				m.Body += strings.Repeat(" (reworded)", n)
				changed := in
				changed.TemplateVersion = "4"
				changed.ContentHash = ledger.ContentHash(changed.TemplateID, changed.TemplateVersion, m)
				res, err := e.Svc.Claim(ctx, changed, ledgertest.Seal(m), ledger.Worker("claim/mismatch"))
				if err != nil || res.Outcome != ledger.ClaimMismatch {
					t.Fatalf("mismatch %d: %s %v", n, res.Outcome, err)
				}
				got := e.get(t, in.Key())
				if got.Mismatches != n {
					t.Fatalf("Mismatches = %d, want %d", got.Mismatches, n)
				}
				if got.State != before.State || got.ContentHash != in.ContentHash || got.TemplateVersion != in.TemplateVersion {
					t.Fatalf("row overwritten: %s %s tv %s", got.State, got.ContentHash, got.TemplateVersion)
				}
				if got.Version != before.Version+int64(n) || len(got.History) != len(before.History)+n {
					t.Fatalf("v%d h%d after %d mismatches (before v%d h%d)", got.Version, len(got.History), n, before.Version, len(before.History))
				}
				last := got.Last()
				if last.Kind != ledger.KindContentMismatch || last.From != before.State || last.To != before.State ||
					last.ContentHash != changed.ContentHash || last.Worker != "claim/mismatch" ||
					!strings.Contains(last.Reason, changed.ContentHash) || !strings.Contains(last.Reason, in.ContentHash) {
					t.Fatalf("mismatch event %+v", last)
				}
				if strings.Contains(last.Reason, ledgertest.Canary) || strings.Contains(last.Reason, "@") {
					t.Fatalf("mismatch reason leaks content: %q", last.Reason)
				}
				mustVerify(t, got)
			}
			if before.State == ledger.Claimed {
				// The stored content is still the original, and dispatch
				// sends the original once.
				stored, _ := e.Content.Get(ctx, e.contentKey(in.Key()))
				if string(stored) != string(sealed) {
					t.Fatal("content overwritten by a mismatching intent")
				}
				if _, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1"); err != nil {
					t.Fatal(err)
				}
				if s := e.Transport.Sent; len(s) != 1 || s[0].ContentHash != in.ContentHash {
					t.Fatalf("sent %+v", s)
				}
			} else if e.Transport.Calls() != calls || e.Content.Len() != 0 {
				t.Fatalf("mismatch after accepted sent %d or stored content %d", e.Transport.Calls()-calls, e.Content.Len())
			}
		})
	}
}
