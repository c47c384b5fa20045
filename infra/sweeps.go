package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawsevents"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// The sweeps, reconcile and expire, run on EventBridge schedules. They cannot overlap: each times
// out at SweepTimeout, below its rate, has a reserved concurrency of 1 and drops a tick older
// than its rate instead of queueing it (function sets those); a failed sweep is not retried: the
// next tick is the retry.

// sweeps schedules the two sweep functions and returns each one's schedule.
func (p *LedgerStackProps) sweeps(stack awscdk.Stack, fns map[settings.Role]awslambda.Function) map[settings.Role]awsevents.Rule {
	rules := map[settings.Role]awsevents.Rule{}
	for _, name := range settings.Sweepers {
		rate, _ := p.sweepRate(name)
		rules[name] = p.schedule(stack, name, fns[name], rate)
	}
	return rules
}

// sweepRate returns a scheduled sweep function's rate; ok is false for the other functions.
func (p *LedgerStackProps) sweepRate(name settings.Role) (rate time.Duration, ok bool) {
	switch name {
	case settings.Reconcile:
		return p.ReconcileRate, true
	case settings.Expire:
		return p.ExpireRate, true
	}
	return 0, false
}

// schedule invokes fn at a fixed rate (a sweep, or the digest function's tick). The rule's permission to invoke fn is the function's
// resource policy (ItsScheduleInvokes, invokers.go), which holds the Deny of every other invoker:
// Lambda's AddPermission and PutResourcePolicy write the same policy, so the stack gives it whole,
// and the target adds no AWS::Lambda::Permission. The local stage, whose emulator cannot create
// that policy (SkipOperatorDenies), gets the CDK target's permission instead.
func (p *LedgerStackProps) schedule(stack awscdk.Stack, name settings.Role, fn awslambda.Function, rate time.Duration) awsevents.Rule {
	id := title(name)
	var target awsevents.IRuleTarget = &scheduleTarget{fn: fn, rate: rate}
	if p.SkipOperatorDenies {
		target = awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   seconds(rate),
		})
	}
	desc := p.Prefix + " " + string(name) + " sweep"
	if name == settings.Digest {
		desc = p.Prefix + " digest tick: a signed digest every interval, quiet or not"
	}
	return awsevents.NewRule(stack, jsii.String(id+"Schedule"), &awsevents.RuleProps{
		Description: jsii.String(desc),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(rate.Minutes()))),
		Targets:     &[]awsevents.IRuleTarget{target},
	})
}

// scheduleTarget is a schedule's Lambda target as CDK's LambdaFunction target renders it (no
// retry, events no older than the rate), without the AWS::Lambda::Permission that target adds.
type scheduleTarget struct {
	fn   awslambda.IFunction
	rate time.Duration
}

func (t *scheduleTarget) Bind(_ interfacesawsevents.IRuleRef, _ *string) *awsevents.RuleTargetConfig {
	return &awsevents.RuleTargetConfig{
		Arn: t.fn.FunctionArn(),
		RetryPolicy: &awsevents.CfnRule_RetryPolicyProperty{
			MaximumRetryAttempts:     jsii.Number(0),
			MaximumEventAgeInSeconds: jsii.Number(t.rate.Seconds()),
		},
	}
}

// validateSweeps checks that the schedules are whole minutes and a sweep ends before the next.
func (p *LedgerStackProps) validateSweeps(bad func(string, ...any)) {
	if p.SweepTimeout < 10*time.Second || p.SweepTimeout%time.Second != 0 {
		bad("SweepTimeout %v: want whole seconds, at least 10s", p.SweepTimeout)
	}
	for _, r := range []struct {
		name string
		rate time.Duration
	}{{"ReconcileRate", p.ReconcileRate}, {"ExpireRate", p.ExpireRate}} {
		if r.rate < time.Minute || r.rate%time.Minute != 0 {
			bad("%s %v: want whole minutes, at least 1m", r.name, r.rate)
		}
		if p.SweepTimeout >= r.rate {
			bad("SweepTimeout %v must be below %s %v, or sweeps overlap", p.SweepTimeout, r.name, r.rate)
		}
	}
}
