package claim_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestClaimNewIntent(t *testing.T) {
	e := ledgertest.NewScenario(t)
	in, sealed, got := e.Claim(t, 1, ledger.Email, ledger.OutcomeClaimed)
	if got.Key != in.Key() || got.State != ledger.Claimed || got.Version != 1 || got.ContentHash != in.ContentHash {
		t.Fatalf("row %+v", got)
	}
	if !got.ExpiresAt.Equal(in.ExpiresAt) || !got.CreatedAt.Equal(ledgertest.Epoch) {
		t.Fatalf("expires %v created %v", got.ExpiresAt, got.CreatedAt)
	}
	if want := ledgertest.Epoch.Add(e.Cases.Policy.Retention); !got.RetainUntil.Equal(want) {
		t.Fatalf("retain until %v, want %v", got.RetainUntil, want)
	}
	stored, err := e.Content.Get(context.Background(), e.ContentKey(in.Key()))
	if err != nil || string(stored) != string(sealed) {
		t.Fatalf("content %q %v", stored, err)
	}
	ledgertest.MustVerify(t, got)
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
			e := ledgertest.NewScenario(t)
			in, sealed := ledgertest.Intent(2, ledger.SMS, e.Clock.Now(), tt.expires)
			res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantExp {
				if res.Outcome != ledger.OutcomeClaimed || !e.HasContent(t, in.Key()) {
					t.Fatalf("outcome %s, content %v", res.Outcome, e.HasContent(t, in.Key()))
				}
				return
			}
			if res.Outcome != ledger.OutcomeExpired {
				t.Fatalf("outcome %s, want expired", res.Outcome)
			}
			got := e.Get(t, in.Key())
			if got.State != ledger.Expired || got.Reason == "" || got.Last().Reason != got.Reason {
				t.Fatalf("state %s reason %q last %q", got.State, got.Reason, got.Last().Reason)
			}
			if p := ledgertest.HistoryPath(got); p != "none>expired" {
				t.Fatalf("history %s", p)
			}
			if e.Content.Len() != 0 {
				t.Fatal("sealed content stored for an expired intent")
			}
			d, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
			if err != nil || d.Outcome != ledger.OutcomeSkipped {
				t.Fatalf("dispatch: %s %v", d.Outcome, err)
			}
			// A redelivery of the same intent is a duplicate; it does not
			// store content either.
			r, err := e.Cases.Claim(ctx, in, sealed, "claim/req-2")
			if err != nil || r.Outcome != ledger.OutcomeDuplicate {
				t.Fatalf("redelivery: %s %v", r.Outcome, err)
			}
			if e.Transport.Calls() != 0 || e.Content.Len() != 0 {
				t.Fatalf("sent %d, content %d", e.Transport.Calls(), e.Content.Len())
			}
			ledgertest.MustVerify(t, e.Get(t, in.Key()))
		})
	}
}

func TestClaimRedeliverySameContent(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name      string
		prepare   func(t *testing.T, e *ledgertest.Scenario, key string)
		wantState ledger.State
	}{
		{"claimed", func(*testing.T, *ledgertest.Scenario, string) {}, ledger.Claimed},
		{"accepted", func(t *testing.T, e *ledgertest.Scenario, key string) {
			if _, err := e.Cases.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Accepted},
		{"unknown", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			if _, err := e.Cases.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}, ledger.Unknown},
		{"expired while claimed", func(t *testing.T, e *ledgertest.Scenario, key string) {
			e.Clock.Advance(time.Hour)
			if _, err := e.Cases.ExpireSweep(ctx, "expire/req-1", 10); err != nil {
				t.Fatal(err)
			}
		}, ledger.Expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, sealed, _ := e.Claim(t, 3, ledger.Email, ledger.OutcomeClaimed)
			tt.prepare(t, e, in.Key())
			before := e.Get(t, in.Key())
			if before.State != tt.wantState {
				t.Fatalf("prepared state %s, want %s", before.State, tt.wantState)
			}
			hadContent := e.HasContent(t, in.Key())
			calls := e.Transport.Calls()
			for i := range 3 {
				res, err := e.Cases.Claim(ctx, in, sealed, ledger.Worker("claim/redelivery-"+string(rune('a'+i))))
				if err != nil || res.Outcome != ledger.OutcomeDuplicate {
					t.Fatalf("redelivery %d: %s %v", i, res.Outcome, err)
				}
				if res.Entry.Version != before.Version || res.Entry.State != before.State {
					t.Fatalf("redelivery returned v%d %s, want v%d %s", res.Entry.Version, res.Entry.State, before.Version, before.State)
				}
			}
			after := e.Get(t, in.Key())
			if after.Version != before.Version || len(after.History) != len(before.History) || after.Mismatches != 0 {
				t.Fatalf("redelivery wrote: v%d->v%d, history %d->%d", before.Version, after.Version, len(before.History), len(after.History))
			}
			if e.HasContent(t, in.Key()) != hadContent {
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
		prepare func(t *testing.T, e *ledgertest.Scenario, key string)
	}{
		{"while claimed", func(*testing.T, *ledgertest.Scenario, string) {}},
		{"after accepted", func(t *testing.T, e *ledgertest.Scenario, key string) {
			if _, err := e.Cases.Dispatch(ctx, key, "dispatch/req-1"); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, sealed, _ := e.Claim(t, 4, ledger.Email, ledger.OutcomeClaimed)
			tt.prepare(t, e, in.Key())
			before := e.Get(t, in.Key())
			calls := e.Transport.Calls()

			for n := 1; n <= 2; n++ {
				m := ledgertest.Message(4, ledger.Email)
				m.Body += strings.Repeat(" (reworded)", n)
				changed := in
				changed.TemplateVersion = "4"
				changed.ContentHash = ledger.ContentHash(changed.TemplateID, changed.TemplateVersion, m)
				res, err := e.Cases.Claim(ctx, changed, ledgertest.Seal(m), ledger.Worker("claim/mismatch"))
				if err != nil || res.Outcome != ledger.OutcomeMismatch {
					t.Fatalf("mismatch %d: %s %v", n, res.Outcome, err)
				}
				got := e.Get(t, in.Key())
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
				ledgertest.MustVerify(t, got)
			}
			if before.State == ledger.Claimed {
				// The stored content is still the original, and dispatch
				// sends the original once.
				stored, _ := e.Content.Get(ctx, e.ContentKey(in.Key()))
				if string(stored) != string(sealed) {
					t.Fatal("content overwritten by a mismatching intent")
				}
				if _, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1"); err != nil {
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
		wantOutcome  ledger.Outcome
		wantMismatch int
	}{
		{"same content", "", ledger.OutcomeDuplicate, 0},
		{"different content", "other wording", ledger.OutcomeMismatch, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, sealed := ledgertest.Intent(95, ledger.Email, e.Clock.Now(), ledgertest.ScenarioTTL)
			otherIn, otherSealed := in, sealed
			if tt.otherBody != "" {
				m := ledgertest.Message(95, ledger.Email)
				m.Body = tt.otherBody
				otherIn.ContentHash, otherSealed = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m), ledgertest.Seal(m)
			}
			other := *e.Cases
			cases := *e.Cases
			cases.Store = &createHookStore{Store: e.Store, beforeCreate: func() {
				if r, err := other.Claim(ctx, otherIn, otherSealed, "claim/other"); err != nil || r.Outcome != ledger.OutcomeClaimed {
					t.Errorf("other claim: %s %v", r.Outcome, err)
				}
			}}
			res, err := cases.Claim(ctx, in, sealed, "claim/me")
			if err != nil || res.Outcome != tt.wantOutcome {
				t.Fatalf("claim: %s %v, want %s", res.Outcome, err, tt.wantOutcome)
			}
			row := e.Get(t, in.Key())
			if row.ContentHash != otherIn.ContentHash || row.Mismatches != tt.wantMismatch || e.Content.Len() != 1 {
				t.Fatalf("row hash %s mismatches %d blobs %d", row.ContentHash, row.Mismatches, e.Content.Len())
			}
			ledgertest.CheckHistory(t, row)
			// Whatever blob ended up stored, nothing that does not match
			// the row's content hash is ever sent.
			if _, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1"); err != nil {
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

// invalidIntentCase is one way an intent can be wrong: mutate breaks one
// field of a valid intent (or its sealed content), field is the one the
// error must name, and badValue must not appear in the message.
type invalidIntentCase struct {
	name     string
	mutate   func(in *ledger.Intent, sealed *[]byte)
	field    string
	badValue string // must not appear in the error message
}

// invalidIntentCases lists every field Intent.Validate checks, each broken
// alone.
func invalidIntentCases() []invalidIntentCase {
	order := func(cs ...ledger.Channel) ledger.Workflow { return ledger.Workflow{Kind: ledger.Fallback, Order: cs} }
	return []invalidIntentCase{
		{"empty challenge id", func(in *ledger.Intent, _ *[]byte) { in.ChallengeID = "" }, "challenge_id", ""},
		{"over-long challenge id", func(in *ledger.Intent, _ *[]byte) { in.ChallengeID = strings.Repeat("Q", 129) }, "challenge_id", strings.Repeat("Q", 129)},
		{"control character in challenge id", func(in *ledger.Intent, _ *[]byte) { in.ChallengeID = "chal-7\nforged log line" }, "challenge_id", "forged log line"},
		{"NUL in challenge id", func(in *ledger.Intent, _ *[]byte) { in.ChallengeID = "chal-7\x00zz" }, "challenge_id", "chal-7"},
		{"email address as challenge id", func(in *ledger.Intent, _ *[]byte) { in.ChallengeID = "victim@example.test" }, "challenge_id", "victim@example.test"},
		{"unknown channel", func(in *ledger.Intent, _ *[]byte) { in.Channel = "carrier-pigeon" }, "channel", "carrier-pigeon"},
		{"empty channel", func(in *ledger.Intent, _ *[]byte) { in.Channel = "" }, "channel", ""},
		{"unknown purpose", func(in *ledger.Intent, _ *[]byte) { in.Purpose = "account-takeover" }, "purpose", "account-takeover"},
		{"empty purpose", func(in *ledger.Intent, _ *[]byte) { in.Purpose = "" }, "purpose", ""},
		{"zero expiry", func(in *ledger.Intent, _ *[]byte) { in.ExpiresAt = time.Time{} }, "expires_at", ""},
		{"fallback with one channel", func(in *ledger.Intent, _ *[]byte) { in.Workflow = order(ledger.Email) }, "workflow.order", ""},
		{"fallback with no channels", func(in *ledger.Intent, _ *[]byte) { in.Workflow = order() }, "workflow.order", ""},
		{"fallback with a repeated channel", func(in *ledger.Intent, _ *[]byte) { in.Workflow = order(ledger.Email, ledger.Email) }, "workflow.order", ""},
		{"fallback with an unknown channel", func(in *ledger.Intent, _ *[]byte) { in.Workflow = order(ledger.Email, "telegraph") }, "workflow.order", "telegraph"},
		{"fallback with too many channels", func(in *ledger.Intent, _ *[]byte) { in.Workflow = order(ledger.Email, ledger.SMS, ledger.Email) }, "workflow.order", ""},
		{"channel not in fallback order", func(in *ledger.Intent, _ *[]byte) {
			in.Channel = ledger.SMS
			in.Workflow = order(ledger.Email, "telegraph")
		}, "workflow.order", ""},
		{"unknown workflow kind", func(in *ledger.Intent, _ *[]byte) { in.Workflow = ledger.Workflow{Kind: "broadcast"} }, "workflow.kind", "broadcast"},
		{"empty workflow kind", func(in *ledger.Intent, _ *[]byte) { in.Workflow = ledger.Workflow{} }, "workflow.kind", ""},
		{"raw email as destination ref", func(in *ledger.Intent, _ *[]byte) { in.DestinationRef = "player1@example.test" }, "destination_ref", "player1@example.test"},
		{"raw phone as destination ref", func(in *ledger.Intent, _ *[]byte) { in.DestinationRef = "+15550001234" }, "destination_ref", "+15550001234"},
		{"empty destination ref", func(in *ledger.Intent, _ *[]byte) { in.DestinationRef = "" }, "destination_ref", ""},
		{"empty template id", func(in *ledger.Intent, _ *[]byte) { in.TemplateID = "" }, "template_id", ""},
		{"template version with space", func(in *ledger.Intent, _ *[]byte) { in.TemplateVersion = "v 3 beta" }, "template_version", "v 3 beta"},
		{"empty policy version", func(in *ledger.Intent, _ *[]byte) { in.PolicyVersion = "" }, "policy_version", ""},
		{"empty content hash", func(in *ledger.Intent, _ *[]byte) { in.ContentHash = "" }, "content_hash", ""},
		{"short content hash", func(in *ledger.Intent, _ *[]byte) { in.ContentHash = "deadbeefcafe" }, "content_hash", "deadbeefcafe"},
		{"uppercase content hash", func(in *ledger.Intent, _ *[]byte) { in.ContentHash = strings.Repeat("AB", 32) }, "content_hash", "ABAB"},
		{"non-hex content hash", func(in *ledger.Intent, _ *[]byte) { in.ContentHash = strings.Repeat("zq", 32) }, "content_hash", "zqzq"},
		{"over-long content hash", func(in *ledger.Intent, _ *[]byte) { in.ContentHash += "00" }, "content_hash", ""},
		{"missing sealed content", func(_ *ledger.Intent, sealed *[]byte) { *sealed = nil }, "sealed_content", ""},
		{"empty sealed content", func(_ *ledger.Intent, sealed *[]byte) { *sealed = []byte{} }, "sealed_content", ""},
	}
}

func TestClaimRejectsInvalidIntent(t *testing.T) {
	ctx := context.Background()
	for _, tt := range invalidIntentCases() {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			in, sealed := ledgertest.Intent(7, ledger.Email, e.Clock.Now(), ledgertest.ScenarioTTL)
			tt.mutate(&in, &sealed)

			res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
			checkIntentRefused(t, tt, res, err)
			checkNothingClaimed(t, e, in)
		})
	}
}

// checkIntentRefused checks that a claim of an invalid intent failed with a
// *FieldError naming tt.field, without echoing the rejected value, and
// returned no result.
func checkIntentRefused(t *testing.T, tt invalidIntentCase, res claim.Result, err error) {
	t.Helper()
	var fe *ledger.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("want *FieldError, got %T %v (outcome %s)", err, err, res.Outcome)
	}
	if fe.Field != tt.field {
		t.Fatalf("field %q, want %q (%v)", fe.Field, tt.field, err)
	}
	if !errors.Is(err, ledger.ErrInvalidIntent) {
		t.Fatalf("%v does not unwrap to ErrInvalidIntent", err)
	}
	if fe.Reason == "" {
		t.Fatal("empty reason")
	}
	if tt.badValue != "" && strings.Contains(err.Error(), tt.badValue) {
		t.Fatalf("message %q contains the rejected value", err.Error())
	}
	if res.Outcome != "" || res.Entry.Key != "" {
		t.Fatalf("invalid intent produced a result: %+v", res)
	}
}

// checkNothingClaimed checks that a refused claim wrote nothing: neither the
// key the intent names nor the valid sibling key, and no content.
func checkNothingClaimed(t *testing.T, e *ledgertest.Scenario, in ledger.Intent) {
	t.Helper()
	ctx := context.Background()
	for _, key := range []string{in.Key(), ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-000007", Channel: ledger.Email}.Key()} {
		if _, err := e.Store.Get(ctx, key); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("store has a row after an invalid intent: %v", err)
		}
	}
	if rows, _ := e.Store.ListOpen(ctx, ledger.Claimed, time.Time{}, 0); len(rows) != 0 {
		t.Fatalf("%d claimed rows after an invalid intent", len(rows))
	}
	if n := e.Content.Len(); n != 0 {
		t.Fatalf("content store holds %d blobs after an invalid intent", n)
	}
}

// Intent.Validate accepts the fixtures and each workflow shape, so the
// failures above are caused by the one mutated field.
func TestValidIntents(t *testing.T) {
	tests := []struct {
		name string
		ch   ledger.Channel
		wf   ledger.Workflow
	}{
		{"single email", ledger.Email, ledger.Workflow{Kind: ledger.Single}},
		{"single sms", ledger.SMS, ledger.Workflow{Kind: ledger.Single}},
		{"dual", ledger.SMS, ledger.Workflow{Kind: ledger.Dual, Order: []ledger.Channel{ledger.Email, ledger.SMS}}},
		{"fallback first", ledger.Email, ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}},
		{"fallback second", ledger.Email, ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.SMS, ledger.Email}}},
		{"challenge id of 128 characters", ledger.Email, ledger.Workflow{Kind: ledger.Single}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, _ := ledgertest.Intent(7, tt.ch, ledgertest.Epoch, ledgertest.ScenarioTTL)
			in.Workflow = tt.wf
			if strings.Contains(tt.name, "128") {
				in.ChallengeID = strings.Repeat("Q", 128)
			}
			if err := in.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
