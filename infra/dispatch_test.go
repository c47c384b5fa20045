package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
)

// TestDispatchQueues: the dispatch queue hides a received message for six dispatch timeouts and
// dead-letters it after five receives, long before its retention would drop it; the stream
// failure DLQ and the dispatch queue's DLQ keep what they hold 14 days.
func TestDispatchQueues(t *testing.T) {
	s := synth(t, nil)
	dispatchDLQ := s.constructID(t, "AWS::SQS::Queue", "DispatchQueueDlq")
	queue := workQueueProps(3600, 360, dispatchDLQ, 5) // 360: 6 x dispatch's 60 s
	queue["DelaySeconds"] = assertions.Match_Absent()  // wake-ups carry their own delay
	check(t, "dispatch queue", func() {
		s.template.HasResourceProperties(jsii.String("AWS::SQS::Queue"), queue)
	})
	// A message outlives its longest delay and every receive before the DLQ: it is dead-lettered,
	// never dropped by retention.
	if maxWakeDelay+dispatchQueueMaxReceiveCount*dispatchQueueVisibility >= dispatchQueueRetention {
		t.Errorf("dispatch queue retention %v does not outlast a %v delay plus %d receives of %v",
			dispatchQueueRetention, maxWakeDelay, dispatchQueueMaxReceiveCount, dispatchQueueVisibility)
	}
	retainsTwoWeeks(t, s, s.logicalID(t, "AWS::SQS::Queue", "StreamFailureDlq"), dispatchDLQ)
}

func TestDispatchEventSources(t *testing.T) {
	s := synth(t, nil)
	dispatchFn := s.logicalID(t, "AWS::Lambda::Function", "DispatchFunction")
	hasQueueMapping(t, s, "dispatch queue mapping", dispatchFn, s.constructID(t, "AWS::SQS::Queue", "DispatchQueue"), 5)
	var inserted, fromHeld any
	for pattern, dst := range map[string]*any{
		`{"eventName":["INSERT"],"dynamodb":{"NewImage":{"state":{"S":["claimed"]}}}}`:                                     &inserted,
		`{"eventName":["MODIFY"],"dynamodb":{"NewImage":{"state":{"S":["claimed"]}},"OldImage":{"state":{"S":["held"]}}}}`: &fromHeld,
	} {
		if err := json.Unmarshal([]byte(pattern), dst); err != nil {
			t.Fatal(err)
		}
	}
	check(t, "dispatch stream mapping", func() {
		s.template.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
			"FunctionName":               map[string]any{"Ref": dispatchFn},
			"EventSourceArn":             map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable"), "StreamArn"}},
			"StartingPosition":           "TRIM_HORIZON",
			"BisectBatchOnFunctionError": true,
			"MaximumRetryAttempts":       3,
			"MaximumRecordAgeInSeconds":  3600,
			"FunctionResponseTypes":      []any{"ReportBatchItemFailures"},
			"FilterCriteria": map[string]any{"Filters": []any{
				map[string]any{"Pattern": assertions.Match_SerializedJson(inserted)},
				map[string]any{"Pattern": assertions.Match_SerializedJson(fromHeld)},
			}},
			"DestinationConfig": map[string]any{"OnFailure": map[string]any{
				"Destination": map[string]any{"Fn::GetAtt": []any{s.logicalID(t, "AWS::SQS::Queue", "StreamFailureDlq"), "Arn"}},
			}},
		})
	})
}

// TestDispatchFilterIsGenerated: the stream mapping's filter patterns are exactly the ones
// dynamostore.DispatchFilter generates from the trigger rule (internal/testkit/pipelinetest's
// TestDispatchTriggerAgrees evaluates them over every state change).
func TestDispatchFilterIsGenerated(t *testing.T) {
	s := synth(t, nil)
	var got []string
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if fc, ok := props(m)["FilterCriteria"].(map[string]any); ok {
			for _, f := range list(fc["Filters"]) {
				got = append(got, f.(map[string]any)["Pattern"].(string))
			}
		}
	}
	var want []string
	for _, p := range dynamostore.DispatchFilter() {
		want = append(want, mustJSON(p))
	}
	if len(got) != len(want) {
		t.Fatalf("stream filters %q, want %q", got, want)
	}
	for i := range want {
		var g, w any
		if json.Unmarshal([]byte(got[i]), &g) != nil || json.Unmarshal([]byte(want[i]), &w) != nil || mustJSON(g) != mustJSON(w) {
			t.Errorf("filter %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// TestTableKeyOnlyThroughDynamoDB: every function's grant on the table key, dispatch's stream read
// included, holds only through DynamoDB (kms:ViaService), so no function can use the key directly.
func TestTableKeyOnlyThroughDynamoDB(t *testing.T) {
	s := synth(t, nil)
	key := s.logicalID(t, "AWS::KMS::Key", "LedgerKey")
	via := `{"StringEquals":{"kms:ViaService":{"Fn::Sub":"dynamodb.${AWS::Region}.${AWS::URLSuffix}"}}}`
	roles := map[string]bool{}
	for _, name := range settings.Functions {
		roles[title(name)+"Role"] = true
	}
	for id, pol := range s.resources("AWS::IAM::Policy") {
		if !slices.ContainsFunc(list(props(pol)["Roles"]), func(r any) bool { return roles[label(r)] }) {
			continue
		}
		for _, st := range list(props(pol)["PolicyDocument"].(map[string]any)["Statement"]) {
			stmt := st.(map[string]any)
			if !strings.Contains(mustJSON(stmt["Resource"]), `"`+key+`"`) {
				continue
			}
			if got := mustJSON(stmt["Condition"]); got != via {
				t.Errorf("%s: %v on the table key with condition %s, want %s", id, stmt["Action"], got, via)
			}
		}
	}
	grants := s.grants(t)["Dispatch"]
	for _, want := range []string{"dynamodb:DescribeStream on LedgerTable.StreamArn", "dynamodb:GetRecords on LedgerTable.StreamArn",
		"dynamodb:GetShardIterator on LedgerTable.StreamArn", "dynamodb:ListStreams on *", "kms:Decrypt on LedgerKey"} {
		if !slices.Contains(grants, want) {
			t.Errorf("dispatch lacks %s for its stream mapping: %q", want, grants)
		}
	}
}
