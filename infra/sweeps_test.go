package main

import (
	"testing"
	"time"

	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

func TestSweepSchedules(t *testing.T) {
	s := synth(t, nil)
	for _, name := range []string{"Reconcile", "Expire"} {
		fn := s.logicalID(t, "AWS::Lambda::Function", name+"Function")
		check(t, name+" schedule", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
				"ScheduleExpression": "rate(1 minute)",
				"State":              "ENABLED",
				"Targets": []any{map[string]any{
					"Arn":         map[string]any{"Fn::GetAtt": []any{fn, "Arn"}},
					"RetryPolicy": map[string]any{"MaximumRetryAttempts": 0},
				}},
			})
		})
		check(t, name+" no async retry", func() {
			s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
				"FunctionName": map[string]any{"Ref": fn}, "MaximumRetryAttempts": 0,
			})
		})
	}
}

// TestSweepsCannotOverlap: a sweep times out before its next tick, one runs at a time, and a
// tick throttled by a running sweep is dropped when the next one is due.
func TestSweepsCannotOverlap(t *testing.T) {
	for _, rates := range [][2]time.Duration{{time.Minute, time.Minute}, {5 * time.Minute, 2 * time.Minute}} {
		s := synth(t, func(p *LedgerStackProps) { p.ReconcileRate, p.ExpireRate = rates[0], rates[1] })
		for i, name := range []settings.Role{settings.Reconcile, settings.Expire} {
			fn := s.function(t, name)
			if fn["Timeout"] != 50.0 || fn["Timeout"].(float64) >= rates[i].Seconds() {
				t.Errorf("%s timeout %v, want 50 (below the %v rate)", name, fn["Timeout"], rates[i])
			}
			if fn["ReservedConcurrentExecutions"] != 1.0 {
				t.Errorf("%s reserved concurrency = %v, want 1", name, fn["ReservedConcurrentExecutions"])
			}
			id := s.logicalID(t, "AWS::Lambda::Function", title(name)+"Function")
			check(t, string(name)+" event age", func() {
				s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]any{
					"FunctionName": map[string]any{"Ref": id}, "MaximumRetryAttempts": 0,
					"MaximumEventAgeInSeconds": rates[i].Seconds(),
				})
			})
		}
		for _, name := range []settings.Role{settings.Claim, settings.Dispatch} {
			if v, ok := s.function(t, name)["ReservedConcurrentExecutions"]; ok {
				t.Errorf("%s reserves concurrency %v", name, v)
			}
		}
	}
}
