// Package metrics writes CloudWatch Embedded Metric Format (EMF) records.
// In Lambda, a JSON line on stdout in this format becomes a metric without a
// PutMetricData call, so functions need no CloudWatch permission (and an
// organization may deny cloudwatch:PutMetricData on Namespace to everyone:
// docs/deploy.md). Every record carries the stage (DimStage).
package metrics

import (
	"encoding/json"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace of every ledger metric.
const Namespace = "ResetLedger"

// Metric names. Dimensions are noted beside each.
const (
	Transitions     = "Transitions"               // State, Channel: rows entering a state
	ContentMismatch = "ContentMismatch"           // none: blocked redeliveries with other content
	RejectedIntents = "RejectedIntents"           // Reason: intents refused at the boundary
	OpenClaims      = "OpenClaims"                // State: open rows now
	OldestOpenAge   = "OpenClaimOldestAgeSeconds" // State: age of the oldest open row
	OpenClaimsByAge = "OpenClaimsByAge"           // State, AgeBucket
	SweepErrors     = "SweepErrors"               // Sweep: rows one sweep failed on
	// SweepHeartbeat is 1 at the start of every sweep run, failed or not:
	// its absence means the schedule, the function or its start-up is broken.
	SweepHeartbeat = "SweepHeartbeat" // Sweep

	// NotSent counts provider answers that proved a message was not taken
	// for now (throttling, quotas, a paused account); each is retried.
	NotSent = "NotSent" // Channel, Code
	// Retries counts transport attempts after the first one of a row.
	Retries = "Retries" // Channel
	// BudgetWait is how long dispatch waited in-process for a send-rate
	// budget slot, in milliseconds, one value per send that waited.
	BudgetWait = "BudgetWaitMilliseconds" // Channel
	// BudgetDeferrals counts rows deferred because the budget had no slot
	// within BUDGET_MAX_WAIT: they wait in the dispatch queue instead.
	BudgetDeferrals = "BudgetDeferrals" // Channel
	// ExpiredUnsent counts rows that were claimed and ended expired without
	// any send the provider took: the player never got the message.
	ExpiredUnsent = "ExpiredUnsent" // Channel
	// Redriven counts due rows that reconcile handed back to dispatch
	// because no dispatch had picked them up in time.
	Redriven = "Redriven" // State
	// WakeFailures counts deferred rows whose wake-up message could not be
	// queued; reconcile's re-drive picks them up instead.
	WakeFailures = "WakeFailures" // none
	// ContradictedRecords counts records a function was handed that its
	// source contradicts: for dispatch, a stream image that differs from
	// the row at the same version (or was never written); for the digest
	// function, a record the stream itself does not hold. No write
	// follows. Any is an alarm: only a forged invocation produces one.
	ContradictedRecords = "ContradictedRecords" // none

	// ProviderEvents counts provider events recorded in a row's history,
	// by the history entry kind they became (provider_sent, delivered,
	// bounced, complained, delivery_delayed, provider_rejected,
	// delivery_failed). The sends reported by SES (provider_sent on email)
	// are the denominator of the bounce and complaint rates.
	ProviderEvents = "ProviderEvents" // Channel, Kind
	// Bounces counts SES bounce events by bounce type (Permanent,
	// Transient, Undetermined); Complaints counts complaint events.
	Bounces    = "Bounces"    // BounceType
	Complaints = "Complaints" // none
	// ResolvedByEvent counts unknown or quarantined rows that a provider
	// event resolved to accepted, without an operator.
	ResolvedByEvent = "ResolvedByEvent" // Channel
	// ProviderEventsRefused counts provider events not recorded on a row:
	// malformed, not ours (no dedupe key), without a valid attempt proof,
	// or for a row that does not exist or has another channel. Each is
	// logged with its reason; the ones that may be ours are dead-lettered.
	ProviderEventsRefused = "ProviderEventsRefused" // Reason
	// LimitStops counts messages a send limit stopped (they end limited)
	// or a newer challenge superseded (they end suppressed), by the rule
	// (ledger.Rules). Nothing was sent for any of them.
	LimitStops = "LimitStops" // Rule
	// DuplicateProviderEvents counts provider events a row already held.
	DuplicateProviderEvents = "DuplicateProviderEvents" // none
)

// Dimension names of the metrics above.
const (
	DimState      = "State"      // a ledger.State
	DimChannel    = "Channel"    // a ledger.Channel
	DimCode       = "Code"       // a provider's not-sent code
	DimSweep      = "Sweep"      // the sweeping function: reconcile or expire
	DimReason     = "Reason"     // why an intent was refused
	DimAgeBucket  = "AgeBucket"  // an age range of open rows
	DimKind       = "Kind"       // a history entry kind of a provider event
	DimBounceType = "BounceType" // an SES bounce type
	DimRule       = "Rule"       // a send limit's rule (ledger.Rule)
	// DimStage is on every record the functions write (Emitter): the stage's
	// prefix, so two stages in one account and Region never share a metric
	// and one cannot mask the other's (a heartbeat, a gap count).
	DimStage = "Stage"
)

// Values of the Reason dimension of ProviderEventsRefused. The first four
// are kept in the provider-events DLQ; the last three are acknowledged.
const (
	RefusedMalformed       = "malformed"        // not a readable provider event
	RefusedUnsupported     = "unsupported_type" // a provider event type the decoder does not know
	RefusedUnmatched       = "unmatched"        // no ledger row for the event's dedupe key
	RefusedChannelMismatch = "channel_mismatch" // the row is of the other channel
	RefusedNotOurs         = "not_ours"         // no dedupe key: another sender's message
	RefusedIgnoredType     = "ignored_type"     // opens, clicks, subscriptions, voice and MMS
	// RefusedUnproven: no valid proof that the event answers an attempt
	// this system made (ledger.ErrUnproven): forged, or sent before attempt
	// proofs existed. It is evidence of nothing, so it is not kept.
	RefusedUnproven = "unproven"
)

// BouncePermanent is the BounceType of a hard bounce.
const BouncePermanent = "Permanent"

// Emitter writes EMF records to W. It is safe for concurrent use.
type Emitter struct {
	mu  sync.Mutex
	W   io.Writer
	Now func() time.Time
	// Stage is the Stage dimension (DimStage) of every record. Empty: the
	// stage the running Lambda function's name says (StageOf of
	// AWS_LAMBDA_FUNCTION_NAME, which Lambda sets), read at the first
	// record; outside Lambda (tests, ledgerctl), no Stage dimension.
	Stage string

	stageOnce sync.Once
	stage     string
}

// StageOf is the stage a function's name says: the stack names each
// function "<prefix>-<role>" (infra/functions.go), and no role has a dash,
// so the stage is the name up to its last dash ("resetledger-prod" for
// "resetledger-prod-digest"). "" for a name without one. The name is
// unique in an account and Region, so its prefix is the stage's own.
func StageOf(functionName string) string {
	i := strings.LastIndexByte(functionName, '-')
	if i <= 0 {
		return ""
	}
	return functionName[:i]
}

// stageDim is the Stage dimension's value, "" for none.
func (e *Emitter) stageDim() string {
	if e.Stage != "" {
		return e.Stage
	}
	e.stageOnce.Do(func() { e.stage = StageOf(os.Getenv("AWS_LAMBDA_FUNCTION_NAME")) })
	return e.stage
}

// Emit writes one record: the metrics in values, all with the same
// dimensions and unit ("Count", "Seconds").
func (e *Emitter) Emit(dims map[string]string, unit string, values map[string]float64) error {
	if e == nil || e.W == nil || len(values) == 0 {
		return nil
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	if stage := e.stageDim(); stage != "" {
		dims = maps.Clone(dims)
		if dims == nil {
			dims = map[string]string{}
		}
		dims[DimStage] = stage
	}
	dimNames := slices.Sorted(maps.Keys(dims))
	if dimNames == nil {
		dimNames = []string{}
	}
	var defs []map[string]string
	rec := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(values)) {
		defs = append(defs, map[string]string{"Name": name, "Unit": unit})
		rec[name] = values[name]
	}
	for k, v := range dims {
		rec[k] = v
	}
	rec["_aws"] = map[string]any{
		"Timestamp": now().UnixMilli(),
		"CloudWatchMetrics": []map[string]any{{
			"Namespace": Namespace, "Dimensions": [][]string{dimNames}, "Metrics": defs,
		}},
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, err = e.W.Write(append(b, '\n'))
	return err
}

// Count emits a single count metric.
func (e *Emitter) Count(name string, dims map[string]string, v float64) error {
	return e.Emit(dims, "Count", map[string]float64{name: v})
}
