package main

import (
	"maps"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// hasWorkQueue checks that the template has a queue with workQueueProps(retention, visibility,
// dlq, maxReceives) and the extra properties.
func hasWorkQueue(t *testing.T, s *synthesized, what string, retention, visibility int, dlq string, maxReceives int, extra map[string]any) {
	t.Helper()
	want := workQueueProps(retention, visibility, dlq, maxReceives)
	maps.Copy(want, extra)
	check(t, what, func() { s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), want) })
}

// hasQueueMapping checks that the template has an event source mapping with
// queueMappingProps(fn, queue, maxConcurrency).
func hasQueueMapping(t *testing.T, s *synthesized, what, fn, queue string, maxConcurrency int) {
	t.Helper()
	check(t, what, func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), queueMappingProps(fn, queue, maxConcurrency))
	})
}

// workQueueProps are the properties of a queue that keeps a message retention seconds, hides a
// received one visibility seconds and moves it to the queue with logical id dlq after maxReceives
// receives, encrypted with SQS-managed SSE.
func workQueueProps(retention, visibility int, dlq string, maxReceives int) map[string]any {
	return map[string]any{
		"MessageRetentionPeriod": retention,
		"VisibilityTimeout":      visibility,
		"SqsManagedSseEnabled":   true,
		"RedrivePolicy": map[string]any{
			"deadLetterTargetArn": map[string]any{"Fn::GetAtt": []any{dlq, "Arn"}},
			"maxReceiveCount":     maxReceives,
		},
	}
}

// queueMappingProps are the properties of the event source mapping that feeds the queue with
// logical id queue to the function fn: batches of 10, failures reported per message, at most
// maxConcurrency instances at once.
func queueMappingProps(fn, queue string, maxConcurrency int) map[string]any {
	return map[string]any{
		"FunctionName":          map[string]any{"Ref": fn},
		"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{queue, "Arn"}},
		"BatchSize":             10,
		"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
		"ScalingConfig":         map[string]any{"MaximumConcurrency": maxConcurrency},
	}
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
