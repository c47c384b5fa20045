package settings

import (
	"strings"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// ChannelSettings is what the settings know of one channel. A new channel
// is one row of Channels here (with its address rule in
// internal/fingerprint): its two settings, their checks and their rows in
// Vars follow from it.
type ChannelSettings struct {
	Channel ledger.Channel
	// Stem names its settings: <Stem>_TRANSPORT and SEND_RATE_<Stem>.
	Stem string
	// Kinds are the transports it may use, its default first.
	Kinds []string
	// RateDoc documents SEND_RATE_<Stem>.
	RateDoc string
}

// Channels has a row for each of ledger.Channels, in its order.
var Channels = []ChannelSettings{
	{Channel: ledger.Email, Stem: "EMAIL", Kinds: []string{TransportSES, TransportWebhook},
		RateDoc: "email sends per second; unset: SES's MaxSendRate (ses:GetAccount; 1 until SES answers), no budget for a webhook"},
	{Channel: ledger.SMS, Stem: "SMS", Kinds: []string{TransportSMS, TransportWebhook},
		RateDoc: "SMS sends per second; unset: no budget"},
}

// TransportVar and SendRateVar are each channel's transport and send-rate
// settings, made from Channels.
var TransportVar, SendRateVar = channelVars()

func channelVars() (transport, rate map[ledger.Channel]*Var) {
	transport, rate = map[ledger.Channel]*Var{}, map[ledger.Channel]*Var{}
	for _, c := range Channels {
		lower := strings.ToLower(c.Stem)
		transport[c.Channel] = &Var{Env: c.Stem + "_TRANSPORT", Context: lower + "Transport", Default: c.Kinds[0],
			Roles: Senders, Doc: strings.Join(c.Kinds, " or "), field: per(Text, transports, c.Channel)}
		rate[c.Channel] = &Var{Env: "SEND_RATE_" + c.Stem, Context: "sendRate" + strings.ToUpper(lower[:1]) + lower[1:],
			Roles: []Role{Dispatch}, Doc: c.RateDoc, field: per(Rate, sendRates, c.Channel)}
	}
	return transport, rate
}

// perChannel lists m's settings in Channels' order.
func perChannel(m map[ledger.Channel]*Var) []*Var {
	out := make([]*Var, 0, len(Channels))
	for _, c := range Channels {
		out = append(out, m[c.Channel])
	}
	return out
}

// transportKinds says which transports each channel may use:
// "email: ses|webhook, sms: sms|webhook".
func transportKinds() string {
	var parts []string
	for _, c := range Channels {
		parts = append(parts, string(c.Channel)+": "+strings.Join(c.Kinds, "|"))
	}
	return strings.Join(parts, ", ")
}
