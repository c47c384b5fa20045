package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// alarmPeriod is the period of the alarms on AWS metrics (Lambda, SQS) and on event counts.
const alarmPeriod = 5 * time.Minute

// sweepPeriod is the period of alarms on figures a sweep publishes once per run at rate: at
// least two runs per period, so one late schedule tick is not missing data.
func sweepPeriod(rate time.Duration) time.Duration { return max(alarmPeriod, 2*rate) }

// openStateAlarm is the alarm kept on one open state's figures.
type openStateAlarm struct {
	ID          string
	Description string
	Metric      string // metrics.OpenClaims or metrics.OldestOpenAge
	Threshold   float64
	Operator    awscloudwatch.ComparisonOperator
}

// openStateAlarms returns one alarm per open state of the domain (ledger.States with Open()), with
// thresholds derived from the props. An open state without a rule in openStateRules is an error,
// so a new state cannot reach a stack without an alarm and a dashboard series.
func (p *LedgerStackProps) openStateAlarms() (map[ledger.State]openStateAlarm, error) {
	rules := p.openStateRules()
	out := map[ledger.State]openStateAlarm{}
	for _, s := range ledger.States {
		if !s.Open() {
			continue
		}
		a, ok := rules[s]
		if !ok {
			return nil, fmt.Errorf("infra: open state %q has no alarm rule: add one in openStateRules", s)
		}
		out[s] = a
	}
	return out, nil
}

// openStateRules is the alarm rule of every open state the stack knows, whether or not the
// domain has it yet.
func (p *LedgerStackProps) openStateRules() map[ledger.State]openStateAlarm {
	age := func(s ledger.State, limit time.Duration, why string) openStateAlarm {
		return openStateAlarm{
			ID:          "Oldest" + title(s) + "Age",
			Description: fmt.Sprintf("A claim has been %s and due for more than %v (%s).", s, limit, why),
			Metric:      metrics.OldestOpenAge, Threshold: limit.Seconds(),
			Operator: awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD,
		}
	}
	count := func(s ledger.State, why string) openStateAlarm {
		return openStateAlarm{
			ID: title(s) + "Claims", Description: fmt.Sprintf("Claims in state %s: %s", s, why),
			Metric: metrics.OpenClaims, Threshold: 1,
			Operator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		}
	}
	// OldestOpenAge is how long past due the earliest due row of a state is (ledger.ReadStats, from
	// the open-row index: a held or claimed row is due at its challenge's expiry, a dispatching
	// row at its lease's end, a deferred row at its next attempt). Held and claimed rows past
	// their expiry are closed by the expire sweep on its next run: past due by two sweeps, it is
	// not closing them. A dispatching row past its lease is moved to unknown by the next
	// reconcile. A deferred row waits for its wake-up, which a surge's queue may hold back; past
	// due by the longest challenge plus two expire sweeps, its challenge has expired and nothing
	// closed it. How many rows are deferred is no alarm: a surge defers rows by design.
	expireBound := 2 * p.ExpireRate
	expiring := fmt.Sprintf("two expire sweeps past the challenge's expiry, %v): the expire sweep is not closing expired rows", expireBound)
	return map[ledger.State]openStateAlarm{
		ledger.Held:    age(ledger.Held, expireBound, expiring),
		ledger.Claimed: age(ledger.Claimed, expireBound, expiring),
		ledger.Deferred: age(ledger.Deferred, p.Functions.Policy.MaxChallengeLifetime+2*p.ExpireRate, fmt.Sprintf("past its next attempt by the longest "+
			"challenge, %v, plus two expire sweeps): no wake-up or re-drive sent it and the expire sweep is not closing it", p.Functions.Policy.MaxChallengeLifetime)),
		ledger.Dispatching: age(ledger.Dispatching, 2*p.ReconcileRate, fmt.Sprintf("two reconcile sweeps past its lease of %v): "+
			"reconcile is not moving rows past their lease", p.Functions.Policy.Lease)),
		ledger.Unknown:     count(ledger.Unknown, "the transport outcome is uncertain and awaits reconciliation."),
		ledger.Quarantined: count(ledger.Quarantined, "the policy cannot resolve them; an operator must record a decision."),
	}
}

// observed is what the alarms and the dashboard watch.
type observed struct {
	fns      map[settings.Role]awslambda.Function
	intake   intake
	dispatch dispatchQueues
	events   providerEvents
	// ledger is the evidence: who changes its resource policy is watched (audit.go).
	ledger awsdynamodb.Table
	// digests are the signed digests' function, bucket and on-failure queue (digest.go).
	digests digests
	// stage is the Stage dimension of the functions' metrics: the stage's prefix.
	stage string
}

// observability defines the alarms and the dashboard. Every alarm is a plain single-metric alarm
// (the local emulator's CloudFormation rejects metric math). Missing data is treated by what its
// absence means: for activity counts (errors, throttles, queue depth) it means no activity
// (not breaching); for the sweep heartbeats and the open-claim figures it means the sweep did not
// run or could not look (breaching); the per-state alarms keep their state ("missing") instead of
// reporting OK without figures, and OpenClaimFiguresMissing reports the gap.
func (p *LedgerStackProps) observability(stack awscdk.Stack, o observed) error {
	stateAlarms, err := p.openStateAlarms()
	if err != nil {
		return err
	}
	w := &alarms{p: p, stack: stack}
	if p.AlarmTopicArn != "" {
		w.topic = awssns.Topic_FromTopicArn(stack, jsii.String("AlarmTopic"), jsii.String(p.AlarmTopicArn))
	}
	w.functions(o)
	w.sweeps()
	w.openStates(stateAlarms)
	w.queues(o)
	w.liveness(o)
	w.providerEvents(o)
	w.digests(o)
	if p.smsAlarmed() {
		w.smsSpend() // spend.go
	}
	if w.topic != nil {
		w.securityEvents(o) // audit.go
	}
	p.dashboard(stack, o, w.made)
	return nil
}

// alarms makes the stack's alarms, each notifying topic (if any), and keeps them for the
// dashboard in the order they were made.
type alarms struct {
	p     *LedgerStackProps
	stack awscdk.Stack
	topic awssns.ITopic
	made  []interfacesawscloudwatch.IAlarmRef
}

// Comparisons, missing-data treatments and statistics the alarms use.
var (
	gte       = awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	gt        = awscloudwatch.ComparisonOperator_GREATER_THAN_THRESHOLD
	lt        = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	quiet     = awscloudwatch.TreatMissingData_NOT_BREACHING
	breaching = awscloudwatch.TreatMissingData_BREACHING
)

func sumOver5m() *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: seconds(alarmPeriod)}
}

func maxOver5m() *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: seconds(alarmPeriod)}
}

// add makes one alarm whose description points at its runbook row.
func (w *alarms) add(id, desc string, metric awscloudwatch.IMetric, threshold float64, op awscloudwatch.ComparisonOperator, missing awscloudwatch.TreatMissingData) {
	a := awscloudwatch.NewAlarm(w.stack, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmName:          jsii.String(w.p.Prefix + "-" + id),
		AlarmDescription:   jsii.String(desc + " Runbook: docs/operations.md, Alarms and what to do, " + id + "."),
		Metric:             metric,
		Threshold:          jsii.Number(threshold),
		ComparisonOperator: op,
		EvaluationPeriods:  jsii.Number(1),
		TreatMissingData:   missing,
	})
	if w.topic != nil {
		a.AddAlarmAction(awscloudwatchactions.NewSnsAction(w.topic))
		a.AddOkAction(awscloudwatchactions.NewSnsAction(w.topic))
	}
	w.made = append(w.made, a)
}

// functions: any error or throttle of a function; dispatch behind its stream; intents waiting.
// Claim and dispatch report per-record failures in their batch responses, so an Errors datapoint
// is a whole batch (or a crash or timeout).
func (w *alarms) functions(o observed) {
	p := w.p
	for _, name := range settings.Functions {
		fn, id := o.fns[name], title(name)
		w.add(id+"Errors", fmt.Sprintf("The %s function failed (error, crash or timeout).", name),
			fn.MetricErrors(sumOver5m()), 1, gte, quiet)
		w.add(id+"Throttles", fmt.Sprintf("The %s function was throttled.", name),
			fn.MetricThrottles(sumOver5m()), 1, gte, quiet)
	}
	w.add("DispatchIteratorAge", fmt.Sprintf("Dispatch is more than %v behind the ledger stream: new claims wait "+
		"while their challenges run out.", p.DispatchLagLimit),
		o.fns[settings.Dispatch].Metric(jsii.String("IteratorAge"), maxOver5m()), float64(p.DispatchLagLimit.Milliseconds()), gt, quiet)
	intentAge := 2 * p.IntentVisibilityTimeout
	w.add("IntentQueueOldestAge", fmt.Sprintf("An intent has waited more than %v (two visibility timeouts) in the "+
		"intent queue: claims keep failing or the claim function cannot keep up.", intentAge),
		o.intake.queue.MetricApproximateAgeOfOldestMessage(maxOver5m()), intentAge.Seconds(), gt, quiet)
}

// sweeps: a heartbeat per run (missing = breaching) and the rows a run failed on.
func (w *alarms) sweeps() {
	for _, name := range settings.Sweepers {
		id := title(name)
		w.add(id+"Heartbeat", fmt.Sprintf("No %s sweep started in the alarm period: its schedule, function or "+
			"start-up is broken.", name), w.p.sweepMetric(metrics.SweepHeartbeat, name, "SampleCount"), 1, lt, breaching)
		w.add(id+"SweepErrors", fmt.Sprintf("The %s sweep failed on rows (each is logged as \"%s row failed\").", name, name),
			w.p.sweepMetric(metrics.SweepErrors, name, "Sum"), 1, gte, quiet)
	}
}

// openStates: one alarm per open state of the domain, in lifecycle order, and one on the figures
// they need.
func (w *alarms) openStates(stateAlarms map[ledger.State]openStateAlarm) {
	var figuresState ledger.State
	for _, s := range ledger.States {
		a, ok := stateAlarms[s]
		if !ok {
			continue
		}
		if figuresState == ledger.None {
			figuresState = s
		}
		w.add(a.ID, a.Description+" Needs the open-claim figures reconcile publishes.",
			w.p.stateMetric(a.Metric, s, "Maximum"), a.Threshold, a.Operator, awscloudwatch.TreatMissingData_MISSING)
	}
	// Reconcile publishes every open state's figures together after each sweep, or none.
	w.add("OpenClaimFiguresMissing", "Reconcile published no open-claim figures in the alarm period: the state "+
		"alarms are blind (reconcile fails, or its stats query does).",
		w.p.stateMetric(metrics.OpenClaims, figuresState, "SampleCount"), 1, lt, breaching)
}

// queues: what reached a DLQ, and blocked content mismatches.
func (w *alarms) queues(o observed) {
	w.add("IntentDlqDepth", "Intents moved to the DLQ (poison input or repeated claim failures).",
		o.intake.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), 1, gte, quiet)
	w.add("StreamFailureDlqDepth", fmt.Sprintf("Dispatch gave up on stream records (evidence to inspect): reconcile "+
		"re-drives the claimed rows they name once they are %v past due.", w.p.Functions.Policy.RedriveAfter),
		o.dispatch.streamDLQ.MetricApproximateNumberOfMessagesVisible(maxOver5m()), 1, gte, quiet)
	w.add("ContentMismatch", "An identity arrived again with a different content hash (blocked, not sent).",
		emf(w.p.Prefix, metrics.ContentMismatch, nil, "Sum", seconds(alarmPeriod)), 0, gt, quiet)
	w.add("IntentSealRefused", "An intent's intent_mac did not verify under the intent key: its fields were changed "+
		"after the producer sealed them (a copy replayed from the queue or its DLQ, or a direct invoke), or it was "+
		"sealed with another key. Refused before any row; it reaches the intent DLQ after the receive count.",
		emf(w.p.Prefix, metrics.RejectedIntents, map[string]*string{metrics.DimReason: jsii.String("intent_mac")}, "Sum", seconds(alarmPeriod)), 0, gt, quiet)
}

// liveness under provider throttling. A not-sent answer is retried and a budget deferral waits in
// the dispatch queue by design, so neither pages (the dashboard shows them during a surge); what
// pages is the outcome: a claimed message that expired unsent, and a dispatch queue that is not
// drained. One alarm per channel: the emulator's CloudFormation rejects the metric math that
// would sum them.
func (w *alarms) liveness(o observed) {
	for _, ch := range ledger.Channels {
		w.add("ExpiredUnsent"+title(string(ch)), fmt.Sprintf("A claimed %s message expired without any send the "+
			"provider took: the player never got it.", ch),
			emf(w.p.Prefix, metrics.ExpiredUnsent, channelDim(ch), "Sum", seconds(alarmPeriod)), 0, gt, quiet)
	}
	w.limits()
	w.add("DispatchQueueDlqDepth", "Dispatch-queue messages dispatch kept failing on moved to the DLQ (evidence to inspect: "+
		"reconcile re-drives the rows they name).",
		o.dispatch.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), 1, gte, quiet)
	queueAge := w.p.dispatchQueueAgeLimit()
	w.add("DispatchQueueOldestAge", fmt.Sprintf("A message has waited more than %v in the dispatch queue (the longest "+
		"wake-up delay, %v, plus two re-drive periods): dispatch is not draining the queue.", queueAge, maxWakeDelay),
		o.dispatch.queue.MetricApproximateAgeOfOldestMessage(maxOver5m()), queueAge.Seconds(), gt, quiet)
}

// limitStopsPerHour is how many messages one send limit may stop in an hour before its alarm
// tells an operator: a few stops are the limits working (a player asking again and again); this
// many is someone bombing a destination or pumping SMS through the reset form.
const limitStopsPerHour = 50

// limits: one alarm per send limit when it stops more than limitStopsPerHour messages in an hour,
// and the global SMS cap's circuit breaker, which pages on the first stop: SMS is off until the
// window ends.
func (w *alarms) limits() {
	hour := awscdk.Duration_Hours(jsii.Number(1))
	for _, rule := range ledger.Rules {
		dim := map[string]*string{metrics.DimRule: jsii.String(string(rule))}
		switch rule {
		case ledger.RuleSuperseded:
			continue // a player asking again: the rule working, never an incident
		case ledger.RuleSMSGlobal:
			w.add("LimitSMSGlobal", "The global SMS cap (LIMIT_SMS_GLOBAL) was reached: no SMS is sent until its "+
				"window ends. Pumping through the reset form, or a traffic peak above the cap.",
				emf(w.p.Prefix, metrics.LimitStops, dim, "Sum", seconds(alarmPeriod)), 0, gt, quiet)
		default:
			w.add("LimitStops"+limitTitle(rule), fmt.Sprintf("The %s send limit stopped more than %d messages in an hour: "+
				"email bombing or SMS pumping through the reset form.", rule, limitStopsPerHour),
				emf(w.p.Prefix, metrics.LimitStops, dim, "Sum", hour), limitStopsPerHour, gt, quiet)
		}
	}
}

// limitTitle writes a rule as part of an alarm name: sms-country-cap is SmsCountryCap.
func limitTitle(r ledger.Rule) string {
	var b strings.Builder
	for _, part := range strings.Split(string(r), "-") {
		b.WriteString(title(part))
	}
	return b.String()
}

// SES reviews an account whose bounce rate reaches 5% or whose complaint rate reaches 0.1%, and
// may pause its sending at 10% or 0.5% (or when a review ends without improvement): see "Why is
// my Amazon SES sending account under review or paused?" (AWS re:Post knowledge center,
// ses-resolve-account-review-pause) and the SES developer guide's reputation metrics pages. A
// paused account fails every reset email, so the alarms fire at half the review thresholds:
// time to act before a review, not after.
const (
	sesReviewBounceRate    = 0.05
	sesReviewComplaintRate = 0.001
	bounceRateLimit        = sesReviewBounceRate / 2    // 2.5%
	complaintRateLimit     = sesReviewComplaintRate / 2 // 0.05%
	// rateWindow is the window of the system's own rates, and rateMinSends the sends it needs in
	// that window before a rate means anything: one bounce among three sends pages no one.
	rateWindow   = time.Hour
	rateMinSends = 100
)

// providerEvents: the SES account's reputation as SES measures it, the system's own bounce and
// complaint rates (earlier and per stage), provider events that failed or matched nothing.
func (w *alarms) providerEvents(o observed) {
	p := w.p
	if o.events.sesSet != "" {
		reputation := func(name string) awscloudwatch.Metric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/SES"), MetricName: jsii.String(name),
				Statistic: jsii.String("Maximum"), Period: seconds(rateWindow),
			})
		}
		// SES publishes the account's rates over its own window, not every period: a gap keeps
		// the alarm's state.
		w.add("SesBounceRate", fmt.Sprintf("The SES account's bounce rate is above %.1f%% (SES reviews the account at "+
			"%.0f%% and may pause all sending at 10%%).", 100*bounceRateLimit, 100*sesReviewBounceRate),
			reputation("Reputation.BounceRate"), bounceRateLimit, gt, awscloudwatch.TreatMissingData_MISSING)
		w.add("SesComplaintRate", fmt.Sprintf("The SES account's complaint rate is above %.2f%% (SES reviews the account "+
			"at %.1f%% and may pause all sending at 0.5%%).", 100*complaintRateLimit, 100*sesReviewComplaintRate),
			reputation("Reputation.ComplaintRate"), complaintRateLimit, gt, awscloudwatch.TreatMissingData_MISSING)
		if !p.SkipMathAlarms {
			w.add("EmailBounceRate", fmt.Sprintf("More than %.1f%% of this stage's email sends in the last hour bounced "+
				"permanently (with at least %d sends).", 100*bounceRateLimit, rateMinSends),
				sendRate(p.Prefix, "permanent bounces", emf(w.p.Prefix, metrics.Bounces, map[string]*string{metrics.DimBounceType: jsii.String(metrics.BouncePermanent)},
					"Sum", seconds(rateWindow))), bounceRateLimit, gt, quiet)
			w.add("EmailComplaintRate", fmt.Sprintf("More than %.2f%% of this stage's email sends in the last hour drew a "+
				"complaint (with at least %d sends).", 100*complaintRateLimit, rateMinSends),
				sendRate(p.Prefix, "complaints", emf(w.p.Prefix, metrics.Complaints, nil, "Sum", seconds(rateWindow))), complaintRateLimit, gt, quiet)
		}
	}
	w.add("ProviderEventsDlqDepth", fmt.Sprintf("Provider events the events function refused (malformed, unknown type, "+
		"no row, other channel) or failed to record on every receive moved to the DLQ: their rows miss the event. No one "+
		"can read the DLQ (only the events role may decrypt it) or redrive it (only the topic may send to the queue): "+
		"the events function's log names each one (dedupe key, reason or error). They expire %d days after their arrival.",
		int(providerEventsDLQRetention.Hours()/24)),
		o.events.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), 1, gte, quiet)
	age := 2 * providerEventsVisibility
	w.add("ProviderEventsQueueOldestAge", fmt.Sprintf("A provider event has waited more than %v (two visibility "+
		"timeouts) in the provider events queue: the events function fails or does not keep up.", age),
		o.events.queue.MetricApproximateAgeOfOldestMessage(maxOver5m()), age.Seconds(), gt, quiet)
	for _, r := range []struct{ id, reason, desc string }{
		{"ProviderEventsUnmatched", metrics.RefusedUnmatched, "A provider event carried a dedupe key no ledger row has."},
		{"ProviderEventsChannelMismatch", metrics.RefusedChannelMismatch, "A provider event named a row of the other channel."},
		{"ProviderEventsUnproven", metrics.RefusedUnproven, "A provider event carried no valid proof that it answers an " +
			"attempt this stage made: forged, or from a send older than attempt proofs. It was refused and recorded nowhere."},
	} {
		w.add(r.id, r.desc, emf(w.p.Prefix, metrics.ProviderEventsRefused, map[string]*string{metrics.DimReason: jsii.String(r.reason)},
			"Sum", seconds(alarmPeriod)), 0, gt, quiet)
	}
}

// sendRate is count per email send SES reported in the rate window, 0 below rateMinSends sends.
func sendRate(stage, label string, count awscloudwatch.IMetric) awscloudwatch.IMetric {
	sends := emf(stage, metrics.ProviderEvents, map[string]*string{
		metrics.DimChannel: jsii.String(string(ledger.Email)), metrics.DimKind: jsii.String(string(ledger.KindProviderSent)),
	}, "Sum", seconds(rateWindow))
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression:   jsii.String(fmt.Sprintf("IF(sends >= %d, n / sends, 0)", rateMinSends)),
		UsingMetrics: &map[string]awscloudwatch.IMetric{"n": count, "sends": sends},
		Label:        jsii.String(label + " per email send"),
		Period:       seconds(rateWindow),
	})
}

// emf is one of the functions' EMF metrics of this stage: every record the functions write carries
// the Stage dimension, the prefix their names begin with (internal/metrics), so the metric of
// another stage in the same account and Region, same name and other dimensions alike, is another
// metric and cannot mask this one.
func emf(stage, name string, dims map[string]*string, stat string, period awscdk.Duration) awscloudwatch.Metric {
	withStage := map[string]*string{metrics.DimStage: jsii.String(stage)}
	for k, v := range dims {
		withStage[k] = v
	}
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
		DimensionsMap: &withStage, Statistic: jsii.String(stat), Period: period,
	})
}

// stageSearch is a dashboard search of this stage's metric name over the dimensions dims.
func stageSearch(stage, name string, dims ...string) *string {
	return jsii.String(fmt.Sprintf(`SEARCH('{%s,%s,%s} %s="%s" MetricName="%s"', 'Sum', %d)`,
		metrics.Namespace, strings.Join(dims, ","), metrics.DimStage, metrics.DimStage, stage, name, int(alarmPeriod.Seconds())))
}

// stateMetric is an open-claim figure of state s, which reconcile publishes once per run.
func (p *LedgerStackProps) stateMetric(name string, s ledger.State, stat string) awscloudwatch.Metric {
	return emf(p.Prefix, name, map[string]*string{metrics.DimState: jsii.String(string(s))}, stat, seconds(sweepPeriod(p.ReconcileRate)))
}

// sweepMetric is a figure a sweep publishes once per run.
func (p *LedgerStackProps) sweepMetric(name string, sweep settings.Role, stat string) awscloudwatch.Metric {
	rate, _ := p.sweepRate(sweep)
	return emf(p.Prefix, name, map[string]*string{metrics.DimSweep: jsii.String(string(sweep))}, stat, seconds(sweepPeriod(rate)))
}

// dispatchQueueAgeLimit is the DispatchQueueOldestAge threshold. A wake-up legitimately waits
// its delay, up to maxWakeDelay, and is then received within seconds (the mapping long-polls).
// Reconcile re-drives a due row RedriveAfter past due, through the same queue; a message still
// there two re-drive periods after the longest delay means dispatch is not consuming the queue
// (mapping disabled, function failing or throttled, or MaximumConcurrency too low for the
// backlog), and re-drives cannot help.
func (p *LedgerStackProps) dispatchQueueAgeLimit() time.Duration {
	return maxWakeDelay + 2*p.Functions.Policy.RedriveAfter
}

// channelDim is the Channel dimension of the per-channel EMF metrics.
func channelDim(ch ledger.Channel) map[string]*string {
	return map[string]*string{metrics.DimChannel: jsii.String(string(ch))}
}

// dashboard shows the state of every alarm, every open state's count and oldest age, the
// functions, the triggers and the DLQs, dispatch under provider throttling, and the sweeps.
func (p *LedgerStackProps) dashboard(stack awscdk.Stack, o observed, alarms []interfacesawscloudwatch.IAlarmRef) {
	var counts, ages []awscloudwatch.IMetric
	for _, s := range ledger.States {
		if s.Open() {
			counts = append(counts, labelled(p.stateMetric(metrics.OpenClaims, s, "Maximum"), string(s)))
			ages = append(ages, labelled(p.stateMetric(metrics.OldestOpenAge, s, "Maximum"), string(s)))
		}
	}
	var errs, throttles []awscloudwatch.IMetric
	for _, name := range settings.Functions {
		sum := &awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: seconds(alarmPeriod), Label: jsii.String(string(name))}
		errs = append(errs, o.fns[name].MetricErrors(sum))
		throttles = append(throttles, o.fns[name].MetricThrottles(sum))
	}
	var heartbeats, sweepErrs []awscloudwatch.IMetric
	for _, name := range settings.Sweepers {
		heartbeats = append(heartbeats, labelled(p.sweepMetric(metrics.SweepHeartbeat, name, "SampleCount"), string(name)))
		sweepErrs = append(sweepErrs, labelled(p.sweepMetric(metrics.SweepErrors, name, "Sum"), string(name)))
	}
	rows := []*[]awscloudwatch.IWidget{
		{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("Alarms"), Alarms: &alarms, Width: jsii.Number(24),
			SortBy: awscloudwatch.AlarmStatusWidgetSortBy_STATE_UPDATED_TIMESTAMP,
		})},
		{graph("Open claims by state", counts, 12), graph("Oldest open claim age (s) by state", ages, 12)},
		{graph("Function errors", errs, 12), graph("Function throttles", throttles, 12)},
		{
			graph("Dispatch stream lag (ms)", []awscloudwatch.IMetric{o.fns[settings.Dispatch].Metric(jsii.String("IteratorAge"), maxOver5m())}, 8),
			graph("Oldest intent in the queue (s)", []awscloudwatch.IMetric{o.intake.queue.MetricApproximateAgeOfOldestMessage(maxOver5m())}, 8),
			graph("DLQ depth", []awscloudwatch.IMetric{
				labelled(o.intake.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "intent DLQ"),
				labelled(o.dispatch.streamDLQ.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "stream failure DLQ"),
				labelled(o.dispatch.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "dispatch queue DLQ"),
				labelled(o.events.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "provider events DLQ"),
			}, 8),
		},
	}
	rows = append(rows, providerEventWidgets(o))
	rows = append(rows, livenessWidgets(o)...)
	rows = append(rows, &[]awscloudwatch.IWidget{graph("Sweep runs (heartbeat)", heartbeats, 12), graph("Sweep row errors", sweepErrs, 12)})
	d := o.digests
	rows = append(rows, &[]awscloudwatch.IWidget{
		graph("Digests written, rows digested, gaps", []awscloudwatch.IMetric{
			labelled(emf(p.Prefix, metrics.DigestsWritten, nil, "Sum", seconds(alarmPeriod)), "digests"),
			labelled(emf(p.Prefix, metrics.DigestRows, nil, "Sum", seconds(alarmPeriod)), "rows"),
			labelled(emf(p.Prefix, metrics.DigestGaps, nil, "Sum", seconds(alarmPeriod)), "gaps"),
		}, 12),
		graph("Digest stream lag (ms)", []awscloudwatch.IMetric{d.fn.Metric(jsii.String("IteratorAge"), maxOver5m())}, 6),
		graph("Digest failures", []awscloudwatch.IMetric{
			labelled(d.fn.MetricErrors(sumOver5m()), "function errors"),
			labelled(d.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "failure DLQ"),
		}, 6),
	})
	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(p.Prefix),
		Widgets:       &rows,
	})
}

// livenessWidgets show dispatch under provider throttling: what the provider refused, what
// dispatch retried, waited for and deferred, what expired unsent, and what reconcile handed back.
func livenessWidgets(o observed) []*[]awscloudwatch.IWidget {
	period := seconds(alarmPeriod)
	perChannel := func(name string, stats ...string) []awscloudwatch.IMetric {
		var out []awscloudwatch.IMetric
		for _, ch := range ledger.Channels {
			for _, stat := range stats {
				label := string(ch)
				if len(stats) > 1 {
					label += " " + stat
				}
				out = append(out, labelled(emf(o.stage, name, channelDim(ch), stat, period), label))
			}
		}
		return out
	}
	// The provider's codes are open-ended, so the not-sent series come from a search (allowed on
	// a dashboard, unlike in an alarm).
	notSent := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: stageSearch(o.stage, metrics.NotSent, metrics.DimChannel, metrics.DimCode),
		Label:      jsii.String(""), Period: period, UsingMetrics: &map[string]awscloudwatch.IMetric{},
	})
	var redriven []awscloudwatch.IMetric
	for _, s := range ledger.States {
		if s.Open() {
			redriven = append(redriven, labelled(emf(o.stage, metrics.Redriven, map[string]*string{metrics.DimState: jsii.String(string(s))}, "Sum", period),
				"re-driven from "+string(s)))
		}
	}
	redriven = append(redriven, labelled(emf(o.stage, metrics.WakeFailures, nil, "Sum", period), "wake-ups not queued"))
	queueDepth := []awscloudwatch.IMetric{
		labelled(o.dispatch.queue.MetricApproximateNumberOfMessagesVisible(maxOver5m()), "visible"),
		labelled(o.dispatch.queue.MetricApproximateNumberOfMessagesDelayed(maxOver5m()), "delayed (wake-ups)"),
		labelled(o.dispatch.queue.MetricApproximateNumberOfMessagesNotVisible(maxOver5m()), "in flight"),
	}
	return []*[]awscloudwatch.IWidget{
		{graph("Not sent by channel and code (provider refused for now)", []awscloudwatch.IMetric{notSent}, 12),
			graph("Retries by channel", perChannel(metrics.Retries, "Sum"), 12)},
		{graph("Budget wait (ms) by channel", perChannel(metrics.BudgetWait, "p99", "Maximum"), 8),
			graph("Budget deferrals by channel", perChannel(metrics.BudgetDeferrals, "Sum"), 8),
			graph("Expired unsent by channel", perChannel(metrics.ExpiredUnsent, "Sum"), 8)},
		{graph("Re-drives by state, wake-ups not queued", redriven, 8),
			graph("Dispatch queue depth", queueDepth, 8),
			graph("Oldest message in the dispatch queue (s)", []awscloudwatch.IMetric{
				o.dispatch.queue.MetricApproximateAgeOfOldestMessage(maxOver5m())}, 8)},
	}
}

// providerEventWidgets show what the providers reported: events by channel and kind, bounces by
// type, complaints, rows resolved by an event, and events refused by reason. Kinds, bounce types
// and reasons come from searches (the providers' sets are open-ended).
func providerEventWidgets(o observed) *[]awscloudwatch.IWidget {
	period := seconds(alarmPeriod)
	search := func(dims []string, name string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: stageSearch(o.stage, name, dims...),
			Label:      jsii.String(""), Period: period, UsingMetrics: &map[string]awscloudwatch.IMetric{},
		})
	}
	var resolved []awscloudwatch.IMetric
	for _, ch := range ledger.Channels {
		resolved = append(resolved, labelled(emf(o.stage, metrics.ResolvedByEvent, channelDim(ch), "Sum", period), string(ch)))
	}
	return &[]awscloudwatch.IWidget{
		graph("Provider events by channel and kind", []awscloudwatch.IMetric{
			search([]string{metrics.DimChannel, metrics.DimKind}, metrics.ProviderEvents)}, 6),
		graph("Bounces by type, complaints", []awscloudwatch.IMetric{
			search([]string{metrics.DimBounceType}, metrics.Bounces),
			labelled(emf(o.stage, metrics.Complaints, nil, "Sum", period), "complaints")}, 6),
		graph("Unknown rows resolved by a provider event", resolved, 6),
		graph("Provider events refused by reason, duplicates", []awscloudwatch.IMetric{
			search([]string{metrics.DimReason}, metrics.ProviderEventsRefused),
			labelled(emf(o.stage, metrics.DuplicateProviderEvents, nil, "Sum", period), "duplicates")}, 6),
	}
}

func labelled(m awscloudwatch.Metric, label string) awscloudwatch.IMetric {
	return m.With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
}

func graph(title string, left []awscloudwatch.IMetric, width float64) awscloudwatch.IWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String(title), Left: &left, Width: jsii.Number(width),
	})
}

// validateObservability checks that the alarms notify someone where they must, and what they
// and the log groups need of the props.
func (p *LedgerStackProps) validateObservability(bad func(string, ...any)) {
	if p.RequireAlarmTopic {
		if p.AlarmTopicArn == "" {
			bad("AlarmTopicArn is empty: this stage's alarms would notify no one (pass alarmTopicArn=<SNS topic ARN>)")
		}
		if p.SkipObservability {
			bad("SkipObservability is set on a stage that requires alarms (RequireAlarmTopic)")
		}
	}
	if a := p.AlarmTopicArn; a != "" {
		if parts := strings.Split(a, ":"); len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" || parts[5] == "" {
			bad("AlarmTopicArn %q: want arn:<partition>:sns:<region>:<account>:<topic>", a)
		}
	}
	if p.Functions.Policy.MaxChallengeLifetime <= 0 {
		bad("MaxChallengeLifetime %v: want > 0", p.Functions.Policy.MaxChallengeLifetime)
	}
	if _, ok := retentionDays[p.LogRetentionDays]; !ok {
		bad("LogRetentionDays %d is not a CloudWatch Logs retention value", p.LogRetentionDays)
	}
}

// digests: the signed digests are evidence only while they keep up with the ledger. A gap the
// function recorded (records it never saw or could not read) pages at once; so does a batch the
// function failed on (it is retried in order, so every later record of its shard waits) and a
// batch it gave up on (its records were never digested). Its lag behind the stream pages long
// before the stream's 24-hour retention loses records. The heartbeat catches a function that
// silently stopped: no digest was written in a heartbeat period, quiet table or not.
func (w *alarms) digests(o observed) {
	d := o.digests
	w.add("DigestGaps", "The digest function recorded a gap in a digest: stream records it never saw (older than the "+
		"stream's 24 h retention, a skipped shard) or could not read, or a row whose history moved in a way a writer "+
		"never moves it. ledgerctl verify reports the rows.",
		emf(w.p.Prefix, metrics.DigestGaps, nil, "Sum", seconds(alarmPeriod)), 0, gt, quiet)
	// Forged events (issue 42): dispatch and the digest function count an event the table
	// contradicts (a stream image or queue message whose fields are not the row's) and write
	// nothing for it. Only an event nobody's trigger delivered makes one, so the first pages.
	w.add("ContradictedRecords", "A function was handed an event the ledger table contradicts (a stream record or "+
		"message whose expiry, subject, content hash or history head is not the row's) and wrote nothing for it: "+
		"someone invoked it with a forged event. Its log names the row.",
		emf(w.p.Prefix, metrics.ContradictedRecords, nil, "Sum", seconds(alarmPeriod)), 1, gte, quiet)
	w.add("DigestFailures", "The digest function failed a batch (error, crash or timeout): Lambda retries it in order, "+
		"so no later record of its shard is digested until it succeeds.",
		d.fn.MetricErrors(sumOver5m()), 1, gte, quiet)
	w.add("DigestFailureDlqDepth", "The digest function gave up on a stream batch (its records left the stream): "+
		"the rows it covered are not digested from those records. The message names the shard and sequence range.",
		d.dlq.MetricApproximateNumberOfMessagesVisible(maxOver5m()), 1, gte, quiet)
	w.add("DigestIteratorAge", fmt.Sprintf("The digest function is more than %v behind the ledger stream; at 24 h "+
		"DynamoDB Streams drops records and the digests get a gap.", digestLagLimit),
		d.fn.Metric(jsii.String("IteratorAge"), maxOver5m()), float64(digestLagLimit.Milliseconds()), gt, quiet)
	// The digest tick (DigestSchedule) writes a digest every DIGEST_INTERVAL when the table is
	// quiet, and the stream's batches write one whenever it is not: a period of three intervals
	// with no digest written means the digest function, its tick or its key or bucket stopped,
	// whatever the table did. Missing data is breaching: no digest is the finding. The metric
	// carries the stage (emf), so another stage's digests cannot hold it OK.
	w.add("DigestHeartbeat", fmt.Sprintf("No digest was written in %s: the digest function, its schedule, its stream "+
		"mapping, or the key or bucket it writes with stopped. A quiet table still gets a digest every interval.",
		w.p.digestPeriodText()),
		emf(w.p.Prefix, metrics.DigestsWritten, nil, "SampleCount", seconds(w.p.digestHeartbeatPeriod())), 1, lt, breaching)
}
