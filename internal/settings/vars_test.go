package settings

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestDeclarations: one declaration per variable and per context key, each with a default that
// parses, at least one function that reads it, and a doc line; the policy's defaults are the
// domain's.
func TestDeclarations(t *testing.T) {
	envs, keys := map[string]bool{}, map[string]bool{}
	for _, v := range Vars {
		if v.Env == "" || envs[v.Env] {
			t.Errorf("variable %q is empty or declared twice", v.Env)
		}
		envs[v.Env] = true
		if v.Context != "" && keys[v.Context] {
			t.Errorf("context key %q is declared twice", v.Context)
		}
		keys[v.Context] = true
		if len(v.Roles) == 0 || v.Doc == "" {
			t.Errorf("%s: roles %v, doc %q", v.Env, v.Roles, v.Doc)
		}
		if v.Required && v.Default != "" {
			t.Errorf("%s is required and has default %q", v.Env, v.Default)
		}
		if v.Context != "" && v.Resource != "" {
			t.Errorf("%s is set both from context and from a resource", v.Env)
		}
	}
	if got, want := Defaults().Policy, ledger.DefaultPolicy(); got != want {
		t.Errorf("default policy = %+v, want the domain's %+v", got, want)
	}
}

// TestEnvironLoadsBack: what Environ writes for a function, Load reads back into the same
// settings, for settings away from every default (false and zero included).
func TestEnvironLoadsBack(t *testing.T) {
	s := Defaults()
	s.LedgerTable, s.ContentTable, s.ContentKeyARN, s.BudgetTable = "ledger-x", "content-x", "arn:key", "budget-x"
	s.AttemptProofKeyARN, s.FingerprintKeyARN, s.IntentKeyARN = "arn:proof", "arn:fingerprint", "arn:intent"
	s.DispatchQueueURL = "https://sqs.example.test/q"
	s.Policy = ledger.Policy{Version: "policy-7", Lease: 90 * time.Second, ExpiryMargin: 4 * time.Second, SendGuard: 3 * time.Second, Retention: 100 * time.Hour,
		MaxAttempts: 5, SettlePeriod: 5 * time.Minute, RecheckAfter: time.Minute, RetryBase: time.Second,
		RetryMax: 90 * time.Second, BudgetWait: 1500 * time.Millisecond, RedriveAfter: 45 * time.Second, MaxChallengeLifetime: 20 * time.Minute}
	s.Transports[ledger.Email], s.Transports[ledger.SMS] = TransportWebhook, TransportWebhook
	s.SESFrom, s.SESConfigurationSet, s.SMSOrigination, s.SMSMaxPrice = "no-reply@example.test", "cs", "arn:pool", "0.25"
	s.WebhookURL, s.WebhookKeyWindow, s.WebhookTimeout, s.WebhookLookup = "https://gw.example.test/send", 0, 3*time.Second, true
	s.WebhookSecretARN = "arn:aws:secretsmanager:us-east-1:111122223333:secret:webhook-AbCdEf"
	s.SendRates[ledger.Email], s.SendRates[ledger.SMS] = 12.5, 0
	s.SMSProtectConfigurationID = "protect-0123456789abcdef0123456789abcdef"
	if err := SMSAllowedCountries.Set(&s, "GB,IE"); err != nil {
		t.Fatal(err)
	}
	s.SweepLimit, s.LogLevel, s.LogAWSCalls = 7, -4, true
	// A false flag whose default is true is a value, not "unset": it must reach the function.
	s.Limits.Supersede = false
	for _, role := range Functions {
		env := s.Environ(role)
		got, err := Load(role, func(k string) string { return env[k] })
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		for _, v := range Vars {
			if v.ReadsIn(s, role) && v.Deployed() && v.Text(got) != v.Text(s) {
				t.Errorf("%s %s = %q, want %q", role, v.Env, v.Text(got), v.Text(s))
			}
		}
		if keys := slices.Sorted(maps.Keys(env)); slices.Contains(keys, "SEND_RATE_SMS") || slices.Contains(keys, "RECHECK_AFTER") {
			t.Errorf("%s environment sets an unset rate or a variable the stack leaves at its default: %v", role, keys)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2 * time.Minute: "2m", 30 * time.Second: "30s", 9600 * time.Hour: "9600h", 24 * time.Hour: "24h",
		90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s", 61 * time.Second: "1m1s",
	} {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v", got, back, err)
		}
	}
}

// TestOpenIndexShardsDefault: the default of OPEN_INDEX_SHARDS is the store's, and a value
// above the bound is refused by name.
func TestOpenIndexShardsDefault(t *testing.T) {
	if got := Defaults().OpenIndexShards; got != dynamostore.DefaultShards {
		t.Errorf("OPEN_INDEX_SHARDS default = %d, want dynamostore.DefaultShards %d", got, dynamostore.DefaultShards)
	}
	s := Defaults()
	s.OpenIndexShards = MaxOpenIndexShards + 1
	if ps := s.Check(); len(ps) != 1 || ps[0].Var != OpenIndexShards {
		t.Errorf("Check with %d shards = %v, want one problem with %s", s.OpenIndexShards, ps, OpenIndexShards.Env)
	}
}

// TestCheckRefusesAnEmptyValueWithADefault: a setting with a default whose value writes as ""
// would be left out of the environment and read back as its default, so Check refuses it by name.
func TestCheckRefusesAnEmptyValueWithADefault(t *testing.T) {
	s := Defaults()
	s.Policy.Version = ""
	s.Transports[ledger.Email] = ""
	for _, v := range []*Var{PolicyVersion, TransportVar[ledger.Email]} {
		if ps := s.Check(Claim); !slices.ContainsFunc(ps, func(p Problem) bool { return p.Var == v }) {
			t.Errorf("Check with an empty %s = %v, want a problem naming it", v.Env, ps)
		}
	}
}

// TestEveryChannelHasSettings: each of ledger.Channels has its row in
// Channels, in the same order, so its transport and send rate are settings.
func TestEveryChannelHasSettings(t *testing.T) {
	var got []ledger.Channel
	for _, c := range Channels {
		got = append(got, c.Channel)
	}
	if !slices.Equal(got, ledger.Channels) {
		t.Fatalf("settings.Channels covers %v, want ledger.Channels %v", got, ledger.Channels)
	}
	for _, ch := range ledger.Channels {
		if TransportVar[ch] == nil || SendRateVar[ch] == nil || !slices.Contains(Vars, TransportVar[ch]) || !slices.Contains(Vars, SendRateVar[ch]) {
			t.Errorf("channel %s lacks a transport or send-rate setting in Vars", ch)
		}
	}
}
