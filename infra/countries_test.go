package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smsregion/codes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const protectType = "AWS::SMSVOICE::ProtectConfiguration"

// smsRules returns the protect configuration's SMS rules as code -> status.
func smsRules(t *testing.T, s *synthesized) (string, map[string]string) {
	t.Helper()
	id := s.logicalID(t, protectType, "SmsProtectConfiguration")
	pp := props(s.resources(protectType)[id])
	set := pp["CountryRuleSet"].(map[string]any)
	if len(set) != 1 || set["SMS"] == nil {
		t.Errorf("rule set %v: want SMS rules only", set)
	}
	rules := map[string]string{}
	for _, r := range list(set["SMS"]) {
		rule := r.(map[string]any)
		code, status := rule["CountryCode"].(string), rule["ProtectStatus"].(string)
		if _, dup := rules[code]; dup {
			t.Errorf("two rules for %s", code)
		}
		rules[code] = status
	}
	return id, rules
}

// TestSMSProtectConfiguration: with SMS through End User Messaging the stack creates one protect
// configuration that allows exactly the allow-list's countries and blocks every other one the
// phone-number library knows, and dispatch (only dispatch) sends with it.
func TestSMSProtectConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		list    string
		allowed []string
	}{
		{"default", "", []string{"CA", "US"}},
		{"configured", "GB,IE,US", []string{"GB", "IE", "US"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, func(p *LedgerStackProps) {
				if tc.list != "" {
					if err := settings.SMSAllowedCountries.Set(&p.Functions, tc.list); err != nil {
						t.Fatal(err)
					}
				}
			})
			id, rules := smsRules(t, s)
			var allowed []string
			for code, status := range rules {
				switch status {
				case "ALLOW":
					allowed = append(allowed, code)
				case "BLOCK":
				default:
					t.Errorf("%s: status %s", code, status)
				}
			}
			slices.Sort(allowed)
			if !slices.Equal(allowed, tc.allowed) {
				t.Errorf("allowed %v, want %v", allowed, tc.allowed)
			}
			for _, code := range codes.All() {
				_, has := rules[code]
				if has == slices.Contains(notBlockable, code) {
					t.Errorf("rule for %s: %v", code, has)
				}
			}
			for _, code := range []string{"PR", "JM", "DO", "GG", "CU", "SO"} { // +1 and +44 neighbours, far away
				if rules[code] != "BLOCK" {
					t.Errorf("%s is %q, want BLOCK", code, rules[code])
				}
			}
			pc := props(s.resources(protectType)[id])
			if pc["DeletionProtectionEnabled"] != true {
				t.Errorf("DeletionProtectionEnabled = %v on a protected stage", pc["DeletionProtectionEnabled"])
			}
			for _, name := range settings.Functions {
				vars := s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any)
				pcid, countries := vars["SMS_PROTECT_CONFIGURATION_ID"], vars["SMS_ALLOWED_COUNTRIES"]
				if name != settings.Dispatch {
					if pcid != nil || countries != nil {
						t.Errorf("%s gets dispatch's country settings: %v %v", name, pcid, countries)
					}
					continue
				}
				if got := mustJSON(pcid); got != `{"Fn::GetAtt":["`+id+`","ProtectConfigurationId"]}` {
					t.Errorf("dispatch SMS_PROTECT_CONFIGURATION_ID = %s", got)
				}
				if want := strings.Join(tc.allowed, ","); countries != want {
					t.Errorf("dispatch SMS_ALLOWED_COUNTRIES = %v, want %s", countries, want)
				}
			}
			noNagErrors(t, s)
		})
	}
}

// TestSMSProtectConfigurationNone: the stack creates no protect configuration when context names
// one (dispatch sends with that), when the allow-list is off, or when SMS goes through the webhook
// (the local stage: the emulator's CloudFormation refuses AWS::SMSVOICE::ProtectConfiguration).
func TestSMSProtectConfigurationNone(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*LedgerStackProps)
		protectID any
		countries any
	}{
		{"named from context", func(p *LedgerStackProps) {
			p.Functions.SMSProtectConfigurationID = "protect-0123456789abcdef"
		}, "protect-0123456789abcdef", "CA,US"},
		{"allow-list off", func(p *LedgerStackProps) {
			if err := settings.SMSAllowedCountries.Set(&p.Functions, "*"); err != nil {
				t.Fatal(err)
			}
		}, nil, "*"},
		{"webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.com/send"
			p.Functions.SMSProtectConfigurationID = "protect-not-for-the-webhook"
		}, nil, "CA,US"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := synth(t, tc.mutate)
			if n := len(s.resources(protectType)); n != 0 {
				t.Errorf("%d protect configurations, want none", n)
			}
			vars := s.function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
			if vars["SMS_PROTECT_CONFIGURATION_ID"] != tc.protectID || vars["SMS_ALLOWED_COUNTRIES"] != tc.countries {
				t.Errorf("dispatch gets protect configuration %v, countries %v; want %v, %v",
					vars["SMS_PROTECT_CONFIGURATION_ID"], vars["SMS_ALLOWED_COUNTRIES"], tc.protectID, tc.countries)
			}
		})
	}
}

// TestSMSSendGrantNamesProtectConfiguration: with an origination-identity ARN, dispatch's
// sms-voice:SendTextMessage grant also names the configuration set and the protect configuration
// its sends name (the action is authorized on both); without one, the account-wide pattern covers
// them.
func TestSMSSendGrantNamesProtectConfiguration(t *testing.T) {
	const pool = "arn:aws:sms-voice:us-east-1:111122223333:pool/pool-abc"
	s := synth(t, func(p *LedgerStackProps) { p.Functions.SMSOrigination = pool })
	id, _ := smsRules(t, s)
	var sends []string
	for _, g := range s.grants(t)["Dispatch"] {
		if strings.HasPrefix(g, "sms-voice:SendTextMessage on ") {
			sends = append(sends, strings.TrimPrefix(g, "sms-voice:SendTextMessage on "))
		}
	}
	if len(sends) != 3 || !slices.Contains(sends, pool) ||
		!slices.ContainsFunc(sends, func(r string) bool { return strings.Contains(r, "protect-configuration/") && strings.Contains(r, id) }) ||
		!slices.ContainsFunc(sends, func(r string) bool {
			return strings.Contains(r, "configuration-set/test-events") || strings.Contains(r, "configuration-set/resetledger-test-events")
		}) {
		t.Errorf("dispatch SendTextMessage on %v; want the pool, the configuration set and %s", sends, id)
	}
	for role, g := range s.grants(t) {
		if role != "Dispatch" && slices.ContainsFunc(g, func(g string) bool { return strings.HasPrefix(g, "sms-voice:") }) {
			t.Errorf("%s may call sms-voice", role)
		}
	}
	noNagErrors(t, s)
}

func TestValidateCountries(t *testing.T) {
	p := testProps(t)
	if err := settings.SMSAllowedCountries.Set(&p.Functions, "US,XK"); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "XK") {
		t.Errorf("an allow-list naming XK for the stack's own protect configuration: %v", err)
	}
	p.Functions.SMSProtectConfigurationID = "protect-0123456789abcdef"
	if err := p.Validate(); err != nil {
		t.Errorf("XK with a protect configuration named from context: %v", err)
	}
}
