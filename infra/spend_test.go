package main

import (
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestSMSDefaultSendRate: SMS through End User Messaging gets a send rate of 1 per second unless
// sendRateSms says otherwise; SMS through a webhook gets none, and email is left alone.
func TestSMSDefaultSendRate(t *testing.T) {
	from := func(ctx map[string]any) func(string) any { return func(k string) any { return ctx[k] } }
	for _, tc := range []struct {
		name       string
		ctx        map[string]any
		sms, email float64
	}{
		{"defaults", nil, 1, 0},
		{"configured", map[string]any{"sendRateSms": "20"}, 20, 0},
		{"below the default", map[string]any{"sendRateSms": "0.25"}, 0.25, 0},
		{"webhook", map[string]any{"smsTransport": "webhook", "webhookUrl": "https://gw.example.com/send"}, 0, 0},
		{"webhook with a rate", map[string]any{"smsTransport": "webhook", "webhookUrl": "https://gw.example.com/send", "sendRateSms": "3"}, 3, 0},
	} {
		cfg, err := configFromContext(from(tc.ctx))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := cfg.Props.Functions.SendRates; got[ledger.SMS] != tc.sms || got[ledger.Email] != tc.email {
			t.Errorf("%s: send rates = %v, want sms %v, email %v", tc.name, got, tc.sms, tc.email)
		}
	}
	if got := DefaultLedgerStackProps("x").Functions.SendRates[ledger.SMS]; got != defaultSMSSendRate {
		t.Errorf("DefaultLedgerStackProps SMS rate = %v, want %v", got, defaultSMSSendRate)
	}
	// The functions' own default stays unset: a webhook (the local stage) has no budget.
	if got := settings.Defaults().SendRates[ledger.SMS]; got != 0 {
		t.Errorf("settings default SMS rate = %v, want unset", got)
	}
	vars := synth(t, nil).function(t, settings.Dispatch)["Environment"].(map[string]any)["Variables"].(map[string]any)
	if vars["SEND_RATE_SMS"] != "1" {
		t.Errorf("dispatch SEND_RATE_SMS = %v, want 1", vars["SEND_RATE_SMS"])
	}
}

// TestSMSMaxPrice: smsMaxPrice reaches the senders (dispatch and reconcile) and no one else.
func TestSMSMaxPrice(t *testing.T) {
	cfg, err := configFromContext(func(k string) any { return map[string]any{"smsMaxPrice": "0.10"}[k] })
	if err != nil || cfg.Props.Functions.SMSMaxPrice != "0.10" {
		t.Fatalf("smsMaxPrice context = %q, %v", cfg.Props.Functions.SMSMaxPrice, err)
	}
	s := synth(t, func(p *LedgerStackProps) { p.Functions.SMSMaxPrice = "0.10" })
	for _, name := range settings.Functions {
		got := s.function(t, name)["Environment"].(map[string]any)["Variables"].(map[string]any)["SMS_MAX_PRICE"]
		want := any(nil)
		if name == settings.Dispatch || name == settings.Reconcile {
			want = "0.10"
		}
		if got != want {
			t.Errorf("%s SMS_MAX_PRICE = %v, want %v", name, got, want)
		}
	}
}

// TestSMSDailyMessagesAlarm: with SMS through End User Messaging, more SMS accepted in a day than
// the monthly figure's daily pace alarms; with SMS through a webhook there is no such alarm.
func TestSMSDailyMessagesAlarm(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mutate    func(*LedgerStackProps)
		threshold any // nil: no alarm
	}{
		{"default figure", nil, 1000.0},
		{"configured", func(p *LedgerStackProps) { p.SMSMonthlyMessages = 4500 }, 150.0},
		{"webhook", func(p *LedgerStackProps) {
			p.Functions.Transports[ledger.SMS], p.Functions.WebhookURL = settings.TransportWebhook, "https://gw.example.com/send"
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := synth(t, tc.mutate).alarmsByName()["SmsDailyMessages"]
			if tc.threshold == nil {
				if ok {
					t.Errorf("SMS through a webhook has the SmsDailyMessages alarm")
				}
				return
			}
			if !ok {
				t.Fatal("no SmsDailyMessages alarm")
			}
			for k, want := range map[string]any{
				"Namespace": "ResetLedger", "MetricName": "Transitions", "Statistic": "Sum", "Period": 86400.0,
				"Dimensions": []any{map[string]any{"Name": "Channel", "Value": "sms"},
					map[string]any{"Name": "Stage", "Value": "resetledger-test"}, map[string]any{"Name": "State", "Value": "accepted"}},
				"Threshold": tc.threshold, "ComparisonOperator": "GreaterThanThreshold", "TreatMissingData": "notBreaching",
				"EvaluationPeriods": 1.0,
			} {
				if got := mustJSON(a[k]); got != mustJSON(want) {
					t.Errorf("SmsDailyMessages %s = %s, want %s", k, got, mustJSON(want))
				}
			}
		})
	}
	p := testProps(t)
	p.SMSMonthlyMessages = 0
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "SMSMonthlyMessages") {
		t.Errorf("Validate() without a monthly SMS figure = %v", err)
	}
}
