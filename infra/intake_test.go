package main

import (
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// TestIntentQueue: the intent queue keeps intents an hour, hides a received one for six claim
// timeouts and dead-letters it after five receives; its DLQ keeps them 14 days.
func TestIntentQueue(t *testing.T) {
	s := synth(t, nil)
	dlq := s.logicalID(t, "AWS::SQS::Queue", "IntentDlq")
	check(t, "intent queue", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
			"MessageRetentionPeriod": 3600,
			"VisibilityTimeout":      180, // 6 x claim's 30 s
			"SqsManagedSseEnabled":   true,
			"RedrivePolicy": map[string]any{
				"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}},
				"maxReceiveCount":     5,
			},
		})
	})
	retainsTwoWeeks(t, s, dlq)
}

// retainsTwoWeeks: a DLQ keeps what it holds 14 days, encrypted with SQS-managed SSE.
func retainsTwoWeeks(t *testing.T, s *synthesized, ids ...string) {
	t.Helper()
	for _, id := range ids {
		q := props(s.resources("AWS::SQS::Queue")[id])
		if q["MessageRetentionPeriod"] != 1209600.0 || q["SqsManagedSseEnabled"] != true {
			t.Errorf("%s: retention %v, SSE %v; want 14 days, SQS-managed SSE", id, q["MessageRetentionPeriod"], q["SqsManagedSseEnabled"])
		}
	}
}

func TestClaimEventSource(t *testing.T) {
	s := synth(t, nil)
	claimFn := s.logicalID(t, "AWS::Lambda::Function", "ClaimFunction")
	check(t, "claim SQS mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":          map[string]any{"Ref": claimFn},
			"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "IntentQueue"), "Arn"}},
			"BatchSize":             10,
			"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
			"ScalingConfig":         map[string]any{"MaximumConcurrency": 10},
		})
	})
}
