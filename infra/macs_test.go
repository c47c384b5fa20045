package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
)

// TestMACKeys: the fingerprint key and the intent key are HMAC_256 keys with KMS's longest
// deletion window; only dispatch holds anything on the fingerprint key (GenerateMac), only claim
// on the intent key (VerifyMac); each is in the environment of the function that uses it and no
// other; producers find the intent key in the stack output IntentKeyArn. TestBoundaries proves
// what their Denies refuse.
func TestMACKeys(t *testing.T) {
	s := synth(t, nil)
	for _, tc := range []struct {
		id, env string
		user    settings.Role
		grant   string
		sids    []string
	}{
		{"FingerprintKey", settings.FingerprintKeyARN.Env, settings.Dispatch, "kms:GenerateMac", []string{"OnlyDispatchFingerprints", "NoFingerprintVerify"}},
		{"IntentKey", settings.IntentKeyARN.Env, settings.Claim, "kms:VerifyMac", []string{"ProducersBindIntents", "OnlyProducersBindIntents", "OnlyClaimVerifiesIntents"}},
	} {
		t.Run(tc.id, func(t *testing.T) {
			key := props(s.resources("AWS::KMS::Key")[s.logicalID(t, "AWS::KMS::Key", tc.id)])
			if key["KeySpec"] != "HMAC_256" || key["KeyUsage"] != "GENERATE_VERIFY_MAC" || key["EnableKeyRotation"] == true ||
				key["PendingWindowInDays"] != 30.0 {
				t.Errorf("%s = %s, want HMAC_256 for GENERATE_VERIFY_MAC, no rotation, 30 days", tc.id, mustJSON(key))
			}
			for _, sid := range tc.sids {
				policyStatement(t, key["KeyPolicy"].(map[string]any), sid)
			}
			for role, grants := range s.grants(t) {
				var got, want []string
				for _, g := range grants {
					if strings.HasSuffix(g, " on "+tc.id) {
						got = append(got, g)
					}
				}
				if role == title(tc.user) {
					want = []string{tc.grant + " on " + tc.id}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s on the %s: %q, want %q", role, tc.id, got, want)
				}
			}
			for _, name := range settings.Functions {
				vars := s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any)
				got, ok := vars[tc.env]
				if ok != (name == tc.user) || ok && label(got) != tc.id {
					t.Errorf("%s %s = %v, want the %s for %s only", name, tc.env, got, tc.id, tc.user)
				}
			}
		})
	}
	out := s.json["Outputs"].(map[string]any)[outputs.IntentKeyARN.Name]
	if out == nil || !strings.Contains(mustJSON(out), s.logicalID(t, "AWS::KMS::Key", "IntentKey")) {
		t.Errorf("output %s = %s, want the intent key's ARN", outputs.IntentKeyARN.Name, mustJSON(out))
	}
}
