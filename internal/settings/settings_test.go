package settings

import (
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadNamesEveryBadVariable(t *testing.T) {
	_, err := Load(Dispatch, env(map[string]string{
		"EMAIL_TRANSPORT": "webhook", "SMS_TRANSPORT": "pigeon", "LEASE_DURATION": "soon", "WEBHOOK_KEY_WINDOW": "-1s",
		"WEBHOOK_LOOKUP": "yes please",
	}))
	if err == nil {
		t.Fatal("want an error")
	}
	for _, name := range []string{"LEDGER_TABLE", "CONTENT_TABLE", "CONTENT_KEY_ARN", "WEBHOOK_URL", "SMS_TRANSPORT", "LEASE_DURATION", "WEBHOOK_KEY_WINDOW", "WEBHOOK_LOOKUP"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
}

func TestLoadDefaultsAndRoles(t *testing.T) {
	base := map[string]string{"LEDGER_TABLE": "l", "CONTENT_TABLE": "c", "INTENT_KEY_ARN": "arn:intent"}
	s, err := Load(Claim, env(base))
	if err != nil {
		t.Fatal(err)
	}
	if s.Policy.Lease != 2*time.Minute || s.Policy.ExpiryMargin != 30*time.Second || s.SweepLimit != 500 {
		t.Fatalf("defaults: %+v", s.Policy)
	}
	if _, err := Load(Dispatch, env(base)); err == nil || !strings.Contains(err.Error(), "SES_FROM_ADDRESS") {
		t.Fatalf("dispatch with ses needs a sender: %v", err)
	}
	base["CONTENT_KEY_ARN"], base["SES_FROM_ADDRESS"], base["LEASE_DURATION"] = "arn:k", "no-reply@example.test", "90s"
	base["ATTEMPT_PROOF_KEY_ARN"], base["FINGERPRINT_KEY_ARN"] = "arn:proof", "arn:fingerprint"
	if _, err := Load(Dispatch, env(base)); err == nil || !strings.Contains(err.Error(), "BUDGET_TABLE") || !strings.Contains(err.Error(), "DISPATCH_QUEUE_URL") {
		t.Fatalf("dispatch needs its budget table and queue: %v", err)
	}
	base["BUDGET_TABLE"], base["DISPATCH_QUEUE_URL"] = "b", "https://sqs.example.test/q"
	s, err = Load(Dispatch, env(base))
	if err != nil || s.Policy.Lease != 90*time.Second {
		t.Fatalf("dispatch: %v %v", s.Policy.Lease, err)
	}
	if s.Policy.RetryBase != 2*time.Second || s.Policy.RetryMax != time.Minute || s.Policy.BudgetWait != 2*time.Second ||
		s.Policy.RedriveAfter != 20*time.Second || s.SendRates["email"] != 0 || s.SendRates["sms"] != 0 {
		t.Fatalf("liveness defaults: %+v rates %v", s.Policy, s.SendRates)
	}
	// EXPIRY_MARGIN at SEND_GUARD's default (5s) leaves a send that starts at the margin no time.
	for name, v := range map[string]string{"SEND_RATE_EMAIL": "0", "SEND_RATE_SMS": "fast", "BUDGET_MAX_WAIT": "500ms", "SMS_MAX_PRICE": "1e-1", "EXPIRY_MARGIN": "5s"} {
		bad := map[string]string{}
		for k, x := range base {
			bad[k] = x
		}
		bad[name] = v
		if _, err := Load(Dispatch, env(bad)); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s accepted: %v", name, v, err)
		}
	}
	small := map[string]string{}
	for k, x := range base {
		small[k] = x
	}
	small["EXPIRY_MARGIN"], small["SEND_GUARD"] = "2s", "1500ms"
	if _, err := Load(Dispatch, env(small)); err != nil {
		t.Fatalf("a margin above the guard: %v", err)
	}
	base["SEND_RATE_EMAIL"], base["SEND_RATE_SMS"] = "14", "0.5"
	if s, err = Load(Dispatch, env(base)); err != nil || s.SendRates["email"] != 14 || s.SendRates["sms"] != 0.5 {
		t.Fatalf("rates: %v, %v", s.SendRates, err)
	}
	base["EMAIL_TRANSPORT"], base["WEBHOOK_URL"] = "webhook", "http://203.0.113.9/send"
	if _, err := Load(Dispatch, env(base)); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("plain http off loopback must fail: %v", err)
	}
}

// TestWebhookURLAndSecret: WEBHOOK_URL is https, or plain http only to a
// loopback host (localhost, 127.0.0.0/8, ::1), and a sender with a webhook
// transport refuses to start without WEBHOOK_SECRET_ARN.
func TestWebhookURLAndSecret(t *testing.T) {
	base := map[string]string{
		"LEDGER_TABLE": "l", "CONTENT_TABLE": "c", "CONTENT_KEY_ARN": "arn:k", "ATTEMPT_PROOF_KEY_ARN": "arn:proof",
		"BUDGET_TABLE": "b", "DISPATCH_QUEUE_URL": "https://sqs.example.test/q", "SES_FROM_ADDRESS": "no-reply@example.test",
		"FINGERPRINT_KEY_ARN": "arn:fingerprint",
		"SMS_TRANSPORT":       "webhook", "WEBHOOK_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:111122223333:secret:w-AbCdEf",
	}
	for url, ok := range map[string]bool{
		"https://gw.example.test/send":         true,
		"http://127.0.0.1:4599/send":           true,
		"http://127.0.0.2:4599/send":           true,
		"http://[::1]:4599/send":               true,
		"http://localhost:4599/send":           true,
		"http://gw.example.test/send":          false,
		"http://10.0.0.7/send":                 false,
		"http://0.0.0.0:4599/send":             false,
		"http://localhost.evil.example/send":   false,
		"http://127.0.0.1.nip.example/send":    false,
		"https://user:pw@gw.example.test/send": false,
	} {
		env1 := maps.Clone(base)
		env1["WEBHOOK_URL"] = url
		for _, role := range Senders {
			_, err := Load(role, env(env1))
			if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "WEBHOOK_URL")) {
				t.Errorf("%s WEBHOOK_URL=%s: %v, want ok=%v", role, url, err, ok)
			}
			if err != nil && strings.Contains(err.Error(), "pw@") {
				t.Errorf("the error repeats the URL: %v", err)
			}
		}
	}
	noSecret := maps.Clone(base)
	noSecret["WEBHOOK_URL"] = "https://gw.example.test/send"
	delete(noSecret, "WEBHOOK_SECRET_ARN")
	for _, role := range Senders {
		if _, err := Load(role, env(noSecret)); err == nil || !strings.Contains(err.Error(), "WEBHOOK_SECRET_ARN") {
			t.Errorf("%s without WEBHOOK_SECRET_ARN: %v, want it named", role, err)
		}
	}
	// Without a webhook transport the secret is not needed.
	delete(noSecret, "SMS_TRANSPORT")
	if _, err := Load(Dispatch, env(noSecret)); err != nil {
		t.Errorf("dispatch without a webhook: %v", err)
	}
}

// WEBHOOK_TIMEOUT is a positive duration when it is read, not only when a
// sending role's settings are checked.
func TestWebhookTimeoutIsPositive(t *testing.T) {
	var s Settings
	for _, text := range []string{"0s", "-1s"} {
		if err := WebhookTimeout.Set(&s, text); err == nil {
			t.Errorf("WEBHOOK_TIMEOUT=%s accepted", text)
		}
	}
	if err := WebhookTimeout.Set(&s, "2s"); err != nil || s.WebhookTimeout != 2*time.Second {
		t.Fatalf("WEBHOOK_TIMEOUT=2s: %v, %v", s.WebhookTimeout, err)
	}
}

// TestTransportTimeoutWithinLease: reconcile lets a same-key retry start only
// if it is over within its lease before the transport's idempotency window
// ends, and cuts the retry's call at the lease; a dispatching row is swept to
// unknown after it. A transport timeout above the lease is refused by name.
func TestTransportTimeoutWithinLease(t *testing.T) {
	for _, tc := range []struct {
		lease, timeout string
		ok             bool
	}{
		{"2m", "5s", true},
		{"2m", "2m", true},
		{"2m", "3m", false},
		{"30s", "31s", false},
		{"1s", "1s", true},
	} {
		env := map[string]string{"LEASE_DURATION": tc.lease, "WEBHOOK_TIMEOUT": tc.timeout}
		for _, role := range Senders {
			_, err := Load(role, dispatchEnv(env))
			switch {
			case tc.ok && err != nil:
				t.Errorf("%s: lease %s, webhook timeout %s: %v", role, tc.lease, tc.timeout, err)
			case !tc.ok && (err == nil || !strings.Contains(err.Error(), "WEBHOOK_TIMEOUT: must be at most LEASE_DURATION")):
				t.Errorf("%s: lease %s, webhook timeout %s accepted or not named: %v", role, tc.lease, tc.timeout, err)
			}
		}
	}
}

// TestReconcileContentOnlyWithWebhook: reconcile opens content only for a same-key retry, which
// only the webhook allows. With SES and End User Messaging SMS it starts without CONTENT_KEY_ARN
// and is not given it; with a webhook transport on either channel it refuses to start without it,
// naming it, rather than start and quarantine every retry it could have made.
func TestReconcileContentOnlyWithWebhook(t *testing.T) {
	base := map[string]string{"CONTENT_KEY_ARN": ""}
	s, err := Load(Reconcile, dispatchEnv(base))
	if err != nil {
		t.Fatalf("reconcile with ses and sms, no content key: %v", err)
	}
	if s.OpensContent(Reconcile) {
		t.Error("reconcile with ses and sms opens content")
	}
	s.ContentKeyARN = "arn:k"
	if _, given := s.Environ(Reconcile)["CONTENT_KEY_ARN"]; given {
		t.Error("reconcile with ses and sms is given CONTENT_KEY_ARN")
	}
	if _, given := s.Environ(Dispatch)["CONTENT_KEY_ARN"]; !given {
		t.Error("dispatch is not given CONTENT_KEY_ARN")
	}
	for _, v := range []string{"EMAIL_TRANSPORT", "SMS_TRANSPORT"} {
		env := map[string]string{"CONTENT_KEY_ARN": "", v: "webhook", "WEBHOOK_URL": "https://gw.example.test/send",
			"WEBHOOK_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:111122223333:secret:w-AbCdEf"}
		if _, err := Load(Reconcile, dispatchEnv(env)); err == nil || !strings.Contains(err.Error(), "CONTENT_KEY_ARN: required but not set") {
			t.Errorf("reconcile with %s=webhook and no content key: %v, want CONTENT_KEY_ARN required", v, err)
		}
		env["CONTENT_KEY_ARN"] = "arn:k"
		s, err := Load(Reconcile, dispatchEnv(env))
		if err != nil {
			t.Fatalf("reconcile with %s=webhook: %v", v, err)
		}
		if !s.OpensContent(Reconcile) || s.Environ(Reconcile)["CONTENT_KEY_ARN"] != "arn:k" {
			t.Errorf("reconcile with %s=webhook: opens content %v, environment %v", v, s.OpensContent(Reconcile), s.Environ(Reconcile))
		}
	}
	if _, err := Load(Dispatch, dispatchEnv(base)); err == nil || !strings.Contains(err.Error(), "CONTENT_KEY_ARN") {
		t.Errorf("dispatch without a content key: %v, want CONTENT_KEY_ARN required", err)
	}
}

// TestLoadOperate: the operator function needs the ledger's two tables and nothing else: no key,
// no queue, no transport.
func TestLoadOperate(t *testing.T) {
	if _, err := Load(Operate, env(map[string]string{})); err == nil ||
		!strings.Contains(err.Error(), "LEDGER_TABLE") || !strings.Contains(err.Error(), "CONTENT_TABLE") {
		t.Fatalf("operate without its tables: %v", err)
	}
	s, err := Load(Operate, env(map[string]string{"LEDGER_TABLE": "l", "CONTENT_TABLE": "c"}))
	if err != nil || s.LedgerTable != "l" || s.ContentTable != "c" {
		t.Fatalf("operate: %+v %v", s, err)
	}
	for _, v := range Vars {
		if v.Reads(Operate) && v.Required && v != LedgerTable && v != ContentTable {
			t.Errorf("operate requires %s", v.Env)
		}
	}
	if got := (Settings{LedgerTable: "l", ContentTable: "c"}).Environ(Operate); got["LEDGER_TABLE"] != "l" || got["CONTENT_TABLE"] != "c" || got["CONTENT_KEY_ARN"] != "" {
		t.Errorf("operate environment = %v", got)
	}
}

// TestPolicyRelationsOneOwner: every relation between policy settings is
// ledger.Policy.Validate's, and the settings refuse what it refuses with its
// message, reported against the variable that sets the field.
func TestPolicyRelationsOneOwner(t *testing.T) {
	for f := range reflect.TypeFor[ledger.Policy]().Fields() {
		if policyVars[f.Name] == nil {
			t.Errorf("policy field %s has no variable in policyVars: its problems would be reported against none", f.Name)
		}
	}
	cases := map[string]func(p *ledger.Policy){
		"margin at the guard":    func(p *ledger.Policy) { p.ExpiryMargin = p.SendGuard },
		"zero margin":            func(p *ledger.Policy) { p.ExpiryMargin = 0 },
		"retry max below base":   func(p *ledger.Policy) { p.RetryMax = p.RetryBase / 2 },
		"lifetime at the margin": func(p *ledger.Policy) { p.MaxChallengeLifetime = p.ExpiryMargin },
	}
	for name, mutate := range cases {
		s := Defaults()
		mutate(&s.Policy)
		perr := s.Policy.Validate()
		var pe *ledger.PolicyError
		if !errors.As(perr, &pe) {
			t.Fatalf("%s: Policy.Validate() = %v, want a PolicyError", name, perr)
		}
		want := Problem{Var: policyVars[pe.Field], Why: pe.Why}
		if pe.Related != "" {
			want.Why = strings.Replace(pe.Why, pe.Related, policyVars[pe.Related].Env, 1)
		}
		got := s.Check(Functions...)
		if !slices.Contains(got, want) {
			t.Errorf("%s: Check() = %v, want it to hold %v (Policy.Validate: %v)", name, got, want, perr)
		}
	}
}
