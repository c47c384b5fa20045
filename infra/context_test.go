package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestConfigFromContext(t *testing.T) {
	from := func(ctx map[string]any) func(string) any {
		return func(k string) any { return ctx[k] }
	}
	cfg, err := configFromContext(from(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stage != "dev" || cfg.Props.Prefix != "resetledger-dev" || !cfg.Nag || cfg.Props.AssetDir != "../dist" ||
		*cfg.Props.Architecture.Name() != "arm64" || !cfg.Props.DeletionProtection || !cfg.Props.PointInTimeRecovery {
		t.Errorf("defaults = %+v", cfg.Props)
	}
	cfg, err = configFromContext(from(map[string]any{
		"stage": "local", "arch": "x86_64", "pitr": "false", "deletionProtection": false, "reconcileRate": "2m",
		"maxReceiveCount": "7", "emailTransport": "webhook", "webhookUrl": "http://127.0.0.1:1/x", "observability": "false",
		"nag": "false", "producerArns": "arn:a, arn:b", "leaseDuration": "90s", "intentVisibilityTimeout": "30s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Props
	if p.Prefix != "resetledger-local" || *p.Architecture.Name() != "x86_64" || p.PointInTimeRecovery || p.DeletionProtection ||
		p.ReconcileRate != 2*time.Minute || p.MaxReceiveCount != 7 || p.Functions.Transports[ledger.Email] != "webhook" || !p.SkipObservability ||
		cfg.Nag || !slices.Equal(p.ProducerPrincipalArns, []string{"arn:a", "arn:b"}) || p.Functions.Policy.Lease != 90*time.Second ||
		p.IntentVisibilityTimeout != 30*time.Second {
		t.Errorf("overrides = %+v", p)
	}
	checkAlarmTopicRequired(t, from)
	cfg, err = configFromContext(from(map[string]any{"claimMaxConcurrency": "25", "sweepTimeout": "40s",
		"dispatchLagLimit": "30s"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Props; p.ClaimMaxConcurrency != 25 || p.SweepTimeout != 40*time.Second ||
		p.DispatchLagLimit != 30*time.Second {
		t.Errorf("observability overrides = %+v", p)
	}
	cfg, err = configFromContext(from(map[string]any{"sendRateEmail": "12.5", "sendRateSms": 1, "budgetMaxWait": "500ms",
		"retryBackoffBase": "1s", "retryBackoffMax": "30s", "redriveAfter": "45s", "dispatchQueueMaxConcurrency": "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.Props; p.Functions.SendRates[ledger.Email] != 12.5 || p.Functions.SendRates[ledger.SMS] != 1 ||
		p.Functions.Policy.BudgetWait != 500*time.Millisecond || p.Functions.Policy.RetryBase != time.Second ||
		p.Functions.Policy.RetryMax != 30*time.Second || p.Functions.Policy.RedriveAfter != 45*time.Second ||
		p.DispatchQueueMaxConcurrency != 8 {
		t.Errorf("liveness overrides = %+v", p)
	}
	if p := DefaultLedgerStackProps("x"); p.Functions.SendRates[ledger.Email] != 0 || p.Functions.SendRates[ledger.SMS] != defaultSMSSendRate {
		t.Errorf("default send rates = %v; want email unset, SMS through End User Messaging at %v", p.Functions.SendRates, defaultSMSSendRate)
	}
	for _, bad := range []map[string]any{
		{"sendRateEmail": "0"}, {"sendRateSms": "-3"}, {"sendRateEmail": "fast"}, {"sendRateSms": "+Inf"}, {"sendRateEmail": "NaN"},
		{"budgetMaxWait": "2"}, {"redriveAfter": "soon"}, {"dispatchQueueMaxConcurrency": "lots"},
		{"arch": "mips"}, {"requireAlarmTopic": "perhaps"}, {"sweepTimeout": "soon"}, {"claimMaxConcurrency": "many"}, {"pitr": "maybe"}, {"reconcileRate": "often"}, {"maxReceiveCount": "five"}, {"stage": "Prod_1"},
		{"intentVisibilityTimeout": "soon"}, {"logLevel": "trace"},
	} {
		if _, err := configFromContext(from(bad)); err == nil {
			t.Errorf("context %v accepted", bad)
		}
	}
}

// checkAlarmTopicRequired: every stage but dev must name the topic its alarms
// notify; a throw-away stage may opt out.
func checkAlarmTopicRequired(t *testing.T, from func(map[string]any) func(string) any) {
	t.Helper()
	// Every stage but dev must name the topic its alarms notify; a throw-away stage may opt out.
	assets := stubAssets(t)
	for _, tc := range []struct {
		ctx     map[string]any
		wantErr bool
	}{
		{map[string]any{"stage": "prod"}, true},
		{map[string]any{"stage": "prod", "alarmTopicArn": testTopic}, false},
		{map[string]any{"stage": "dev"}, false},
		{map[string]any{"stage": "local", "requireAlarmTopic": "false"}, false},
		{map[string]any{"stage": "dev", "requireAlarmTopic": "true"}, true},
	} {
		tc.ctx["assetDir"], tc.ctx["sesFromAddress"], tc.ctx["producerArns"] = assets, "no-reply@mail.example.com", producerARN
		tc.ctx["operatorArns"], tc.ctx["dataEventsTrail"] = oncallARN, testTrail
		cfg, err := configFromContext(from(tc.ctx))
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Props.Validate(); (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), "AlarmTopicArn") {
			t.Errorf("context %v: Validate() = %v, want error %v", tc.ctx, err, tc.wantErr)
		}
	}
}

func TestCDKJSON(t *testing.T) {
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg["app"] != "go run ." {
		t.Errorf("app = %v", cfg["app"])
	}
}

// TestConfigurationTable: the configuration tables of docs/configuration.md are the declarations: one row per
// function setting (settings.Vars) with its context key, default and the functions that read
// it, and one row per stage parameter (stageParams) with its default.
func TestConfigurationTable(t *testing.T) {
	const configurationDoc = "docs/configuration.md"
	section := docSection(t, configurationDoc, "# Configuration")
	section, _, _ = strings.Cut(section, "\n## ") // the tables above the first subsection (the local stage has its own test)
	rows := map[string][]string{}
	for _, cells := range tableRows(section, regexp.MustCompile("^`[A-Z][A-Z0-9_]*`$")) {
		rows[strings.Trim(cells[0], "`")] = cells
	}
	for _, v := range settings.Vars {
		cells, ok := rows[v.Env]
		if !ok {
			t.Errorf("%s: the configuration table has no row for %s", configurationDoc, v.Env)
			continue
		}
		delete(rows, v.Env)
		var readers []string
		for _, r := range v.Roles {
			name := string(r)
			if r == settings.Operator {
				name = "ledgerctl"
			}
			readers = append(readers, name)
		}
		want := []string{"`" + v.Env + "`", "-", defaultCell(v.Default, v.Required), strings.Join(readers, ", ")}
		if v.Context != "" {
			want[1] = "`" + v.Context + "`"
		}
		if len(cells) != 5 || !slices.Equal(cells[:4], want) {
			t.Errorf("%s: row for %s = %q, want %q and what it is", configurationDoc, v.Env, cells, want)
		}
	}
	for env := range rows {
		t.Errorf("%s: the configuration table has a row for %s, which internal/settings does not declare", configurationDoc, env)
	}

	params := map[string][]string{}
	for _, cells := range tableRows(section, regexp.MustCompile("^`[a-z][A-Za-z]*`$")) {
		params[strings.Trim(cells[0], "`")] = cells
	}
	for _, sp := range stageParams {
		cells, ok := params[sp.Key]
		if !ok {
			t.Errorf("%s: the stage parameter table has no row for %s", configurationDoc, sp.Key)
			continue
		}
		delete(params, sp.Key)
		if len(cells) != 3 || cells[1] != defaultCell(sp.Default, false) {
			t.Errorf("%s: row for %s = %q, want default %s", configurationDoc, sp.Key, cells, defaultCell(sp.Default, false))
		}
	}
	for key := range params {
		t.Errorf("%s: the stage parameter table has a row for %s, which stageParams does not declare", configurationDoc, key)
	}
}

// TestMarginMustExceedSendGuard: a stage whose expiry margin is not above
// its send guard fails synth with the setting's context name, before any
// function could start a send with no time left before its deadline.
func TestMarginMustExceedSendGuard(t *testing.T) {
	p := testProps(t)
	p.Functions.Policy.ExpiryMargin = p.Functions.Policy.SendGuard
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "expiryMargin") || !strings.Contains(err.Error(), "SEND_GUARD") {
		t.Fatalf("margin equal to the guard: Validate() = %v", err)
	}
	p.Functions.Policy.ExpiryMargin = p.Functions.Policy.SendGuard + time.Second
	if err := p.Validate(); err != nil {
		t.Fatalf("margin above the guard: %v", err)
	}
}
