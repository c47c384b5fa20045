package ledger_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The expected keys were computed outside Go, e.g.
// printf 'password-reset:chal-1:email' | sha256sum
func TestIdentityKeyGolden(t *testing.T) {
	tests := []struct {
		name string
		id   ledger.Identity
		want string
	}{
		{"chal-1 email", ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.Email},
			"9b8dbe268771340e66c9f8a9f78f5633c1eaa885e0e940fd8511194ad4b82d3c"},
		{"chal-1 sms", ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-1", Channel: ledger.SMS},
			"b8905b7332199497c393c3dd7156d113c88da86fcfd610f07065d265f6f21273"},
		{"chal-2 email", ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-2", Channel: ledger.Email},
			"d9a11c4551d1fcd6da4c294ad12b44cf7a4476ceb112d3ca77e0f9a9b5433730"},
		{"fixture chal-000042 sms", ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-000042", Channel: ledger.SMS},
			"37b919aaf973e18efa25bc4676cb3d4f0878c44313057b30ba4d33a2d1f4bf70"},
		{"full opaque alphabet", ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "A.b_c:9-Z", Channel: ledger.Email},
			"2e4e5373a4babd3279f9c95c95d47eb3e2bdd116e0863d342369f2c2886292c1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.id.Validate(); err != nil {
				t.Fatalf("golden identity is invalid: %v", err)
			}
			if got := tt.id.Key(); got != tt.want {
				t.Fatalf("Key() = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestIntentKeyDependsOnlyOnIdentity(t *testing.T) {
	const golden = "37b919aaf973e18efa25bc4676cb3d4f0878c44313057b30ba4d33a2d1f4bf70" // password-reset:chal-000042:sms
	base, _ := ledgertest.Intent(42, ledger.SMS, ledgertest.Epoch, ledgertest.ScenarioTTL)
	if got := base.Key(); got != golden {
		t.Fatalf("base key %s, want %s", got, golden)
	}
	otherMessage := ledgertest.Message(42, ledger.SMS)
	otherMessage.Body += " (reworded)"

	tests := []struct {
		name    string
		mutate  func(*ledger.Intent)
		sameKey bool
		wantKey string // checked when not empty
	}{
		{"template version", func(in *ledger.Intent) {
			in.TemplateVersion = "4"
			in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, ledgertest.Message(42, ledger.SMS))
		}, true, golden},
		{"template id", func(in *ledger.Intent) { in.TemplateID = "reset-sms-v2" }, true, golden},
		{"content hash", func(in *ledger.Intent) {
			in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, otherMessage)
		}, true, golden},
		{"destination ref", func(in *ledger.Intent) { in.DestinationRef = "acct-999999:sms" }, true, golden},
		{"expiry", func(in *ledger.Intent) { in.ExpiresAt = in.ExpiresAt.Add(time.Hour) }, true, golden},
		{"producer policy version", func(in *ledger.Intent) { in.PolicyVersion = "policy-9" }, true, golden},
		{"workflow", func(in *ledger.Intent) {
			in.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
		}, true, golden},
		{"channel", func(in *ledger.Intent) { in.Channel = ledger.Email }, false,
			"b8e58b7697fad04a560fe69a442d6962da0cf7c3da6d71b4f97dd7bb4cbc3cac"},
		{"challenge", func(in *ledger.Intent) { in.ChallengeID = "chal-000043" }, false,
			"d5b56fd4fb8ce92b3c3dee47efead9f176838515fc912f5ca2efe0f9f10f2d1b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base
			in.Workflow.Order = append([]ledger.Channel(nil), base.Workflow.Order...)
			tt.mutate(&in)
			if err := in.Validate(); err != nil {
				t.Fatalf("mutated intent is invalid: %v", err)
			}
			got := in.Key()
			if tt.sameKey != (got == golden) {
				t.Fatalf("key %s; same as base: %v, want %v", got, got == golden, tt.sameKey)
			}
			if tt.wantKey != "" && got != tt.wantKey {
				t.Fatalf("key %s, want %s", got, tt.wantKey)
			}
		})
	}
}

// The SQS message id is not an input of the key at all: Identity, the only
// receiver of Key, has exactly the three business fields. A redelivery (a
// new envelope around the same intent) therefore maps to the same row.
func TestIdentityHasOnlyBusinessFields(t *testing.T) {
	var fields []string
	for f := range reflect.TypeFor[ledger.Identity]().Fields() {
		fields = append(fields, f.Name)
	}
	if want := []string{"Purpose", "ChallengeID", "Channel"}; !slices.Equal(fields, want) {
		t.Fatalf("Identity fields %v, want %v: anything else would leak into the dedupe key", fields, want)
	}

	e := ledgertest.NewScenario(t)
	in, sealed, first := e.Claim(t, 42, ledger.SMS, ledger.OutcomeClaimed)
	// Two SQS deliveries of one intent carry different message ids, which
	// the domain never sees; the second is a duplicate of the same key.
	res, err := e.Cases.Claim(context.Background(), in, sealed, "claim/req-2-other-sqs-envelope")
	if err != nil || res.Outcome != ledger.OutcomeDuplicate || res.Entry.Key != first.Key {
		t.Fatalf("redelivery: %v %v key %s", res.Outcome, err, res.Entry.Key)
	}
}
