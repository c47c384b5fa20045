package main

import (
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssmsvoice"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/smsregion/codes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// SMS destination countries are enforced twice. Dispatch refuses an SMS to a region its
// SMS_ALLOWED_COUNTRIES does not allow before it calls anyone (the ledger's decision, recorded as
// evidence). And with SMS through End User Messaging, every send names a protect configuration
// (SMS_PROTECT_CONFIGURATION_ID) whose SMS country rule set allows the same countries and blocks
// the others, so AWS refuses such a message too, whatever the function was told: the stack
// creates it from smsAllowedCountries, or context names an existing one
// (smsProtectConfigurationId), and the stack then creates none.

// notBlockable are the regions the phone-number library knows whose codes are not assigned ISO
// 3166-1 alpha-2 codes: AC (Ascension) and TA (Tristan da Cunha) are exceptionally reserved, XK
// (Kosovo) is user-assigned. End User Messaging takes "the two-letter ISO country code"; the stack
// writes no rule for them rather than risk a rule set the service refuses at deploy. Numbers
// there are still refused by the ledger's own allow-list (unless it names them).
var notBlockable = []string{"AC", "TA", "XK"}

// protectsSMSCountries reports whether the stack creates the SMS protect configuration: SMS goes
// through End User Messaging, context names no existing protect configuration, and the allow-list
// is on (an off list would allow every country, which a protect configuration's default already
// does).
func (p *LedgerStackProps) protectsSMSCountries() bool {
	return p.Functions.Transports[ledger.SMS] == settings.TransportSMS && p.Functions.SMSProtectConfigurationID == "" &&
		!p.Functions.SMSAllowedCountries.Off()
}

// smsProtection creates the protect configuration when protectsSMSCountries, and returns the
// protect configuration every SMS names: the stack's own (its id, a token), the one context named,
// or "" for none (SMS not through End User Messaging, or the allow-list off).
func (p *LedgerStackProps) smsProtection(stack awscdk.Stack) string {
	if p.Functions.Transports[ledger.SMS] != settings.TransportSMS {
		return ""
	}
	if !p.protectsSMSCountries() {
		return p.Functions.SMSProtectConfigurationID
	}
	pc := awssmsvoice.NewCfnProtectConfiguration(stack, jsii.String("SmsProtectConfiguration"), &awssmsvoice.CfnProtectConfigurationProps{
		CountryRuleSet: &awssmsvoice.CfnProtectConfiguration_CountryRuleSetProperty{
			Sms: smsCountryRules(p.Functions.SMSAllowedCountries),
		},
		DeletionProtectionEnabled: jsii.Bool(p.DeletionProtection),
		// End User Messaging keeps a protect configuration's name in its Name tag.
		Tags: &[]*awscdk.CfnTag{{Key: jsii.String("Name"), Value: jsii.String(p.Prefix + "-sms-countries")}},
	})
	// Deletion-protected, it is retained too: a stack delete or a replacement would fail on it.
	pc.ApplyRemovalPolicy(p.removalPolicy(), nil)
	return *pc.AttrProtectConfigurationId()
}

// smsCountryRules is the SMS country rule set of an allow-list: ALLOW for each allowed region and
// BLOCK for every other region the phone-number library knows (but notBlockable), in code order.
// A protect configuration allows every country it has no rule for, so the BLOCK rules are what
// makes it an allow-list.
func smsCountryRules(allowed codes.AllowList) []any {
	var rules []any
	for _, code := range codes.All() {
		status := "BLOCK"
		switch {
		case allowed.Allows(code):
			status = "ALLOW"
		case slices.Contains(notBlockable, code):
			continue
		}
		rules = append(rules, &awssmsvoice.CfnProtectConfiguration_CountryRuleProperty{
			CountryCode: jsii.String(code), ProtectStatus: jsii.String(status),
		})
	}
	return rules
}

// protectConfigurationArn is the ARN of the protect configuration id (or ARN) in this stack's
// account and region, the resource sms-voice:SendTextMessage is also authorized on when a send
// names it.
func protectConfigurationArn(stack awscdk.Stack, id string) *string {
	if strings.HasPrefix(id, "arn:") {
		return jsii.String(id)
	}
	return awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String("sms-voice"), Resource: jsii.String("protect-configuration"),
		ResourceName: jsii.String(id), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	}, stack)
}

// validateCountries checks the SMS country settings the stack turns into a protect configuration.
func (p *LedgerStackProps) validateCountries(bad func(string, ...any)) {
	if !p.protectsSMSCountries() {
		return
	}
	for _, code := range p.Functions.SMSAllowedCountries.Regions() {
		if slices.Contains(notBlockable, code) {
			bad("%s names %s, which is not an assigned ISO 3166-1 alpha-2 code: End User Messaging's protect configuration may refuse it; "+
				"name an existing protect configuration (%s) or leave it out", varName(settings.SMSAllowedCountries), code,
				varName(settings.SMSProtectConfigurationID))
		}
	}
}
