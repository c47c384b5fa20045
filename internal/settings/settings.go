// Package settings declares every setting of the functions once (vars.go),
// reads a function's configuration from its environment and validates it at
// start, naming the variable that is missing or bad.
package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/smsregion/codes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Role says which function is loading, and so which variables it needs.
type Role string

// Roles.
const (
	Claim     Role = "claim"
	Dispatch  Role = "dispatch"
	Reconcile Role = "reconcile"
	Expire    Role = "expire"
	// Events reads the providers' delivery events (SES, End User Messaging
	// SMS) into the ledger's evidence trail.
	Events   Role = "events"
	Operator Role = "operator" // ledgerctl
	// Operate is the operator function: it makes the ledger writes an
	// operator asks for (ledgerctl resolve) through its function URL
	// (AWS_IAM auth), and records the caller AWS authenticated. It is not
	// one of Functions: no event source drives it.
	Operate Role = "operate"
	// Digest reads the ledger table's stream and writes the signed digests
	// (functions/digest, docs/digests.md). It is not one of Functions, the
	// ledger's writers: it writes no table (infra/digest.go deploys it with
	// its key and bucket).
	Digest Role = "digest"
)

// Functions lists the five Lambda functions, each built from functions/<role>
// into <dist>/<role>/bootstrap and named <stack prefix>-<role>.
var Functions = []Role{Claim, Dispatch, Reconcile, Expire, Events}

// Senders lists the functions that send: they decrypt content and send
// through the transports.
var Senders = []Role{Dispatch, Reconcile}

// DefaultOpenIndexShards is the default of OPEN_INDEX_SHARDS, equal to
// dynamostore.DefaultShards (a test holds them equal; settings does not
// link the DynamoDB client). docs/scale.md derives it: each shard key takes
// two index writes per claim, so 4 shards carry 2,000 claims per second
// at DynamoDB's 1,000 writes per second per partition key.
const DefaultOpenIndexShards = 4

// MaxOpenIndexShards bounds OPEN_INDEX_SHARDS: every sweep and every figure
// queries each shard of each open state it reads.
const MaxOpenIndexShards = 64

// Sweepers lists the scheduled functions that sweep the open-row index.
var Sweepers = []Role{Reconcile, Expire}

// Transport names, the values of EMAIL_TRANSPORT and SMS_TRANSPORT.
const (
	TransportSES     = "ses"     // email through SES v2
	TransportSMS     = "sms"     // SMS through End User Messaging SMS
	TransportWebhook = "webhook" // either channel through an HTTPS webhook
)

// OpensContent reports whether reconcile opens sealed content with these
// settings: only for a same-key retry, which only a transport that honors
// an idempotency key allows, and of the transports only the webhook does
// (reconcile.Reconciler.Reconcile; SES and End User Messaging SMS are never sent
// through again). Without one, reconcile holds no kms:Decrypt on the
// content key and no GetItem on the content table, and is not given the
// key's ARN. Dispatch always opens content.
func (s Settings) OpensContent(role Role) bool {
	switch role {
	case Reconcile:
		for _, kind := range s.Transports {
			if kind == TransportWebhook {
				return true
			}
		}
		return false
	}
	return true
}

// opensContent is ContentKeyARN's Needs.
func opensContent(s Settings, role Role) bool { return s.OpensContent(role) }

// sends reports whether the role sends through transports.
func (r Role) sends() bool { return slices.Contains(Senders, r) }

// Settings is a function's validated configuration. Each field is filled by
// the declaration in Vars that names it, which also gives its variable,
// context key and default.
type Settings struct {
	LedgerTable  string
	ContentTable string
	// DigestBucket is the S3 bucket (Object Lock, COMPLIANCE) the digests
	// are written to; DigestKeyARN the KMS ECC_NIST_P256 key they are signed
	// with; DigestInterval how long the stream's records gather before a
	// digest is written (the event source's batching window).
	DigestBucket   string
	DigestKeyARN   string
	DigestInterval time.Duration
	// ContentKeyARN is the KMS key that seals content (opened where content
	// is sent: dispatch and reconcile).
	ContentKeyARN string
	// AttemptProofKeyARN is the KMS HMAC key (HMAC_256) under which dispatch
	// signs every SES and SMS send's attempt and the events function
	// verifies what a provider event carries back (internal/attemptproof).
	AttemptProofKeyARN string
	// FingerprintKeyARN is the KMS HMAC key (HMAC_256) of the destination
	// fingerprints, the destination limit's counter keys (internal/fingerprint):
	// dispatch alone may GenerateMac with it and nobody may VerifyMac, so
	// the limits table's keys confirm no guessed address.
	FingerprintKeyARN string
	// IntentKeyARN is the KMS HMAC key (HMAC_256) under which producers bind
	// an intent's fields (kms:GenerateMac) and claim verifies them
	// (kms:VerifyMac).
	IntentKeyARN string
	Policy       ledger.Policy
	// Transports names each channel's transport: TransportSES or
	// TransportWebhook for email, TransportSMS or TransportWebhook for SMS.
	Transports map[ledger.Channel]string
	// SESFrom is the SES sender address, required if email goes through SES.
	SESFrom string
	// SESConfigurationSet routes SES events (optional).
	SESConfigurationSet string
	// SMSConfigurationSet routes SMS events (optional).
	SMSConfigurationSet string
	// SMSOrigination is the SMS origination identity (optional).
	SMSOrigination string
	// SMSMaxPrice is End User Messaging's MaxPrice for every SMS, in US
	// dollars as a decimal ("0.10"); "" sets no cap.
	SMSMaxPrice string
	// SMSAllowedCountries is the country allow-list of SMS destinations
	// (dispatch): a number whose region (internal/smsregion) it does not allow is
	// never sent. The zero value allows every country; Defaults gives
	// DefaultSMSCountries.
	SMSAllowedCountries codes.AllowList
	// SMSAllowedNumberKinds is the number-kind allow-list of SMS
	// destinations (dispatch): a number whose kind (internal/smsregion) it does
	// not allow is never sent. The zero value allows every kind; Defaults
	// gives mobile and fixed-line-or-mobile.
	SMSAllowedNumberKinds codes.KindList
	// SMSProtectConfigurationID is the End User Messaging protect
	// configuration (id or ARN) every SMS names, so AWS also enforces its
	// country rules (optional).
	SMSProtectConfigurationID string
	// LimitsTable holds the send-limit counters and each subject's newest
	// challenge (claim notes, dispatch counts and reads); "" applies no
	// limit.
	LimitsTable string
	// SubjectIndex reports that the ledger table has its subject index:
	// dispatch then reads a subject's older challenges through it when an
	// admission is refused (assemble.Ports.Timeline).
	SubjectIndex bool
	// Limits is the send-limit policy; its SMSCountries comes from
	// SMSAllowedCountries where the functions are wired.
	Limits ledger.Limits
	// WebhookURL is the webhook endpoint, required if a channel uses the webhook.
	WebhookURL string
	// WebhookKeyWindow is how long the webhook honors Idempotency-Key; 0
	// means it does not.
	WebhookKeyWindow time.Duration
	// WebhookLookup means the webhook answers GET <url>/<key>.
	WebhookLookup bool
	// WebhookTimeout bounds one webhook request; a timeout is an unknown outcome.
	WebhookTimeout time.Duration
	// WebhookSecretARN is the Secrets Manager secret whose value signs every
	// webhook request; required if a channel uses the webhook.
	WebhookSecretARN string
	// BudgetTable holds the send-rate budget (dispatch).
	BudgetTable string
	// SendRates is the send-rate budget per channel in sends per second.
	// Zero means unset: with SES, email takes the account's MaxSendRate,
	// read at start (1 until SES answers: internal/wire/dispatchports);
	// otherwise the channel is not paced.
	SendRates map[ledger.Channel]float64
	// DispatchQueueURL is the queue that hands deferred and re-driven rows
	// back to dispatch (dispatch and reconcile).
	DispatchQueueURL string
	// OpenIndexShards is how many partition keys each open state takes in
	// the ledger table's open-row index (dynamostore.New). Every function
	// and ledgerctl must use the same value on one table; raising it is
	// safe (the sweeps query every shard below it), lowering it hides the
	// rows indexed in the shards it drops until they are written again.
	OpenIndexShards int
	// SweepLimit bounds the rows one sweep handles per state.
	SweepLimit int
	LogLevel   slog.Level
	// LogAWSCalls writes one log line per AWS call with its IAM action and
	// resource: the local stack turns it on so the end-to-end test can check
	// the deployed roles' permissions.
	LogAWSCalls bool
	// AcceptIntentV1 lets claim take intents of wire version 1 (nothing
	// sealed but the content): a migration setting, off by default.
	AcceptIntentV1 bool
	// AcceptIntentV2 lets claim take intents of wire version 2 (the seal
	// leaves the envelope out): a migration setting, off by default.
	AcceptIntentV2 bool
}

// UsesWebhook reports whether a channel sends through the webhook: the
// senders then sign every request with WEBHOOK_SECRET_ARN's secret.
func (s Settings) UsesWebhook() bool {
	for _, kind := range s.Transports {
		if kind == TransportWebhook {
			return true
		}
	}
	return false
}

// Load reads the settings for role through getenv (os.Getenv in main): the
// declared defaults, overridden by every declared variable that is set. The
// error lists every bad variable by name, never its value.
func Load(role Role, getenv func(string) string) (Settings, error) {
	s := Defaults()
	var problems []Problem
	for _, v := range Vars {
		if text := strings.TrimSpace(getenv(v.Env)); text != "" {
			if err := v.Set(&s, text); err != nil {
				problems = append(problems, Problem{v, err.Error()})
			}
		}
	}
	// After every variable is read: whether a role needs one can depend on
	// others (reconcile needs the content key only with a webhook).
	for _, v := range Vars {
		if v.Required && v.ReadsIn(s, role) && strings.TrimSpace(getenv(v.Env)) == "" {
			problems = append(problems, Problem{v, "required but not set"})
		}
	}
	problems = append(problems, s.Check(role)...)
	if len(problems) > 0 {
		errs := make([]error, len(problems))
		for i, p := range problems {
			errs[i] = p
		}
		return Settings{}, fmt.Errorf("%s configuration: %w", role, errors.Join(errs...))
	}
	return s, nil
}
