package main

import (
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
)

// contextStages gives every context key of settings.Vars its value in each of two stages, ""
// leaving it unset there; every value is away from the key's default. The first stage sends
// through the webhook and takes the zeros, offs and flags; the second sends through SES and End
// User Messaging and names their configuration sets (the stack uses a named set instead of its
// own, and names no set for a channel on the webhook). Each stage as a whole is one the stack
// accepts.
var contextStages = map[string][2]string{
	"policyVersion":             {"policy-7", "policy-8"},
	"leaseDuration":             {"90s", "10m"},
	"expiryMargin":              {"4s", "45s"},
	"sendGuard":                 {"3s", "6s"},
	"historyRetention":          {"1h", "100h"},
	"digestInterval":            {"5s", "2m"},
	"reconcileMaxAttempts":      {"1", "5"},
	"settlePeriod":              {"0s", "7m"},
	"fallbackDeliveryWait":      {"0s", "30s"},
	"maxChallengeLifetime":      {"5m", "2h"},
	"acceptIntentV1":            {"true", ""},
	"acceptIntentV2":            {"true", ""},
	"emailTransport":            {settings.TransportWebhook, ""},
	"smsTransport":              {settings.TransportWebhook, ""},
	"sesFromAddress":            {"", "no-reply@mail.example.com"},
	"sesConfigurationSet":       {"", "shared-ses-events"},
	"smsConfigurationSet":       {"", "shared-sms-events"},
	"smsOriginationIdentity":    {"", "arn:aws:sms-voice:us-east-1:111122223333:pool/pool-0123456789abcdef"},
	"smsMaxPrice":               {"0.00645", "0.10"},
	"smsAllowedCountries":       {"*", "GB,IE"},
	"smsAllowedNumberKinds":     {"*", "mobile"},
	"smsProtectConfigurationId": {"", "protect-0123456789abcdef0123456789abcdef"},
	"limitDestination":          {"off", "3/1m"},
	"limitSubject":              {"off", "20/2h"},
	"limitSmsCountry":           {"off", "20/10m"},
	"limitSmsGlobal":            {"off", "50/1h"},
	"supersedeChallenges":       {"false", ""},
	"webhookUrl":                {"https://gw.example.test/send", ""},
	"webhookKeyWindow":          {"0s", "1h"},
	"webhookTimeout":            {"3s", "10s"},
	"webhookLookup":             {"true", ""},
	"openIndexShards":           {"1", "64"},
	"sweepLimit":                {"1", "7"},
	"sendRateEmail":             {"0.5", "12.5"},
	"sendRateSms":               {"0.25", "3"},
	"budgetMaxWait":             {"1s", "10s"},
	"retryBackoffBase":          {"1s", "5s"},
	"retryBackoffMax":           {"30s", "15m"},
	"redriveAfter":              {"45s", "5s"},
	"logLevel":                  {"debug", "error"},
	"logAwsCalls":               {"true", ""},
}

// contextRefused lists values a setting parses that the stack refuses, naming the key: a margin
// with no room above the send guard, a budget wait dispatch cannot keep.
var contextRefused = map[string][]string{
	"expiryMargin":  {"0s"},
	"budgetMaxWait": {"0s"},
	// A batching window: at most 5m, whole seconds (0s does not parse: PositiveDuration).
	"digestInterval": {"6m", "1500ms"},
}

// contextProbes are the values a setting that is not free text must carry to its functions (or
// refuse loudly) when it takes them: false and zero are values, not "unset".
var contextProbes = []string{"false", "true", "0", "0s"}

// baseContext is a valid stage's context with stub assets.
func baseContext(t *testing.T) map[string]any {
	return map[string]any{"stage": "test", "assetDir": stubAssets(t), "alarmTopicArn": testTopic,
		"sesFromAddress": "no-reply@mail.example.com", "producerArns": producerARN,
		"operatorArns": oncallARN, "dataEventsTrail": testTrail}
}

// stageFrom reads a stage from ctx as `cdk synth -c` does, and validates it.
func stageFrom(ctx map[string]any) (*LedgerStackProps, error) {
	cfg, err := configFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		return nil, err
	}
	return cfg.Props, cfg.Props.Validate()
}

// TestEverySettingReachesItsFunctions: each function setting with a context key, set in a stage's
// context to a value away from its default (false and zero included wherever the setting takes
// them), reaches every function that reads it: the synthesized template's environment, loaded as
// the function loads it (settings.Load), holds the value context gave. A value the setting or the
// stack refuses is refused at synth, naming the key. Nothing is dropped on the way to the default.
func TestEverySettingReachesItsFunctions(t *testing.T) {
	defaults := settings.Defaults()
	canonical := func(v *settings.Var, text string) (string, bool) {
		s := settings.Defaults()
		if v.Set(&s, text) != nil {
			return "", false
		}
		return v.Text(s), true
	}
	covered := map[string]map[string]bool{} // key -> canonical texts the test carries or refuses
	for _, v := range settings.Vars {
		if v.Context == "" {
			continue
		}
		row, ok := contextStages[v.Context]
		if !ok {
			t.Errorf("%s: contextStages has no row for it", v.Context)
			continue
		}
		covered[v.Context] = map[string]bool{}
		for _, text := range append(row[:], contextRefused[v.Context]...) {
			if text == "" {
				continue
			}
			c, ok := canonical(v, text)
			if !ok || c == v.Text(defaults) {
				t.Errorf("%s=%s: does not parse, or is the default", v.Context, text)
			}
			covered[v.Context][c] = true
		}
		if len(covered[v.Context]) == 0 {
			t.Errorf("%s: no stage sets it", v.Context)
		}
	}
	for key := range contextStages {
		if !declaresContext(key) {
			t.Errorf("contextStages has a row for %s, which no setting declares", key)
		}
	}

	// Every false and zero a setting takes is carried by a stage or refused; every one it does not
	// take is refused at synth.
	refuse := map[string][]string{}
	for key, texts := range contextRefused {
		refuse[key] = append(refuse[key], texts...)
	}
	for _, v := range settings.Vars {
		if scratch := settings.Defaults(); v.Context == "" || v.Set(&scratch, "soon") == nil {
			continue // free text: no false or zero of its own
		}
		for _, p := range contextProbes {
			c, ok := canonical(v, p)
			switch {
			case !ok:
				refuse[v.Context] = append(refuse[v.Context], p)
			case c != v.Text(defaults) && !covered[v.Context][c]:
				t.Errorf("%s=%s (%q) is set by no stage and not refused: add it to contextStages or contextRefused", v.Context, p, c)
			}
		}
	}
	for key, texts := range refuse {
		for _, text := range texts {
			ctx := baseContext(t)
			ctx[key] = text
			if _, err := stageFrom(ctx); err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("context %s=%s: %v, want an error naming %s", key, text, err, key)
			}
		}
	}

	checkStagesReachFunctions(t)
}

// checkStagesReachFunctions: for each of the two stages of contextStages, every
// function loads the settings it reads as the stage's context set them.
func checkStagesReachFunctions(t *testing.T) {
	t.Helper()
	for i := range 2 {
		ctx, want := baseContext(t), settings.Defaults()
		var set []*settings.Var
		for _, v := range settings.Vars {
			if text := contextStages[v.Context][i]; v.Context != "" && text != "" {
				ctx[v.Context] = text
				if err := v.Set(&want, text); err != nil {
					t.Fatalf("%s=%s: %v", v.Context, text, err)
				}
				set = append(set, v)
			}
		}
		props, err := stageFrom(ctx)
		if err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
		s := synthProps(t, props)
		for _, role := range settings.Functions {
			vars := s.function(t, role)["Environment"].(map[string]any)["Variables"].(map[string]any)
			env := map[string]string{}
			for k, x := range vars {
				env[k] = label(x) // a resource's token reads as its construct name
			}
			got, err := settings.Load(role, func(k string) string { return env[k] })
			if err != nil {
				t.Errorf("stage %d: %s does not start: %v", i, role, err)
				continue
			}
			for _, v := range set {
				if v.Reads(role) && v.Text(got) != v.Text(want) {
					t.Errorf("stage %d: %s loads %s=%q (environment %q), want %q from context %s=%s",
						i, role, v.Env, v.Text(got), env[v.Env], v.Text(want), v.Context, contextStages[v.Context][i])
				}
			}
		}
	}
}

// declaresContext reports whether a setting has the context key key.
func declaresContext(key string) bool {
	for _, v := range settings.Vars {
		if v.Context == key {
			return true
		}
	}
	return false
}
