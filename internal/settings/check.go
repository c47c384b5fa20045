package settings

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/webhooktransport"
)

// A Problem is one setting the functions would refuse, and why.
type Problem struct {
	Var *Var // nil for a problem of the policy as a whole
	Why string
}

func (p Problem) Error() string {
	if p.Var == nil {
		return "policy: " + p.Why
	}
	return p.Var.Env + ": " + p.Why
}

// Check reports every value of s that a function of roles would refuse at
// start: a value out of its variable's range, and what a role needs
// together (a transport's address or URL, a wait dispatch can keep). It
// does not report required variables that are unset: Load does, and the
// stack sets those from its resources. The stack checks its functions'
// settings with it before it defines anything.
func (s Settings) Check(roles ...Role) []Problem {
	var problems []Problem
	add := func(v *Var, why string) {
		for _, p := range problems {
			if p.Var == v && p.Why == why {
				return
			}
		}
		problems = append(problems, Problem{v, why})
	}
	for _, v := range Vars {
		if err := v.field.check(&s); err != nil {
			add(v, err.Error())
		}
		if v.Default != "" && v.Text(s) == "" {
			// Environ leaves it out, and the functions would read the default.
			add(v, "must not be empty: the functions read an empty variable as unset, which is "+v.Default)
		}
	}
	if s.OpenIndexShards > MaxOpenIndexShards {
		add(OpenIndexShards, "must be at most "+strconv.Itoa(MaxOpenIndexShards)+" (every sweep queries each shard of each open state)")
	}
	if s.DigestInterval > 5*time.Minute {
		add(DigestInterval, "must be at most 5m (the longest batching window Lambda allows on a stream)")
	}
	// The policy's own fields and their relations: ledger.Policy.Validate
	// owns them, and its message is reported against the variable that
	// sets the field. A role is told only of the fields it reads (a field
	// it does not read holds the default there, not the stage's value);
	// the stack checks every role at once, so it is told of every one.
	reads := func(field string) bool {
		v := policyVars[field]
		return field == "" || len(roles) == 0 || v == nil || slices.ContainsFunc(roles, v.Reads)
	}
	for _, pe := range s.Policy.Problems() {
		if !reads(pe.Field) || !reads(pe.Related) {
			continue
		}
		why := pe.Why
		if v := policyVars[pe.Related]; v != nil {
			why = strings.Replace(why, pe.Related, v.Env, 1)
		}
		add(policyVars[pe.Field], why)
	}
	for _, role := range roles {
		s.checkRole(role, add)
	}
	return problems
}

// checkRole reports what role needs of settings together.
func (s Settings) checkRole(role Role, add func(*Var, string)) {
	if role == Dispatch && s.Policy.BudgetWait < time.Second {
		// Wake-ups travel with whole-second SQS delays and may arrive up to
		// a second early; dispatch waits that second out in-process.
		add(BudgetMaxWait, "must be at least 1s (wake-up delays are whole seconds)")
	}
	if !role.sends() {
		return
	}
	if s.WebhookTimeout <= 0 {
		add(WebhookTimeout, "must be positive")
	}
	// Reconcile sweeps a dispatching row to unknown once its lease is over,
	// and lets a same-key retry start only if it is over within its lease
	// before the transport forgets the key, cutting the retry's call there
	// (reconcile.Reconciler.Reconcile). A transport that may wait longer than the
	// lease would have its answer cut or overtaken.
	for v, timeout := range s.transportTimeouts() {
		if timeout > s.Policy.Lease {
			add(v, "must be at most "+LeaseDuration.Env+" ("+FormatDuration(s.Policy.Lease)+"): a retry's call is cut at its lease, and a dispatching row is unknown after it")
		}
	}
	for _, c := range Channels {
		v := TransportVar[c.Channel]
		switch kind := s.Transports[c.Channel]; {
		case !slices.Contains(c.Kinds, kind):
			add(v, "unknown transport ("+transportKinds()+")")
		case kind == TransportWebhook:
			if s.WebhookURL == "" {
				add(WebhookURL, "required when "+v.Env+"="+TransportWebhook)
			} else if _, err := webhooktransport.ParseURL(s.WebhookURL); err != nil {
				add(WebhookURL, err.Error())
			}
		case kind == TransportSES:
			if s.SESFrom == "" {
				add(SESFromAddress, "required when "+v.Env+"="+TransportSES)
			} else if !strings.Contains(s.SESFrom, "@") {
				add(SESFromAddress, "must be an email address")
			}
		}
	}
}

// transportTimeouts returns every setting that bounds one transport call,
// with its value. The SES and SMS transports have none of their own: their
// calls end with their context (the send deadline, and a retry's lease).
func (s Settings) transportTimeouts() map[*Var]time.Duration {
	return map[*Var]time.Duration{WebhookTimeout: s.WebhookTimeout}
}

// policyVars is the variable that sets each field of ledger.Policy.
var policyVars = map[string]*Var{
	"Version": PolicyVersion, "Lease": LeaseDuration, "ExpiryMargin": ExpiryMargin, "SendGuard": SendGuard,
	"Retention": HistoryRetention, "MaxAttempts": ReconcileMaxAttempts, "SettlePeriod": LookupSettlePeriod,
	"FallbackWait": FallbackDeliveryWait, "RecheckAfter": RecheckAfter, "RetryBase": RetryBackoffBase,
	"RetryMax": RetryBackoffMax, "BudgetWait": BudgetMaxWait, "RedriveAfter": RedriveAfter,
	"MaxChallengeLifetime": MaxChallengeLifetime,
}
