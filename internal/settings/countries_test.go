package settings

import (
	"slices"
	"strings"
	"testing"
)

func dispatchEnv(extra map[string]string) func(string) string {
	m := map[string]string{"LEDGER_TABLE": "l", "CONTENT_TABLE": "c", "CONTENT_KEY_ARN": "arn:k", "ATTEMPT_PROOF_KEY_ARN": "arn:p", "FINGERPRINT_KEY_ARN": "arn:f",
		"BUDGET_TABLE": "b", "DISPATCH_QUEUE_URL": "https://sqs.example.test/q", "SES_FROM_ADDRESS": "no-reply@example.test"}
	for k, v := range extra {
		m[k] = v
	}
	return env(m)
}

// TestSMSAllowedCountries: unset is the narrow default, "*" switches the check off (and
// reaches the function as "*", not as unset), a list is read as written, and a bad list
// stops dispatch naming the variable without quoting its text.
func TestSMSAllowedCountries(t *testing.T) {
	for _, tc := range []struct {
		text    string
		off     bool
		regions []string
		environ string
	}{
		{"", false, []string{"CA", "US"}, "CA,US"},
		{"*", true, nil, "*"},
		{"GB,IE,US", false, []string{"GB", "IE", "US"}, "GB,IE,US"},
	} {
		s, err := Load(Dispatch, dispatchEnv(map[string]string{"SMS_ALLOWED_COUNTRIES": tc.text}))
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		a := s.SMSAllowedCountries
		if a.Off() != tc.off || !slices.Equal(a.Regions(), tc.regions) {
			t.Errorf("%q: off %v regions %v, want off %v regions %v", tc.text, a.Off(), a.Regions(), tc.off, tc.regions)
		}
		if got := s.Environ(Dispatch)["SMS_ALLOWED_COUNTRIES"]; got != tc.environ {
			t.Errorf("%q: Environ gives %q, want %q", tc.text, got, tc.environ)
		}
	}
	for _, bad := range []string{"uk", "GB,GB", "GB,,US", "GB,*", "+4474001"} {
		_, err := Load(Dispatch, dispatchEnv(map[string]string{"SMS_ALLOWED_COUNTRIES": bad}))
		if err == nil || !strings.Contains(err.Error(), "SMS_ALLOWED_COUNTRIES") {
			t.Errorf("%q accepted or not named: %v", bad, err)
			continue
		}
		if strings.Contains(err.Error(), bad) {
			t.Errorf("%q: the error quotes the text: %v", bad, err)
		}
	}
	if got := Defaults().SMSAllowedCountries.String(); got != "CA,US" {
		t.Errorf("default allow-list %q", got)
	}
	// Only dispatch decides the country; the other functions are not given the list.
	for _, role := range Functions {
		_, has := Defaults().Environ(role)["SMS_ALLOWED_COUNTRIES"]
		if has != (role == Dispatch) {
			t.Errorf("%s environment has SMS_ALLOWED_COUNTRIES: %v", role, has)
		}
	}
}
