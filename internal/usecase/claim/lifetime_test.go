package claim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestClaimRefusesAChallengeThatOutlivesItsPurpose: an intent whose
// challenge expires further past the claim's time than the policy's
// maximum lifetime (one expiring in 2099), or that says it was issued
// after the claim, is refused as invalid, with its reason, and no row, no
// content and no newest-challenge note exist: a tampered or buggy intent
// that arrives first cannot block the genuine one or shadow a player's
// later challenges.
func TestClaimRefusesAChallengeThatOutlivesItsPurpose(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		edit   func(in *ledger.Intent, now time.Time)
		field  string
		reason string
	}{
		{"expires in 2099", func(in *ledger.Intent, now time.Time) {
			in.ExpiresAt = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
		}, "expires_at", "more than 1h0m0s after the claim's time"},
		{"a millisecond past the maximum", func(in *ledger.Intent, now time.Time) {
			in.ExpiresAt = now.Add(time.Hour + time.Millisecond)
		}, "expires_at", "more than 1h0m0s after the claim's time"},
		{"issued past the claim by more than the margin", func(in *ledger.Intent, now time.Time) {
			in.IssuedAt = now.Add(30*time.Second + time.Millisecond)
		}, "issued_at", "later than the claim's time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, limits := ledgertest.LimitedScenario(t, ledger.Limits{Supersede: true})
			now := e.Clock.Now()
			in, sealed := ledgertest.Intent(1, ledger.Email, now, 10*time.Minute)
			in.SubjectRef = "acct-7"
			tc.edit(&in, now)
			_, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
			var fe *ledger.FieldError
			if !errors.Is(err, ledger.ErrInvalidIntent) || !errors.As(err, &fe) || fe.Field != tc.field || !strings.HasPrefix(fe.Reason, tc.reason) {
				t.Fatalf("claim = %v, want an invalid %s: %s", err, tc.field, tc.reason)
			}
			if _, err := e.Cases.Store.Get(ctx, in.Key()); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("a refused intent left a row (get: %v)", err)
			}
			if _, ok, _ := limits.Newest(ctx, ledger.SubjectStream{Subject: "acct-7", Purpose: in.Purpose, Channel: in.Channel}); ok {
				t.Fatal("a refused intent was noted as its subject's newest challenge")
			}
		})
	}
	// Exactly at the maximum is a challenge, not a refusal.
	e := ledgertest.NewScenario(t)
	in, sealed := ledgertest.Intent(1, ledger.Email, e.Clock.Now(), time.Hour)
	if res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1"); err != nil || res.Outcome != ledger.OutcomeClaimed {
		t.Fatalf("claim at the maximum lifetime = %+v %v, want claimed", res.Outcome, err)
	}
	// Issued a second after the claim's clock (a producer whose clock runs
	// ahead; the simulator's lifetime-bound found 832 of 2,000 seeds
	// dead-lettering such a fresh intent), or exactly the margin after it:
	// claimed, with the sealed issued_at.
	for i, ahead := range []time.Duration{time.Second, 30 * time.Second} {
		now := e.Clock.Now()
		in, sealed := ledgertest.Intent(2+i, ledger.Email, now, 10*time.Minute)
		in.IssuedAt = now.Add(ahead)
		res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
		if err != nil || res.Outcome != ledger.OutcomeClaimed || !res.Entry.IssuedAt.Equal(in.IssuedAt) {
			t.Fatalf("claim of an intent issued %s after the claim's clock = %+v %v, want claimed", ahead, res.Outcome, err)
		}
	}
}

// TestSupersessionOrdersByIssueTimeNotExpiry: a later challenge with a
// nearer expiry supersedes an earlier one with a farther expiry (ordering
// by expiry would send the earlier one and suppress the later), and an
// earlier challenge that arrives after the later one was claimed is
// superseded too (ordering by claim time would get that wrong).
func TestSupersessionOrdersByIssueTimeNotExpiry(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Supersede: true})
	ctx := context.Background()
	now := e.Clock.Now()
	claim := func(i int, issued, ttl time.Duration) ledger.Intent {
		t.Helper()
		in, sealed := ledgertest.Intent(i, ledger.Email, now, ttl)
		in.SubjectRef, in.IssuedAt = "acct-7", now.Add(issued)
		if _, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1"); err != nil {
			t.Fatal(err)
		}
		return in
	}
	earlier := claim(1, -2*time.Minute, 55*time.Minute) // issued first, expires last
	later := claim(2, -time.Minute, 5*time.Minute)      // issued last, expires first
	late := claim(3, -3*time.Minute, 30*time.Minute)    // issued before both, claimed after both
	for _, in := range []ledger.Intent{earlier, late} {
		row := ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeSuppressed)
		if row.Reason != "superseded by challenge "+later.ChallengeID {
			t.Fatalf("%s: %s %q, want superseded by the challenge issued last", in.ChallengeID, row.State, row.Reason)
		}
	}
	ledgertest.MustDispatch(t, e, later.Key(), ledger.OutcomeAccepted)
	if got := e.Get(t, later.Key()); !got.IssuedAt.Equal(now.Add(-time.Minute)) {
		t.Fatalf("row issued_at = %s, want the sealed %s", got.IssuedAt, now.Add(-time.Minute))
	}
}

// TestVersion1RedeliveryKeepsItsIssueTime: a version-1 intent (no
// issued_at) counts as issued when it was first claimed. Its redelivery,
// claimed after a newer challenge of its subject, must not note it as the
// subject's newest at the redelivery's time: the newer challenge still
// supersedes it. (Found by the simulator's lifetimes-at-bound world, seed
// 2886: the older challenge was sent after the newer one's claim.)
func TestVersion1RedeliveryKeepsItsIssueTime(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Supersede: true})
	ctx := context.Background()
	t0 := e.Clock.Now()
	old, oldSealed := ledgertest.Intent(1, ledger.Email, t0, 10*time.Minute)
	old.SubjectRef, old.IssuedAt = "acct-7", time.Time{} // version 1
	if _, err := e.Cases.Claim(ctx, old, oldSealed, "claim/req-1"); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(6 * time.Second)
	newer, newerSealed := ledgertest.Intent(3, ledger.Email, e.Clock.Now(), 10*time.Minute)
	newer.SubjectRef = "acct-7"
	if _, err := e.Cases.Claim(ctx, newer, newerSealed, "claim/req-2"); err != nil {
		t.Fatal(err)
	}
	e.Clock.Advance(34 * time.Second)
	res, err := e.Cases.Claim(ctx, old, oldSealed, "claim/req-3") // the redelivery
	if err != nil || res.Outcome != ledger.OutcomeDuplicate || !res.Entry.IssuedAt.Equal(t0.Truncate(ledger.Precision)) {
		t.Fatalf("redelivery = %s %v (issued_at %s), want a duplicate issued at the first claim, %s", res.Outcome, err, res.Entry.IssuedAt, t0)
	}
	row := ledgertest.MustDispatch(t, e, old.Key(), ledger.OutcomeSuppressed)
	if row.Reason != "superseded by challenge "+newer.ChallengeID {
		t.Fatalf("older version-1 challenge: %s %q, want superseded by %s", row.State, row.Reason, newer.ChallengeID)
	}
}
