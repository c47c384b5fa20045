package main

import (
	"strings"
	"testing"
	"time"
)

// TestLedgerBackup: a daily AWS Backup of the ledger table is kept for the history retention, in a
// locked vault (minimum retention = the history retention) under a key of its own; backup=false
// leaves all of it out.
func TestLedgerBackup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*LedgerStackProps)
		days   float64
	}{
		{"default retention", nil, 400},
		{"retention in hours, rounded up", func(p *LedgerStackProps) { p.Functions.Policy.Retention = 90*24*time.Hour + time.Hour }, 91},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			vaults := s.resources("AWS::Backup::BackupVault")
			if len(vaults) != 1 {
				t.Fatalf("backup vaults = %d, want 1", len(vaults))
			}
			var vaultID string
			for id, v := range vaults {
				vaultID = id
				if v["DeletionPolicy"] != "Retain" {
					t.Errorf("vault DeletionPolicy = %v, want Retain", v["DeletionPolicy"])
				}
				pv := props(v)
				if got := mustJSON(pv["LockConfiguration"]); got != mustJSON(map[string]any{"MinRetentionDays": tc.days}) {
					t.Errorf("vault lock = %s, want governance mode with MinRetentionDays %v", got, tc.days)
				}
				if got := label(pv["EncryptionKeyArn"]); got != "BackupVaultKey" {
					t.Errorf("vault key = %s, want BackupVaultKey", got)
				}
				if pv["BackupVaultName"] != "resetledger-test-ledger" {
					t.Errorf("vault name = %v", pv["BackupVaultName"])
				}
			}
			var rules []any
			for _, pl := range s.resources("AWS::Backup::BackupPlan") {
				rules = append(rules, list(props(pl)["BackupPlan"].(map[string]any)["BackupPlanRule"])...)
			}
			if len(rules) != 1 {
				t.Fatalf("backup rules = %d, want 1", len(rules))
			}
			rule := rules[0].(map[string]any)
			if rule["ScheduleExpression"] != "cron(0 3 * * ? *)" || mustJSON(rule["Lifecycle"]) != mustJSON(map[string]any{"DeleteAfterDays": tc.days}) ||
				label(rule["TargetBackupVault"]) != "LedgerBackupVault.BackupVaultName" {
				t.Errorf("backup rule = %s, want daily, kept %v days, in the vault %s", mustJSON(rule), tc.days, vaultID)
			}
			var selected []string
			for _, sel := range s.resources("AWS::Backup::BackupSelection") {
				for _, r := range list(props(sel)["BackupSelection"].(map[string]any)["Resources"]) {
					selected = append(selected, label(r))
				}
			}
			if len(selected) != 1 || selected[0] != "LedgerTable" {
				t.Errorf("backed up = %v, want the ledger table only", selected)
			}
			if out, ok := s.json["Outputs"].(map[string]any)["LedgerBackupVaultName"].(map[string]any); !ok || label(out["Value"]) != "LedgerBackupVault.BackupVaultName" {
				t.Errorf("LedgerBackupVaultName output = %v", out)
			}
			noNagErrors(t, s)
		})
	}

	s := synth(t, func(p *LedgerStackProps) { p.SkipBackup = true })
	for _, typ := range []string{"AWS::Backup::BackupVault", "AWS::Backup::BackupPlan", "AWS::Backup::BackupSelection"} {
		if n := len(s.resources(typ)); n != 0 {
			t.Errorf("backup=false: %d %s", n, typ)
		}
	}
	if _, ok := s.json["Outputs"].(map[string]any)["LedgerBackupVaultName"]; ok {
		t.Error("backup=false still writes the vault output")
	}

	p := testProps(t)
	p.Functions.Policy.Retention = 36501 * 24 * time.Hour
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "vault lock") {
		t.Errorf("Validate() with a retention no vault lock holds = %v", err)
	}
	p.SkipBackup = true
	if err := p.Validate(); err != nil {
		t.Errorf("Validate() without backup = %v", err)
	}
}

// TestKeyDeletionWindows: every key of the stack waits 30 days, the longest KMS allows, before a
// scheduled deletion takes effect.
func TestKeyDeletionWindows(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) { p.DataEventsTrail = "resetledger-test-ledger-writes" })
	keys := s.resources("AWS::KMS::Key")
	if len(keys) < 7 {
		t.Fatalf("%d keys, want every key of the stack (at least 7 with the trail)", len(keys))
	}
	for name := range keys {
		key := props(keys[name])
		if key["PendingWindowInDays"] != 30.0 {
			t.Errorf("%s PendingWindowInDays = %v, want 30", name, key["PendingWindowInDays"])
		}
	}
}
