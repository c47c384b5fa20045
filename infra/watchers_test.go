package main

import (
	"strings"
	"testing"
)

// TestWatcherRulesMatch: the rules on the digests' mapping, the ledger table and the watchers
// (watchers.go) match a call on their own resource in every spelling a caller may use, and neither
// the same call on a look-alike nor a read of their own.
func TestWatcherRulesMatch(t *testing.T) {
	s := synth(t, nil)
	patterns := securityRulePatterns(t, s)
	for _, tc := range watcherRuleCases(t, s) {
		checkSecurityRule(t, s, patterns, tc)
	}
	// Every alarm of the stack is named with its prefix, which is what AlarmsChanged matches.
	for id, a := range s.resources("AWS::CloudWatch::Alarm") {
		if name, _ := props(a)["AlarmName"].(string); !strings.HasPrefix(name, "resetledger-test-") {
			t.Errorf("alarm %s is named %q, which AlarmsChanged does not match", id, name)
		}
	}
}

// watcherRuleCases is one table, a rule per entry, after the names its lines share.
// watcherRuleCases is long because it is one table.
func watcherRuleCases(t *testing.T, s *synthesized) []securityRuleCase {
	ledgerID := s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")
	table, tableArn := s.physical(ledgerID, ""), s.physical(ledgerID, "Arn")
	contentArn := s.physical(s.logicalID(t, "AWS::DynamoDB::Table", "ContentTable"), "Arn")
	stream := s.physical(ledgerID, "StreamArn")
	digestFn := "resetledger-test-digest"
	digestArn := "arn:aws:lambda:" + testRegion + ":" + testAccount + ":function:" + digestFn
	digestMapping, dispatchMapping := mappingsOf(t, s)
	backup := tableArn + "/backup/01700000000000-0a1b2c3d"

	var onRules, onTargets, notOnTargets []ruleCall
	for id := range s.resources("AWS::Events::Rule") {
		name := s.physical(id, "")
		onRules = append(onRules, ruleCall{"DisableRule", map[string]any{"name": name}}, ruleCall{"DeleteRule", map[string]any{"name": name}})
		onTargets = append(onTargets, ruleCall{"RemoveTargets", map[string]any{"rule": name, "ids": []any{"Target0"}}})
		if !strings.HasPrefix(id, watcherRulesID) && !strings.HasPrefix(id, watcherTargetsID) {
			notOnTargets = append(notOnTargets, ruleCall{"DisableRule", map[string]any{"name": name}})
		}
	}
	if len(onRules) < 2*20 {
		t.Fatalf("%d rules in the template, want the security rules and the schedules", len(onRules)/2)
	}
	rulesRule := s.physical(s.logicalID(t, "AWS::Events::Rule", watcherRulesID), "")
	alarm := func(name string) string { return "resetledger-test-" + name }
	vault := "resetledger-test-ledger"
	plan := s.physical(s.logicalID(t, "AWS::Backup::BackupPlan", "LedgerBackupPlan"), "")
	return []securityRuleCase{
		{"DigestMappingChanged", "aws.lambda", "lambda.amazonaws.com",
			[]ruleCall{{"UpdateEventSourceMapping20150331", map[string]any{"uUID": digestMapping, "enabled": false}},
				{"UpdateEventSourceMapping20150331", map[string]any{"uUID": strings.ToUpper(digestMapping), "functionName": "insider"}},
				{"DeleteEventSourceMapping20150331", map[string]any{"uUID": digestMapping}},
				{"UpdateEventSourceMapping20150331", map[string]any{"uuid": digestMapping}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": digestFn, "eventSourceArn": "arn:aws:sqs:us-east-1:111122223333:other"}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": digestArn + ":1", "eventSourceArn": stream}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": testAccount + ":function:" + digestFn}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": digestFn + ":live"}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": "insider", "eventSourceArn": stream}}},
			[]ruleCall{{"UpdateEventSourceMapping20150331", map[string]any{"uUID": dispatchMapping, "enabled": false}},
				{"DeleteEventSourceMapping20150331", map[string]any{"uUID": "00000000-1111-4222-8333-000000000000"}},
				{"GetEventSourceMapping20150331", map[string]any{"uUID": digestMapping}},
				{"ListEventSourceMappings20150331", map[string]any{"functionName": digestFn}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": "resetledger-test-dispatch", "eventSourceArn": "arn:aws:sqs:us-east-1:111122223333:q"}},
				{"CreateEventSourceMapping20150331", map[string]any{"functionName": digestFn + "er", "eventSourceArn": stream + "x"}},
				{"UpdateFunctionConfiguration20150331v2", map[string]any{"functionName": digestFn}}}},
		{"LedgerTableChanged", "aws.dynamodb", "dynamodb.amazonaws.com",
			[]ruleCall{{"UpdateTable", map[string]any{"tableName": table, "streamSpecification": map[string]any{"streamEnabled": false}}},
				{"UpdateTable", map[string]any{"tableName": tableArn, "deletionProtectionEnabled": false}},
				{"UpdateTimeToLive", map[string]any{"tableName": table}},
				{"DeleteTable", map[string]any{"tableName": tableArn}},
				{"UpdateContinuousBackups", map[string]any{"tableName": table}},
				{"DeleteBackup", map[string]any{"backupArn": backup}},
				{"RestoreTableFromBackup", map[string]any{"backupArn": backup, "targetTableName": "copy"}},
				{"RestoreTableToPointInTime", map[string]any{"sourceTableName": table, "targetTableName": "copy"}},
				{"RestoreTableToPointInTime", map[string]any{"sourceTableArn": tableArn, "targetTableName": "copy"}}},
			[]ruleCall{{"UpdateTable", map[string]any{"tableName": contentArn}},
				{"UpdateTable", map[string]any{"tableName": table + "-copy"}},
				{"DeleteTable", map[string]any{"tableName": "x" + table}},
				{"DeleteBackup", map[string]any{"backupArn": contentArn + "/backup/01700000000000-0a1b2c3d"}},
				{"DeleteBackup", map[string]any{"backupArn": tableArn + "x/backup/01700000000000-0a1b2c3d"}},
				{"DescribeTable", map[string]any{"tableName": table}},
				{"DescribeContinuousBackups", map[string]any{"tableName": table}},
				{"DescribeBackup", map[string]any{"backupArn": backup}}}},
		// Every rule of the stack, each watcher included, in both rules' calls.
		{watcherRulesID, "aws.events", "events.amazonaws.com", append(onRules, ruleCall{"PutRule", map[string]any{"name": rulesRule}}),
			[]ruleCall{{"DisableRule", map[string]any{"name": "someone-elses-rule"}},
				{"DisableRule", map[string]any{"name": rulesRule + "x"}},
				{"DescribeRule", map[string]any{"name": rulesRule}},
				{"RemoveTargets", map[string]any{"rule": rulesRule}}}},
		{watcherTargetsID, "aws.events", "events.amazonaws.com",
			append(onTargets, ruleCall{"DisableRule", map[string]any{"name": rulesRule}}, ruleCall{"DeleteRule", map[string]any{"name": rulesRule}},
				ruleCall{"PutTargets", map[string]any{"rule": rulesRule}}),
			append(notOnTargets, ruleCall{"RemoveTargets", map[string]any{"rule": "someone-elses-rule"}},
				ruleCall{"ListTargetsByRule", map[string]any{"rule": rulesRule}})},
		{"AlarmsChanged", "aws.monitoring", "monitoring.amazonaws.com",
			[]ruleCall{{"DisableAlarmActions", map[string]any{"alarmNames": []any{"payments-latency", alarm("DigestHeartbeat")}}},
				{"DeleteAlarms", map[string]any{"alarmNames": []any{alarm("DigestGaps")}}},
				{"PutMetricAlarm", map[string]any{"alarmName": alarm("ReconcileHeartbeat"), "threshold": 0}},
				{"SetAlarmState", map[string]any{"alarmName": alarm("WatcherRulesChangedUndelivered"), "stateValue": "OK"}}},
			[]ruleCall{{"DisableAlarmActions", map[string]any{"alarmNames": []any{"resetledger-test2-DigestHeartbeat", "payments-latency"}}},
				{"PutMetricAlarm", map[string]any{"alarmName": "x" + alarm("DigestGaps")}},
				{"DescribeAlarms", map[string]any{"alarmNames": []any{alarm("DigestHeartbeat")}}},
				{"EnableAlarmActions", map[string]any{"alarmNames": []any{alarm("DigestHeartbeat")}}}}},
		{"BackupVaultChanged", "aws.backup", "backup.amazonaws.com",
			[]ruleCall{{"DeleteRecoveryPoint", map[string]any{"backupVaultName": vault, "recoveryPointArn": "arn:aws:backup:us-east-1:111122223333:recovery-point:1"}},
				{"UpdateRecoveryPointLifecycle", map[string]any{"backupVaultName": "arn:aws:backup:us-east-1:111122223333:backup-vault:" + vault}},
				{"DeleteBackupVaultLockConfiguration", map[string]any{"backupVaultName": vault}},
				{"DeleteBackupPlan", map[string]any{"backupPlanId": plan}},
				{"DeleteBackupSelection", map[string]any{"backupPlanId": plan, "selectionId": "s-1"}}},
			[]ruleCall{{"DeleteRecoveryPoint", map[string]any{"backupVaultName": "payments-vault"}},
				{"DeleteRecoveryPoint", map[string]any{"backupVaultName": vault + "-old"}},
				{"DeleteBackupPlan", map[string]any{"backupPlanId": "0000-other-plan"}},
				{"DescribeBackupVault", map[string]any{"backupVaultName": vault}},
				{"ListRecoveryPointsByBackupVault", map[string]any{"backupVaultName": vault}},
				{"StartBackupJob", map[string]any{"backupVaultName": vault}}}},
		{"TrailChanged", "aws.cloudtrail", "cloudtrail.amazonaws.com",
			[]ruleCall{{"StopLogging", map[string]any{"name": "organization-trail"}},
				{"DeleteTrail", map[string]any{"name": "arn:aws:cloudtrail:us-east-1:111122223333:trail/management"}},
				{"UpdateTrail", map[string]any{"name": "management", "s3BucketName": "elsewhere"}},
				{"PutEventSelectors", map[string]any{"trailName": "management"}}},
			[]ruleCall{{"StartLogging", map[string]any{"name": "management"}},
				{"GetTrailStatus", map[string]any{"name": "management"}},
				{"DescribeTrails", map[string]any{}}}},
	}
}

// mappingsOf returns the UUIDs (Refs) of the digest function's stream mapping and of dispatch's.
func mappingsOf(t *testing.T, s *synthesized) (digest, dispatch string) {
	t.Helper()
	fn := func(name string) string { return `{"Ref":"` + s.logicalID(t, "AWS::Lambda::Function", name) + `"}` }
	for id, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		switch mustJSON(props(m)["FunctionName"]) {
		case fn("DigestFunction"):
			digest = s.physical(id, "")
		case fn("DispatchFunction"):
			dispatch = s.physical(id, "")
		}
	}
	if digest == "" || dispatch == "" || digest == dispatch {
		t.Fatalf("mappings: digest %q, dispatch %q", digest, dispatch)
	}
	return digest, dispatch
}
