package main

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/resetledger/resetledger/internal/iampolicy"
	"github.com/resetledger/resetledger/internal/settings"
)

func TestFunctions(t *testing.T) {
	s := synth(t, nil)
	common := []string{"LEDGER_TABLE", "CONTENT_TABLE", "POLICY_VERSION", "LEASE_DURATION", "EXPIRY_MARGIN",
		"HISTORY_RETENTION", "LOG_LEVEL", "LEDGER_AWSCALL_LOG", "FALLBACK_DELIVERY_WAIT", "OPEN_INDEX_SHARDS"}
	sending := append(slices.Clone(common), "ATTEMPT_PROOF_KEY_ARN", "SEND_GUARD", "EMAIL_TRANSPORT", "SMS_TRANSPORT", "SES_FROM_ADDRESS",
		"WEBHOOK_KEY_WINDOW", "WEBHOOK_TIMEOUT", "WEBHOOK_LOOKUP", "RECONCILE_MAX_ATTEMPTS", "SES_CONFIGURATION_SET", "SMS_CONFIGURATION_SET")
	for _, tc := range []struct {
		name    settings.Role
		timeout float64
		env     []string
	}{
		{settings.Claim, 30, append(slices.Clone(common), "LIMITS_TABLE", "SUPERSEDE_CHALLENGES", "INTENT_KEY_ARN",
			"MAX_CHALLENGE_LIFETIME", "ACCEPT_INTENT_V1", "ACCEPT_INTENT_V2")},
		// No SEND_RATE_EMAIL: unset means SES's own rate. SEND_RATE_SMS: the stack's default for SMS
		// through End User Messaging (spend.go).
		{settings.Dispatch, 60, append(slices.Clone(sending), "CONTENT_KEY_ARN", "FINGERPRINT_KEY_ARN", "BUDGET_TABLE", "DISPATCH_QUEUE_URL", "BUDGET_MAX_WAIT",
			"RETRY_BACKOFF_BASE", "RETRY_BACKOFF_MAX", "SEND_RATE_SMS",
			"LIMITS_TABLE", "LIMIT_DESTINATION", "LIMIT_SUBJECT", "LIMIT_SMS_COUNTRY", "LIMIT_SMS_GLOBAL", "SUPERSEDE_CHALLENGES", "SUBJECT_INDEX",
			"SMS_ALLOWED_COUNTRIES", "SMS_ALLOWED_NUMBER_KINDS", "SMS_PROTECT_CONFIGURATION_ID")},
		// BUDGET_TABLE: the dispatch marks live in the budget table (reconcile reads them). No
		// CONTENT_KEY_ARN: without a webhook transport reconcile opens no content.
		{settings.Reconcile, 50, append(slices.Clone(sending), "SWEEP_LIMIT", "DISPATCH_QUEUE_URL", "REDRIVE_AFTER",
			"LOOKUP_SETTLE_PERIOD", "BUDGET_TABLE")},
		{settings.Expire, 50, append(slices.Clone(common), "SWEEP_LIMIT")},
		{settings.Events, 30, append(slices.Clone(common), "ATTEMPT_PROOF_KEY_ARN")},
	} {
		t.Run(string(tc.name), func(t *testing.T) {
			fn := s.function(t, tc.name)
			if fn["Runtime"] != "provided.al2023" || fn["Handler"] != "bootstrap" {
				t.Errorf("runtime/handler = %v/%v, want provided.al2023/bootstrap", fn["Runtime"], fn["Handler"])
			}
			if got := fmt.Sprint(fn["Architectures"]); got != "[arm64]" {
				t.Errorf("architectures = %s, want [arm64]", got)
			}
			if fn["MemorySize"] != 256.0 || fn["Timeout"] != tc.timeout {
				t.Errorf("memory/timeout = %v/%v, want 256/%v", fn["MemorySize"], fn["Timeout"], tc.timeout)
			}
			if got := label(fn["LoggingConfig"].(map[string]any)["LogGroup"]); got != title(tc.name)+"Logs" {
				t.Errorf("log group = %s", got)
			}
			checkFunctionEnvironment(t, fn, tc.env)
		})
	}
	for id, lg := range s.resources("AWS::Logs::LogGroup") {
		if props(lg)["RetentionInDays"] != 30.0 {
			t.Errorf("%s retention = %v, want 30", id, props(lg)["RetentionInDays"])
		}
	}
	for id, role := range s.resources("AWS::IAM::Role") {
		// The one exception: the role AWS Backup assumes for the ledger table's backups holds
		// AWS Backup's own service role policy (backup.go says why), and nothing else.
		if iampolicy.ConstructName(id) == "LedgerBackupPlanLedgerTableRole" && mustJSON(props(role)["ManagedPolicyArns"]) ==
			`[{"Fn::Join":["",["arn:",{"Ref":"AWS::Partition"},":iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup"]]}]` {
			continue
		}
		if _, ok := props(role)["ManagedPolicyArns"]; ok {
			t.Errorf("%s has managed policies: %v", id, props(role)["ManagedPolicyArns"])
		}
	}
}

// checkFunctionEnvironment: the function's environment has exactly the keys env
// names, each resource's pointing at that resource and each setting at the
// stack's default.
func checkFunctionEnvironment(t *testing.T, fn map[string]any, env []string) {
	t.Helper()
	vars := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	var keys []string
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := slices.Sorted(slices.Values(env))
	if !slices.Equal(keys, want) {
		t.Errorf("env keys = %v, want %v", keys, want)
	}
	if label(vars["LEDGER_TABLE"]) != "LedgerTable" || label(vars["CONTENT_TABLE"]) != "ContentTable" {
		t.Errorf("tables = %v / %v", vars["LEDGER_TABLE"], vars["CONTENT_TABLE"])
	}
	if k, ok := vars["CONTENT_KEY_ARN"]; ok && label(k) != "ContentKey" {
		t.Errorf("CONTENT_KEY_ARN = %v, want the content key", k)
	}
	if k, ok := vars["ATTEMPT_PROOF_KEY_ARN"]; ok && label(k) != "AttemptProofKey" {
		t.Errorf("ATTEMPT_PROOF_KEY_ARN = %v, want the attempt proof key", k)
	}
	if k, ok := vars["FINGERPRINT_KEY_ARN"]; ok && label(k) != "FingerprintKey" {
		t.Errorf("FINGERPRINT_KEY_ARN = %v, want the fingerprint key", k)
	}
	if k, ok := vars["INTENT_KEY_ARN"]; ok && label(k) != "IntentKey" {
		t.Errorf("INTENT_KEY_ARN = %v, want the intent key", k)
	}
	if l, ok := vars["SWEEP_LIMIT"]; ok && l != "500" {
		t.Errorf("SWEEP_LIMIT = %v", l)
	}
	if v, ok := vars["LIMITS_TABLE"]; ok && label(v) != "LimitsTable" {
		t.Errorf("LIMITS_TABLE = %v, want the limits table", v)
	}
	if v, ok := vars["BUDGET_TABLE"]; ok && label(v) != "BudgetTable" {
		t.Errorf("BUDGET_TABLE = %v, want the budget table", v)
	}
	if v, ok := vars["DISPATCH_QUEUE_URL"]; ok && label(v) != "DispatchQueue" {
		t.Errorf("DISPATCH_QUEUE_URL = %v, want the dispatch queue's URL", v)
	}
	for k, v := range map[string]string{"BUDGET_MAX_WAIT": "2s", "RETRY_BACKOFF_BASE": "2s", "RETRY_BACKOFF_MAX": "1m",
		"REDRIVE_AFTER": "20s"} {
		if got, ok := vars[k]; ok && got != v {
			t.Errorf("%s = %v, want %s", k, got, v)
		}
	}
	// A false flag is written out: unset, the function would read its default.
	for k, v := range map[string]string{"LEASE_DURATION": "2m", "EXPIRY_MARGIN": "30s", "HISTORY_RETENTION": "9600h", "LOG_LEVEL": "info",
		"LEDGER_AWSCALL_LOG": "false"} {
		if vars[k] != v {
			t.Errorf("%s = %v, want %s", k, vars[k], v)
		}
	}
	if slices.Contains(env, "WEBHOOK_TIMEOUT") {
		for k, v := range map[string]string{"EMAIL_TRANSPORT": "ses", "SMS_TRANSPORT": "sms", "SES_FROM_ADDRESS": "no-reply@mail.example.com",
			"WEBHOOK_KEY_WINDOW": "24h", "WEBHOOK_TIMEOUT": "5s", "RECONCILE_MAX_ATTEMPTS": "3",
			// The stack's own configuration sets, whose events reach the events function.
			"SES_CONFIGURATION_SET": "resetledger-test-events", "SMS_CONFIGURATION_SET": "resetledger-test-events"} {
			if vars[k] != v {
				t.Errorf("%s = %v, want %s", k, vars[k], v)
			}
		}
	}
}
