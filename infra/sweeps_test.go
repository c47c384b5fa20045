package main

import (
	"fmt"
	"slices"
	"strings"
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

// TestDigestSchedule: the digest function is ticked at DIGEST_INTERVAL in whole minutes, at least
// one (rate(5 minutes) by default), with no retry and no tick older than its rate.
func TestDigestSchedule(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string
	}{{5 * time.Minute, "rate(5 minutes)"}, {5 * time.Second, "rate(1 minute)"}, {90 * time.Second, "rate(2 minutes)"}} {
		s := synth(t, func(p *LedgerStackProps) { p.Functions.DigestInterval = tc.interval })
		fn := s.logicalID(t, "AWS::Lambda::Function", "DigestFunction")
		rule := props(s.resources("AWS::Events::Rule")[s.logicalID(t, "AWS::Events::Rule", "DigestSchedule")])
		rate, _ := time.ParseDuration(strings.Fields(strings.Trim(tc.want, "rate()"))[0] + "m")
		want := map[string]string{
			"ScheduleExpression": `"` + tc.want + `"`,
			"State":              `"ENABLED"`,
			"Targets": `[{"Arn":{"Fn::GetAtt":["` + fn + `","Arn"]},"Id":"Target0","RetryPolicy":{"MaximumEventAgeInSeconds":` +
				fmt.Sprint(rate.Seconds()) + `,"MaximumRetryAttempts":0}}]`,
		}
		for k, w := range want {
			if got := mustJSON(rule[k]); got != w {
				t.Errorf("interval %v: DigestSchedule %s = %s, want %s", tc.interval, k, got, w)
			}
		}
	}
}

// TestScheduleInvokePermission: on AWS a sweep's schedule may invoke it through the function's
// resource policy (ItsScheduleInvokes, for that rule only), so the target adds no
// AWS::Lambda::Permission, which Lambda would write into the same policy; the local stage, which
// has no function policies (operatorDenies=false), gets the target's permission instead, for the
// same rule.
func TestScheduleInvokePermission(t *testing.T) {
	prod := synth(t, nil)
	if n := len(prod.resources("AWS::Lambda::Permission")); n != 0 {
		t.Errorf("%d Lambda permissions on a stage with function policies, want none", n)
	}
	scheduled := append(slices.Clone(settings.Sweepers), settings.Digest)
	for _, name := range scheduled {
		var found, mappingOnly bool
		for _, rp := range prod.resources("AWS::Lambda::ResourcePolicy") {
			p := props(rp)
			if label(p["ResourceArn"]) != title(name)+"Function" {
				continue
			}
			for _, st := range list(p["PolicyDocument"].(map[string]any)["Statement"]) {
				stmt := st.(map[string]any)
				if stmt["Sid"] == itsScheduleSid && stmt["Effect"] == "Allow" &&
					mustJSON(stmt["Principal"]) == `{"Service":"events.amazonaws.com"}` &&
					label(stmt["Condition"].(map[string]any)["ArnLike"].(map[string]any)["aws:SourceArn"]) == title(name)+"Schedule" {
					found = true
				}
				mappingOnly = mappingOnly || stmt["Sid"] == onlyItsEventSourceSid
			}
		}
		if !found {
			t.Errorf("%s's resource policy does not let its schedule (and only it) invoke it", name)
		}
		// The digest function keeps its mapping's Deny of every IAM principal.
		if mappingOnly != (name == settings.Digest) {
			t.Errorf("%s's resource policy has %s: %v, want %v", name, onlyItsEventSourceSid, mappingOnly, name == settings.Digest)
		}
	}
	local := synth(t, func(p *LedgerStackProps) {
		p.SkipOperatorDenies, p.LocalStage, p.OperatorPrincipalArns = true, true, nil
	})
	perms := map[string]string{}
	for _, pm := range local.resources("AWS::Lambda::Permission") {
		if p := props(pm); p["Principal"] == "events.amazonaws.com" {
			perms[label(p["FunctionName"])] = label(p["SourceArn"])
		}
	}
	for _, name := range scheduled {
		if got := perms[title(name)+"Function"]; got != title(name)+"Schedule" {
			t.Errorf("local stage: %s's schedule permission has SourceArn %q, want its rule", name, got)
		}
	}
}
