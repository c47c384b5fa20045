package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

func TestClaimRejectsInvalidIntent(t *testing.T) {
	ctx := context.Background()
	order := func(cs ...ledger.Channel) ledger.Workflow { return ledger.Workflow{Kind: ledger.Fallback, Order: cs} }
	tests := []struct {
		name     string
		mutate   func(in *ledger.Intent, sealed *[]byte)
		field    string
		badValue string // must not appear in the error message
	}{
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			in, sealed := ledgertest.Intent(7, ledger.Email, e.Clock.Now(), ttl)
			tt.mutate(&in, &sealed)

			res, err := e.Svc.Claim(ctx, in, sealed, "claim/req-1")
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

			// Nothing written: neither the key the intent names nor the
			// valid sibling key, and no content.
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
		})
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
			in, _ := ledgertest.Intent(7, tt.ch, ledgertest.Epoch, ttl)
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
