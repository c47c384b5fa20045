// Package settings reads a function's configuration from its environment
// and validates it at start, naming the variable that is missing or bad.
package settings

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

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
	Operator  Role = "operator"
)

// Functions lists the four Lambda functions, each built from functions/<role>
// into <dist>/<role>/bootstrap and named <stack prefix>-<role>.
var Functions = []Role{Claim, Dispatch, Reconcile, Expire}

// Transport names, the values of EMAIL_TRANSPORT and SMS_TRANSPORT.
const (
	TransportSES     = "ses"     // email through SES v2
	TransportSMS     = "sms"     // SMS through End User Messaging SMS
	TransportWebhook = "webhook" // either channel through an HTTPS webhook
)

// sends reports whether the role sends through transports.
func (r Role) sends() bool { return r == Dispatch || r == Reconcile }

// Settings is a function's validated configuration.
type Settings struct {
	LedgerTable  string // LEDGER_TABLE (required)
	ContentTable string // CONTENT_TABLE (required)
	// ContentKeyARN is the KMS key that seals content (CONTENT_KEY_ARN;
	// required where content is opened: dispatch and reconcile).
	ContentKeyARN string
	Policy        ledger.Policy
	// Transport per channel: EMAIL_TRANSPORT (ses|webhook, default ses) and
	// SMS_TRANSPORT (sms|webhook, default sms).
	Transports map[ledger.Channel]string
	// SESFrom is the sender address (SES_FROM_ADDRESS; required if any channel uses ses).
	SESFrom string
	// SESConfigurationSet routes SES events (SES_CONFIGURATION_SET; optional).
	SESConfigurationSet string
	// SMSOrigination is the origination identity (SMS_ORIGINATION_IDENTITY; optional).
	SMSOrigination string
	// WebhookURL is the webhook endpoint (WEBHOOK_URL; required if any channel uses webhook).
	WebhookURL string
	// WebhookKeyWindow is how long the webhook honors Idempotency-Key
	// (WEBHOOK_KEY_WINDOW, default 24h; 0 means it does not).
	WebhookKeyWindow time.Duration
	// WebhookLookup means the webhook answers GET <url>/<key> (WEBHOOK_LOOKUP, default false).
	WebhookLookup bool
	// WebhookTimeout bounds one webhook request; a timeout is an unknown
	// outcome (WEBHOOK_TIMEOUT, default 5s).
	WebhookTimeout time.Duration
	// BudgetTable holds the send-rate budget (BUDGET_TABLE; required for dispatch).
	BudgetTable string
	// SendRates is the send-rate budget per channel in sends per second
	// (SEND_RATE_EMAIL, SEND_RATE_SMS). Zero means unset: with SES, email
	// takes the account's MaxSendRate at start; otherwise the channel is
	// not paced.
	SendRates map[ledger.Channel]float64
	// DispatchQueueURL is the queue that hands deferred and re-driven rows
	// back to dispatch (DISPATCH_QUEUE_URL; required for dispatch and reconcile).
	DispatchQueueURL string
	// SweepLimit bounds the rows one sweep handles per state (SWEEP_LIMIT, default 500).
	SweepLimit int
	LogLevel   slog.Level // LOG_LEVEL (debug|info|warn|error, default info)
	// LogAWSCalls writes one log line per AWS call with its IAM action and
	// resource (LEDGER_AWSCALL_LOG, default false): the local stack turns it
	// on so the end-to-end test can check the deployed roles' permissions.
	LogAWSCalls bool
}

// Load reads the settings for role through getenv (os.Getenv in main).
// The error lists every bad variable by name, never its value.
func Load(role Role, getenv func(string) string) (Settings, error) {
	var errs []error
	bad := func(name, why string) { errs = append(errs, fmt.Errorf("%s: %s", name, why)) }
	str := func(name, def string, required bool) string {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			if required {
				bad(name, "required but not set")
			}
			return def
		}
		return v
	}
	dur := func(name string, def time.Duration) time.Duration {
		v := str(name, "", false)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			bad(name, "want a non-negative Go duration such as 30s or 2m")
			return def
		}
		return d
	}
	boolean := func(name string) bool {
		v := str(name, "false", false)
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad(name, "want true or false")
		}
		return b
	}
	rate := func(name string) float64 {
		v := str(name, "", false)
		if v == "" {
			return 0
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || f > 1e6 {
			bad(name, "want a positive number of sends per second")
			return 0
		}
		return f
	}
	integer := func(name string, def int) int {
		v := str(name, "", false)
		if v == "" {
			return def
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 {
			bad(name, "want a positive integer")
			return def
		}
		return i
	}

	def := ledger.DefaultPolicy()
	s := Settings{
		LedgerTable:  str("LEDGER_TABLE", "", true),
		ContentTable: str("CONTENT_TABLE", "", true),
		Policy: ledger.Policy{
			Version:      str("POLICY_VERSION", def.Version, false),
			Lease:        dur("LEASE_DURATION", def.Lease),
			ExpiryMargin: dur("EXPIRY_MARGIN", def.ExpiryMargin),
			Retention:    dur("HISTORY_RETENTION", def.Retention),
			MaxAttempts:  integer("RECONCILE_MAX_ATTEMPTS", def.MaxAttempts),
			SettlePeriod: dur("LOOKUP_SETTLE_PERIOD", def.SettlePeriod),
			RecheckAfter: dur("RECHECK_AFTER", def.RecheckAfter),
			RetryBase:    dur("RETRY_BACKOFF_BASE", def.RetryBase),
			RetryMax:     dur("RETRY_BACKOFF_MAX", def.RetryMax),
			BudgetWait:   dur("BUDGET_MAX_WAIT", def.BudgetWait),
			RedriveAfter: dur("REDRIVE_AFTER", def.RedriveAfter),
		},
		Transports: map[ledger.Channel]string{
			ledger.Email: str("EMAIL_TRANSPORT", TransportSES, false),
			ledger.SMS:   str("SMS_TRANSPORT", TransportSMS, false),
		},
		SESFrom:             str("SES_FROM_ADDRESS", "", false),
		SESConfigurationSet: str("SES_CONFIGURATION_SET", "", false),
		SMSOrigination:      str("SMS_ORIGINATION_IDENTITY", "", false),
		WebhookURL:          str("WEBHOOK_URL", "", false),
		WebhookKeyWindow:    dur("WEBHOOK_KEY_WINDOW", 24*time.Hour),
		WebhookTimeout:      dur("WEBHOOK_TIMEOUT", 5*time.Second),
		WebhookLookup:       boolean("WEBHOOK_LOOKUP"),
		SendRates:           map[ledger.Channel]float64{ledger.Email: rate("SEND_RATE_EMAIL"), ledger.SMS: rate("SEND_RATE_SMS")},
		SweepLimit:          integer("SWEEP_LIMIT", 500),
		LogAWSCalls:         boolean("LEDGER_AWSCALL_LOG"),
	}
	if err := s.LogLevel.UnmarshalText([]byte(str("LOG_LEVEL", "info", false))); err != nil {
		bad("LOG_LEVEL", "want debug, info, warn or error")
	}
	if err := s.Policy.Validate(); err != nil {
		bad("policy", err.Error())
	}
	if role.sends() {
		s.DispatchQueueURL = str("DISPATCH_QUEUE_URL", "", true)
	}
	if role == Dispatch {
		s.BudgetTable = str("BUDGET_TABLE", "", true)
		// Wake-ups travel with whole-second SQS delays and may arrive up to
		// a second early; dispatch waits that second out in-process.
		if s.Policy.BudgetWait < time.Second {
			bad("BUDGET_MAX_WAIT", "must be at least 1s (wake-up delays are whole seconds)")
		}
	}
	if role.sends() {
		s.ContentKeyARN = str("CONTENT_KEY_ARN", "", true)
		if s.WebhookTimeout == 0 {
			bad("WEBHOOK_TIMEOUT", "must be positive")
		}
		for ch, name := range map[ledger.Channel]string{ledger.Email: "EMAIL_TRANSPORT", ledger.SMS: "SMS_TRANSPORT"} {
			switch t := s.Transports[ch]; {
			case t == TransportWebhook:
				if s.WebhookURL == "" {
					bad("WEBHOOK_URL", "required when "+name+"=webhook")
				} else if !strings.HasPrefix(s.WebhookURL, "https://") && !strings.HasPrefix(s.WebhookURL, "http://127.0.0.1") && !strings.HasPrefix(s.WebhookURL, "http://localhost") {
					bad("WEBHOOK_URL", "must be https (plain http only on loopback)")
				}
			case t == TransportSES && ch == ledger.Email:
				if s.SESFrom == "" {
					bad("SES_FROM_ADDRESS", "required when EMAIL_TRANSPORT=ses")
				}
			case t == TransportSMS && ch == ledger.SMS:
			default:
				bad(name, "unknown transport (email: ses|webhook, sms: sms|webhook)")
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, fmt.Errorf("%s configuration: %w", role, err)
	}
	return s, nil
}
