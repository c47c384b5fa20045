package main

import (
	"fmt"
	"time"

	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// SMS spend has bounds inside the stack: a per-message price cap (smsMaxPrice, End User
// Messaging's MaxPrice, which reaches the senders through settings.Environ like every setting), a
// default send rate when SMS goes through End User Messaging, and an alarm on the number of SMS
// the provider accepted against a monthly figure. The hard monthly cap is the account's own End
// User Messaging spend limit, outside the stack.

// defaultSMSSendRate is the SMS send rate (messages per second) the stack gives dispatch when SMS
// goes through End User Messaging and sendRateSms is not set: 1, the throughput every origination
// identity has at the least. End User Messaging measures throughput in message parts per second
// (MPS), by origination type and destination: a US short code 100 MPS, a US toll-free number 3 MPS
// ("What are the Message Parts per Second (MPS) limits", End User Messaging SMS user guide), a 10DLC
// number 1 MPS by default until its campaign's rate is raised (AWS Messaging blog, "10DLC campaign
// types and quotas"), and a long code in most countries 1 MPS. A reset message is one part, so at 1
// per second dispatch stays within what any sender accepts, and a flood of reset requests (SMS
// pumping) costs at most 86,400 messages a day instead of whatever the provider would take; a
// stage with a faster identity sets sendRateSms to its MPS. settings keeps its own default unset, so
// a webhook SMS transport (the local stage) has no budget unless one is configured.
const defaultSMSSendRate = 1.0

// defaultSMSRate gives SMS through End User Messaging the default send rate when none is set.
// configFromContext calls it after reading context, so it follows the transport context chose.
func (p *LedgerStackProps) defaultSMSRate() {
	if p.Functions.Transports[ledger.SMS] == settings.TransportSMS && p.Functions.SendRates[ledger.SMS] == 0 {
		p.Functions.SendRates[ledger.SMS] = defaultSMSSendRate
	}
}

// smsPaceDays is the month the SMS alarm paces its figure over.
const smsPaceDays = 30

// smsSpendPeriod is the SMS alarm's window: one day.
const smsSpendPeriod = 24 * time.Hour

// smsAlarmed reports whether the stage has the SMS volume alarm: SMS through End User Messaging.
func (p *LedgerStackProps) smsAlarmed() bool {
	return p.Functions.Transports[ledger.SMS] == settings.TransportSMS
}

// smsSpend alarms when more SMS were accepted in a day than the daily pace of SMSMonthlyMessages
// (monthly / 30). It counts the system's own Transitions metric for rows entering accepted on the
// SMS channel: one per logical message End User Messaging took.
//
// Why a daily pace and not the month's total: a CloudWatch alarm watches a rolling window, not a
// calendar month, and an alarm on the total would fire when the month's money is already spent,
// while SMS pumping (bots requesting resets to numbers that earn them a share of the charge) spends
// it in hours. Above the daily pace, on-call hears of it within a day of the rate going up, with
// 29 days of the month still unspent. The price of that: a day that is busy but within the month's
// figure alarms too, so set smsMonthlyMessages with headroom over the expected volume.
func (w *alarms) smsSpend() {
	p := w.p
	limit := float64(p.SMSMonthlyMessages) / smsPaceDays
	w.add("SmsDailyMessages", fmt.Sprintf("More than %g SMS were accepted by End User Messaging in a day: the daily pace "+
		"of smsMonthlyMessages=%d (%d / %d). A flood of reset requests to phone numbers (SMS pumping) or a retry loop "+
		"spends the month's SMS budget in days.", limit, p.SMSMonthlyMessages, p.SMSMonthlyMessages, smsPaceDays),
		emf(w.p.Prefix, metrics.Transitions, map[string]*string{
			metrics.DimState: jsii.String(string(ledger.Accepted)), metrics.DimChannel: jsii.String(string(ledger.SMS)),
		}, "Sum", seconds(smsSpendPeriod)), limit, gt, quiet)
}

// validateSpend checks the SMS figures.
func (p *LedgerStackProps) validateSpend(bad func(string, ...any)) {
	if p.smsAlarmed() && p.SMSMonthlyMessages <= 0 {
		bad("SMSMonthlyMessages %d: want > 0 with SMS through End User Messaging", p.SMSMonthlyMessages)
	}
}
