package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// linterMetadata returns, for one resource, its checkov skips and cfn-lint ignores with their reasons.
func linterMetadata(t *testing.T, id string, res map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	md, _ := res["Metadata"].(map[string]any)
	checkov, _ := md["checkov"].(map[string]any)
	for _, s := range list(checkov["skip"]) {
		if s == nil {
			continue
		}
		skip, _ := s.(map[string]any)
		check, _ := skip["id"].(string)
		comment, _ := skip["comment"].(string)
		if !strings.HasPrefix(check, "CKV") {
			t.Errorf("%s: checkov skip %v has no check id", id, s)
		}
		out[check] = comment
	}
	cfnLint, _ := md["cfn-lint"].(map[string]any)
	config, _ := cfnLint["config"].(map[string]any)
	reasons, _ := md["cfn-lint-reasons"].(map[string]any)
	for _, c := range list(config["ignore_checks"]) {
		if c == nil {
			continue
		}
		check, _ := c.(string)
		reason, _ := reasons[check].(string)
		out[check] = reason
	}
	if len(reasons) != len(list(config["ignore_checks"])) && config["ignore_checks"] != nil {
		t.Errorf("%s: cfn-lint ignores %v but gives reasons for %v", id, config["ignore_checks"], reasons)
	}
	return out
}

// TestLinterSuppressionsCarryReasons: every checkov skip and cfn-lint ignore in the template says
// why, and each entry of linterSkips lands on the resources it names (so a renamed construct
// cannot leave a suppression that silently applies to nothing).
func TestLinterSuppressionsCarryReasons(t *testing.T) {
	// With the optional data-events trail and SMS through a webhook (its signing secret), so their
	// suppressions have their resources.
	s := synth(t, func(p *LedgerStackProps) {
		p.DataEventsTrail = "resetledger-test-ledger-writes"
		p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.com/send"
	})
	total := 0
	for id, r := range s.json["Resources"].(map[string]any) {
		for check, reason := range linterMetadata(t, id, r.(map[string]any)) {
			total++
			if len(reason) < 60 {
				t.Errorf("%s: suppression of %s has no real reason: %q", id, check, reason)
			}
		}
	}
	if total == 0 {
		t.Fatal("no linter suppressions in the template")
	}

	for typ, byOwner := range linterSkips {
		resources := s.resources(typ)
		for owner, skips := range byOwner {
			for _, skip := range skips {
				var carriers []string
				for id, r := range resources {
					if _, ok := linterMetadata(t, id, r)[skip.check]; ok {
						carriers = append(carriers, id)
					}
				}
				switch {
				case owner == anyOwner && len(carriers) != len(resources):
					t.Errorf("%s on every %s: only on %v of %d", skip.check, typ, carriers, len(resources))
				case owner != anyOwner && !slices.ContainsFunc(carriers, func(id string) bool { return strings.HasPrefix(id, owner) }):
					t.Errorf("%s on %s %s*: applies to none (carriers %v)", skip.check, typ, owner, carriers)
				}
			}
		}
	}
}

// TestLinterSuppressionsAreScoped: a suppression applies only to the resources it names, not to
// every resource of the type (the content table's PITR skip must not reach the ledger table).
func TestLinterSuppressionsAreScoped(t *testing.T) {
	s := synth(t, nil)
	ledger := s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")
	if got := linterMetadata(t, ledger, s.resources("AWS::DynamoDB::Table")[ledger]); len(got) != 0 {
		t.Errorf("ledger table carries linter suppressions %v", got)
	}
	queue := s.logicalID(t, "AWS::SQS::Queue", "IntentQueue")
	if _, ok := linterMetadata(t, queue, s.resources("AWS::SQS::Queue")[queue])["ES6000"]; ok {
		t.Error("the intent queue (which has a redrive policy) carries the DLQ-only ES6000 suppression")
	}
}
