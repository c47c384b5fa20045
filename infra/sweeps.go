package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// The sweeps, reconcile and expire, run on EventBridge schedules. They cannot overlap: each times
// out at SweepTimeout, below its rate, has a reserved concurrency of 1 and drops a tick older
// than its rate instead of queueing it (function sets those); a failed sweep is not retried: the
// next tick is the retry.

// sweeps schedules the two sweep functions.
func (p *LedgerStackProps) sweeps(stack awscdk.Stack, fns map[settings.Role]awslambda.Function) {
	for _, name := range settings.Sweepers {
		rate, _ := p.sweepRate(name)
		p.schedule(stack, name, fns[name], rate)
	}
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

// schedule invokes fn at a fixed rate.
func (p *LedgerStackProps) schedule(stack awscdk.Stack, name settings.Role, fn awslambda.Function, rate time.Duration) {
	id := title(name)
	awsevents.NewRule(stack, jsii.String(id+"Schedule"), &awsevents.RuleProps{
		Description: jsii.String(p.Prefix + " " + string(name) + " sweep"),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(rate.Minutes()))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   seconds(rate),
		})},
	})
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
