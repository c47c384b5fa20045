package settings

import (
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/resetledger/resetledger/internal/smsregion/codes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// A Var declares one setting, once: its environment variable, the CDK context
// key that sets it at deploy time, its default, how its text parses into
// Settings, and the functions that read it. Everything else follows from the
// declarations in Vars: Load, Settings.Environ (the environment the stack and
// the test pipeline give each function), the stack's context keys, ledgerctl's
// variables, and the README's configuration table, which a test holds
// against them.
type Var struct {
	Env string
	// Context is the CDK context key the stack reads the value from ("" if
	// the stack does not set it from context).
	Context string
	// Resource says which of its resources the stack sets the value from
	// (a table's name, the key's ARN, the queue's URL); "" for the others.
	Resource string
	// Default is the value when the variable is unset, as the variable
	// spells it; "" for none (optional, or Required).
	Default string
	// Required makes the functions in Roles refuse to start without it.
	Required bool
	// Roles are the functions that read it; the stack sets it in the
	// environment of each of them (if it sets it at all).
	Roles []Role
	// Doc says what it is, in a line.
	Doc string
	// Needs, if set, narrows Roles by the other settings: a role in Roles
	// reads v (is given it, and refuses to start without it if Required)
	// only where Needs reports true. nil: every role in Roles reads it.
	Needs func(s Settings, role Role) bool

	field field
}

// Reads reports whether role may read v (it is one of Roles); ReadsIn
// says whether it does with the settings s.
func (v *Var) Reads(role Role) bool { return slices.Contains(v.Roles, role) }

// ReadsIn reports whether role reads v with the settings s: it is one of
// Roles, and Needs, if set, says it needs v with s.
func (v *Var) ReadsIn(s Settings, role Role) bool {
	return v.Reads(role) && (v.Needs == nil || v.Needs(s, role))
}

// Deployed reports whether the stack sets v: from context or from a resource.
func (v *Var) Deployed() bool { return v.Context != "" || v.Resource != "" }

// Set parses text into the field of s that v fills. The error says what v
// wants, without quoting text.
func (v *Var) Set(s *Settings, text string) error { return v.field.set(s, text) }

// Text returns the value of v in s as the variable spells it; "" means unset.
func (v *Var) Text(s Settings) string { return v.field.text(&s) }

var policy = ledger.DefaultPolicy()

// The declarations. The policy's defaults are the domain's (ledger.DefaultPolicy).
var (
	LedgerTable = &Var{Env: "LEDGER_TABLE", Resource: "the ledger table's name", Required: true,
		Roles: append(slices.Clone(Functions), Operate, Operator, Digest), Doc: "the ledger table (the digest function signs only records of its stream)",
		field: at(Text, func(s *Settings) *string { return &s.LedgerTable })}
	ContentTable = &Var{Env: "CONTENT_TABLE", Resource: "the content table's name", Required: true,
		Roles: append(slices.Clone(Functions), Operate, Operator), Doc: "the sealed-content table (reconcile without a webhook only purges it)",
		field: at(Text, func(s *Settings) *string { return &s.ContentTable })}
	ContentKeyARN = &Var{Env: "CONTENT_KEY_ARN", Resource: "the content key's ARN", Required: true,
		Roles: append(slices.Clone(Senders), Operator), Needs: opensContent,
		Doc:   "the KMS key that seals content (ledgerctl send seals with it); reconcile reads it only with a webhook transport",
		field: at(Text, func(s *Settings) *string { return &s.ContentKeyARN })}
	AttemptProofKeyARN = &Var{Env: "ATTEMPT_PROOF_KEY_ARN", Resource: "the attempt-proof key's ARN", Required: true,
		Roles: append(slices.Clone(Senders), Events),
		Doc:   "the KMS HMAC key that proves an attempt was ours: dispatch signs each send's tags with it, events verifies provider events",
		field: at(Text, func(s *Settings) *string { return &s.AttemptProofKeyARN })}
	FingerprintKeyARN = &Var{Env: "FINGERPRINT_KEY_ARN", Resource: "the fingerprint key's ARN", Required: true, Roles: []Role{Dispatch},
		Doc:   "the KMS HMAC key of the destination fingerprints (the destination limit's counter keys); only dispatch may use it, and nobody may verify with it",
		field: at(Text, func(s *Settings) *string { return &s.FingerprintKeyARN })}
	IntentKeyARN = &Var{Env: "INTENT_KEY_ARN", Resource: "the intent key's ARN", Required: true, Roles: []Role{Claim},
		Doc:   "the KMS HMAC key producers bind an intent's fields with (kms:GenerateMac) and claim verifies them with (kms:VerifyMac)",
		field: at(Text, func(s *Settings) *string { return &s.IntentKeyARN })}
	DigestBucket = &Var{Env: "DIGEST_BUCKET", Resource: "the digest bucket's name", Required: true, Roles: []Role{Digest},
		Doc:   "the S3 bucket with Object Lock (COMPLIANCE) the signed digests are written to; ledgerctl verify --digest-bucket reads it",
		field: at(Text, func(s *Settings) *string { return &s.DigestBucket })}
	DigestKeyARN = &Var{Env: "DIGEST_KEY_ARN", Resource: "the digest key's ARN", Required: true, Roles: []Role{Digest},
		Doc:   "the KMS ECC_NIST_P256 key the digests are signed with (kms:Sign, digest function only); ledgerctl verify --digest-key reads its public key",
		field: at(Text, func(s *Settings) *string { return &s.DigestKeyARN })}
	DigestInterval = &Var{Env: "DIGEST_INTERVAL", Context: "digestInterval", Default: "5m", Roles: []Role{Digest},
		Doc:   "how long stream records gather before one digest covers them: the digest event source's batching window (at most 5m)",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.DigestInterval })}
	BudgetTable = &Var{Env: "BUDGET_TABLE", Resource: "the budget table's name", Required: true, Roles: []Role{Dispatch, Reconcile},
		Doc:   "the send-rate budget table, which also keeps how far dispatch has read the stream and the dispatch queue",
		field: at(Text, func(s *Settings) *string { return &s.BudgetTable })}
	DispatchQueueURL = &Var{Env: "DISPATCH_QUEUE_URL", Resource: "the dispatch queue's URL", Required: true, Roles: Senders,
		Doc:   "the queue that hands deferred and re-driven rows back to dispatch",
		field: at(Text, func(s *Settings) *string { return &s.DispatchQueueURL })}

	PolicyVersion = &Var{Env: "POLICY_VERSION", Context: "policyVersion", Default: policy.Version,
		Roles: append(slices.Clone(Functions), Operate, Operator), Doc: "recorded in every history entry",
		field: at(Text, func(s *Settings) *string { return &s.Policy.Version })}
	LeaseDuration = &Var{Env: "LEASE_DURATION", Context: "leaseDuration", Default: FormatDuration(policy.Lease),
		Roles: Functions, Doc: "dispatching rows older than this are swept to unknown",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.Lease })}
	ExpiryMargin = &Var{Env: "EXPIRY_MARGIN", Context: "expiryMargin", Default: FormatDuration(policy.ExpiryMargin),
		Roles: Functions, Doc: "subtracted from every challenge expiry before a send; positive, and in dispatch and reconcile it must exceed SEND_GUARD (their difference is the least time a send that starts is given)",
		field: at(Duration, func(s *Settings) *time.Duration { return &s.Policy.ExpiryMargin })}
	SendGuard = &Var{Env: "SEND_GUARD", Context: "sendGuard", Default: FormatDuration(policy.SendGuard), Roles: Senders,
		Doc:   "every transport call is cut at the challenge's expiry minus this (covers clock skew and a request in flight)",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.SendGuard })}
	HistoryRetention = &Var{Env: "HISTORY_RETENTION", Context: "historyRetention", Default: FormatDuration(policy.Retention),
		Roles: append(slices.Clone(Functions), Operate, Operator, Digest), Doc: "row TTL after its last write (the digests are locked at least as long)",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.Retention })}
	ReconcileMaxAttempts = &Var{Env: "RECONCILE_MAX_ATTEMPTS", Context: "reconcileMaxAttempts",
		Default: strconv.Itoa(policy.MaxAttempts), Roles: Senders, Doc: "attempts per row, first included",
		field: at(Count, func(s *Settings) *int { return &s.Policy.MaxAttempts })}
	LookupSettlePeriod = &Var{Env: "LOOKUP_SETTLE_PERIOD", Context: "settlePeriod", Default: FormatDuration(policy.SettlePeriod),
		Roles: []Role{Reconcile}, Doc: "how long a transport with a lookup or provider events is given to show a send before an unknown row is quarantined",
		field: at(Duration, func(s *Settings) *time.Duration { return &s.Policy.SettlePeriod })}
	FallbackDeliveryWait = &Var{Env: "FALLBACK_DELIVERY_WAIT", Context: "fallbackDeliveryWait", Default: FormatDuration(policy.FallbackWait),
		Roles: Functions, Doc: "how long a held fallback channel waits, after the earlier channel was accepted, for its delivery or a permanent bounce; 0 suppresses it at acceptance",
		field: at(Duration, func(s *Settings) *time.Duration { return &s.Policy.FallbackWait })}
	MaxChallengeLifetime = &Var{Env: "MAX_CHALLENGE_LIFETIME", Context: "maxChallengeLifetime", Default: FormatDuration(policy.MaxChallengeLifetime),
		Roles: []Role{Claim}, Doc: "claim refuses (dead-letters, no row) an intent whose expires_at lies further than this past the claim's time; a reset link should not live longer",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.MaxChallengeLifetime })}
	RecheckAfter = &Var{Env: "RECHECK_AFTER", Default: FormatDuration(policy.RecheckAfter),
		Roles: Senders, Doc: "how long reconcile waits between looks at an unknown row",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.RecheckAfter })}

	SESFromAddress = &Var{Env: "SES_FROM_ADDRESS", Context: "sesFromAddress", Roles: Senders,
		Doc:   "the sender address; required with EMAIL_TRANSPORT=ses",
		field: at(Text, func(s *Settings) *string { return &s.SESFrom })}
	SESConfigurationSet = &Var{Env: "SES_CONFIGURATION_SET", Context: "sesConfigurationSet", Roles: Senders,
		Doc:   "routes SES events (optional)",
		field: at(Text, func(s *Settings) *string { return &s.SESConfigurationSet })}
	SMSConfigurationSet = &Var{Env: "SMS_CONFIGURATION_SET", Context: "smsConfigurationSet", Roles: Senders,
		Doc:   "routes SMS events (optional)",
		field: at(Text, func(s *Settings) *string { return &s.SMSConfigurationSet })}
	SMSOriginationIdentity = &Var{Env: "SMS_ORIGINATION_IDENTITY", Context: "smsOriginationIdentity", Roles: Senders,
		Doc:   "the SMS origination identity (optional; an ARN scopes the send permission)",
		field: at(Text, func(s *Settings) *string { return &s.SMSOrigination })}
	SMSMaxPrice = &Var{Env: "SMS_MAX_PRICE", Context: "smsMaxPrice", Roles: Senders,
		Doc:   "the most one SMS part may cost, in US dollars (End User Messaging MaxPrice, e.g. 0.10); unset: no per-message cap",
		field: at(Price, func(s *Settings) *string { return &s.SMSMaxPrice })}
	SMSAllowedCountries = &Var{Env: "SMS_ALLOWED_COUNTRIES", Context: "smsAllowedCountries", Default: DefaultSMSCountries,
		Roles: []Role{Dispatch},
		Doc:   "the countries SMS may go to, ISO 3166-1 alpha-2 codes (US,CA); * for every country; the stack's protect configuration allows the same",
		field: at(Countries, func(s *Settings) *codes.AllowList { return &s.SMSAllowedCountries })}
	SMSAllowedNumberKinds = &Var{Env: "SMS_ALLOWED_NUMBER_KINDS", Context: "smsAllowedNumberKinds", Default: smsregionDefaultKinds,
		Roles: []Role{Dispatch},
		Doc:   "the number kinds SMS may go to (mobile,fixed_line_or_mobile); premium_rate, shared_cost and every kind not listed end limited; * for every kind",
		field: at(NumberKinds, func(s *Settings) *codes.KindList { return &s.SMSAllowedNumberKinds })}
	SMSProtectConfigurationID = &Var{Env: "SMS_PROTECT_CONFIGURATION_ID", Context: "smsProtectConfigurationId", Roles: []Role{Dispatch},
		Doc:   "the End User Messaging protect configuration every SMS names (optional; with SMS_TRANSPORT=sms the stack creates one from the allow-list unless the context key names one)",
		field: at(Text, func(s *Settings) *string { return &s.SMSProtectConfigurationID })}
	LimitsTable = &Var{Env: "LIMITS_TABLE", Resource: "the limits table's name", Roles: []Role{Claim, Dispatch},
		Doc:   "the send-limit counters and each subject's newest challenge; unset: no send limit and no supersession",
		field: at(Text, func(s *Settings) *string { return &s.LimitsTable })}
	SubjectIndex = &Var{Env: "SUBJECT_INDEX", Resource: "whether the ledger table has its subject index", Roles: []Role{Dispatch},
		Doc:   "true lets a refused admission supersede the subject's older challenges that still hold counts, through the subject index, and admit again; unset: they keep their counts until they wake",
		field: at(Flag, func(s *Settings) *bool { return &s.SubjectIndex })}
	LimitDestination = &Var{Env: "LIMIT_DESTINATION", Context: "limitDestination", Default: Limit.Format(DefaultLimitDestination),
		Roles: []Role{Dispatch}, Doc: "sends to one mailbox or number on one channel in any span of the window (<max>/<window>, or off)",
		field: at(Limit, func(s *Settings) *ledger.Cap { return &s.Limits.Destination })}
	LimitSubject = &Var{Env: "LIMIT_SUBJECT", Context: "limitSubject", Default: Limit.Format(DefaultLimitSubject),
		Roles: []Role{Dispatch}, Doc: "sends for one subject_ref, every channel together, in any span of the window (or off)",
		field: at(Limit, func(s *Settings) *ledger.Cap { return &s.Limits.Subject })}
	LimitSMSCountry = &Var{Env: "LIMIT_SMS_COUNTRY", Context: "limitSmsCountry", Default: Limit.Format(DefaultLimitSMSCountry),
		Roles: []Role{Dispatch}, Doc: "SMS to one country in any span of the window (or off)",
		field: at(Limit, func(s *Settings) *ledger.Cap { return &s.Limits.SMSCountryCap })}
	LimitSMSGlobal = &Var{Env: "LIMIT_SMS_GLOBAL", Context: "limitSmsGlobal", Default: Limit.Format(DefaultLimitSMSGlobal),
		Roles: []Role{Dispatch}, Doc: "every SMS together in any span of the window: the circuit breaker (or off)",
		field: at(Limit, func(s *Settings) *ledger.Cap { return &s.Limits.SMSGlobal })}
	AcceptIntentV1 = &Var{Env: "ACCEPT_INTENT_V1", Context: "acceptIntentV1", Default: "false", Roles: []Role{Claim},
		Doc:   "true also claims intents of wire version 1, which seal nothing but their content: only while producers move to version 2 (docs/adopting.md)",
		field: at(Flag, func(s *Settings) *bool { return &s.AcceptIntentV1 })}
	AcceptIntentV2 = &Var{Env: "ACCEPT_INTENT_V2", Context: "acceptIntentV2", Default: "false", Roles: []Role{Claim},
		Doc:   "true also claims intents of wire version 2, whose seal leaves the envelope out: only while producers move to version 3 (docs/intent-v2.md §1.12)",
		field: at(Flag, func(s *Settings) *bool { return &s.AcceptIntentV2 })}
	SupersedeChallenges = &Var{Env: "SUPERSEDE_CHALLENGES", Context: "supersedeChallenges", Default: "true", Roles: []Role{Claim, Dispatch},
		Doc:   "true suppresses an unsent row when its subject_ref has a newer challenge for the same purpose and channel",
		field: at(Flag, func(s *Settings) *bool { return &s.Limits.Supersede })}
	WebhookURL = &Var{Env: "WEBHOOK_URL", Context: "webhookUrl", Roles: Senders,
		Doc:   "the webhook endpoint, https (plain http only to localhost, 127.0.0.0/8 or ::1); no redirect is followed; required with a webhook transport",
		field: at(Text, func(s *Settings) *string { return &s.WebhookURL })}
	WebhookKeyWindow = &Var{Env: "WEBHOOK_KEY_WINDOW", Context: "webhookKeyWindow", Default: "24h", Roles: Senders,
		Doc:   "how long the webhook honors Idempotency-Key; 0 for an endpoint that does not",
		field: at(Duration, func(s *Settings) *time.Duration { return &s.WebhookKeyWindow })}
	WebhookTimeout = &Var{Env: "WEBHOOK_TIMEOUT", Context: "webhookTimeout", Default: "5s", Roles: Senders,
		Doc:   "bounds one webhook request; a timeout is an unknown outcome; at most LEASE_DURATION (a retry's call is cut at its lease)",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.WebhookTimeout })}
	WebhookSecretARN = &Var{Env: "WEBHOOK_SECRET_ARN", Resource: "the webhook signing secret's ARN", Required: true, Roles: Senders,
		Needs: func(s Settings, _ Role) bool { return s.UsesWebhook() },
		Doc:   "the Secrets Manager secret whose value signs every webhook request (Webhook-Signature, HMAC-SHA-256); read once at start; required with a webhook transport",
		field: at(Text, func(s *Settings) *string { return &s.WebhookSecretARN })}
	WebhookLookup = &Var{Env: "WEBHOOK_LOOKUP", Context: "webhookLookup", Default: "false", Roles: Senders,
		Doc:   "true if the webhook answers GET <url>/<key>",
		field: at(Flag, func(s *Settings) *bool { return &s.WebhookLookup })}

	OpenIndexShards = &Var{Env: "OPEN_INDEX_SHARDS", Context: "openIndexShards", Default: strconv.Itoa(DefaultOpenIndexShards),
		Roles: append(slices.Clone(Functions), Operate, Operator),
		Doc:   "partition keys per open state in the open-row index; every writer and reader of a table must agree, and it may only grow (docs/scale.md)",
		field: at(Count, func(s *Settings) *int { return &s.OpenIndexShards })}
	SweepLimit = &Var{Env: "SWEEP_LIMIT", Context: "sweepLimit", Default: "500", Roles: Sweepers,
		Doc:   "rows one sweep handles per state",
		field: at(Count, func(s *Settings) *int { return &s.SweepLimit })}

	BudgetMaxWait = &Var{Env: "BUDGET_MAX_WAIT", Context: "budgetMaxWait", Default: FormatDuration(policy.BudgetWait),
		Roles: []Role{Dispatch}, Doc: "longest in-process wait for a send-rate slot before the row is deferred",
		field: at(Duration, func(s *Settings) *time.Duration { return &s.Policy.BudgetWait })}
	RetryBackoffBase = &Var{Env: "RETRY_BACKOFF_BASE", Context: "retryBackoffBase", Default: FormatDuration(policy.RetryBase),
		Roles: []Role{Dispatch}, Doc: "first backoff after a not-sent answer (exponential, with jitter)",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.RetryBase })}
	RetryBackoffMax = &Var{Env: "RETRY_BACKOFF_MAX", Context: "retryBackoffMax", Default: FormatDuration(policy.RetryMax),
		Roles: []Role{Dispatch}, Doc: "longest backoff after a not-sent answer",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.RetryMax })}
	RedriveAfter = &Var{Env: "REDRIVE_AFTER", Context: "redriveAfter", Default: FormatDuration(policy.RedriveAfter),
		Roles: []Role{Reconcile}, Doc: "how long past due a row waits before reconcile re-drives it",
		field: at(PositiveDuration, func(s *Settings) *time.Duration { return &s.Policy.RedriveAfter })}

	LogLevel = &Var{Env: "LOG_LEVEL", Context: "logLevel", Default: "info", Roles: append(slices.Clone(Functions), Operate, Digest),
		Doc:   "debug, info, warn or error",
		field: at(Level, func(s *Settings) *slog.Level { return &s.LogLevel })}
	LogAWSCalls = &Var{Env: "LEDGER_AWSCALL_LOG", Context: "logAwsCalls", Default: "false", Roles: append(slices.Clone(Functions), Operate, Digest),
		Doc:   "true logs every AWS call with its IAM action (the local stack's permission check)",
		field: at(Flag, func(s *Settings) *bool { return &s.LogAWSCalls })}
)

// Vars lists every declaration, in the README's order.
var Vars = slices.Concat([]*Var{
	LedgerTable, ContentTable, ContentKeyARN, AttemptProofKeyARN, FingerprintKeyARN, IntentKeyARN, BudgetTable, DispatchQueueURL,
	DigestBucket, DigestKeyARN, DigestInterval,
	PolicyVersion, LeaseDuration, ExpiryMargin, SendGuard, HistoryRetention, ReconcileMaxAttempts, LookupSettlePeriod, FallbackDeliveryWait, MaxChallengeLifetime, RecheckAfter,
}, perChannel(TransportVar), []*Var{
	SESFromAddress, SESConfigurationSet, SMSConfigurationSet, SMSOriginationIdentity, SMSMaxPrice,
	SMSAllowedCountries, SMSAllowedNumberKinds, SMSProtectConfigurationID,
	LimitsTable, SubjectIndex, LimitDestination, LimitSubject, LimitSMSCountry, LimitSMSGlobal, SupersedeChallenges,
	AcceptIntentV1, AcceptIntentV2,
	WebhookURL, WebhookKeyWindow, WebhookTimeout, WebhookLookup, WebhookSecretARN,
	OpenIndexShards, SweepLimit,
}, perChannel(SendRateVar), []*Var{
	BudgetMaxWait, RetryBackoffBase, RetryBackoffMax, RedriveAfter,
	LogLevel, LogAWSCalls,
})

func transports(s *Settings) map[ledger.Channel]string { return s.Transports }
func sendRates(s *Settings) map[ledger.Channel]float64 { return s.SendRates }

// Defaults returns the settings with every declared default and nothing else.
func Defaults() Settings {
	s := Settings{Transports: map[ledger.Channel]string{}, SendRates: map[ledger.Channel]float64{}}
	for _, v := range Vars {
		if v.Default == "" {
			continue
		}
		if err := v.Set(&s, v.Default); err != nil {
			panic("settings: the declared default of " + v.Env + " does not parse: " + err.Error())
		}
	}
	return s
}

// Environ returns the environment the stack gives the function role: every
// variable role reads that the stack sets (Deployed), with its value in s
// as text. A setting whose text is "" (optional and unset, no rate) is left
// out, so the function sees its default; Check refuses a setting with a
// default whose text is "", which would be lost that way.
func (s Settings) Environ(role Role) map[string]string {
	env := map[string]string{}
	for _, v := range Vars {
		if !v.ReadsIn(s, role) || !v.Deployed() {
			continue
		}
		if text := v.Text(s); text != "" {
			env[v.Env] = text
		}
	}
	return env
}
