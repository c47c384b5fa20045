package settings

import (
	"strings"
	"testing"
	"time"
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
	base := map[string]string{"LEDGER_TABLE": "l", "CONTENT_TABLE": "c"}
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
	s, err = Load(Dispatch, env(base))
	if err != nil || s.Policy.Lease != 90*time.Second {
		t.Fatalf("dispatch: %v %v", s.Policy.Lease, err)
	}
	base["EMAIL_TRANSPORT"], base["WEBHOOK_URL"] = "webhook", "http://203.0.113.9/send"
	if _, err := Load(Dispatch, env(base)); err == nil || !strings.Contains(err.Error(), "https") {
		t.Fatalf("plain http off loopback must fail: %v", err)
	}
}
