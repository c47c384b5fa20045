package main

import (
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsbackup"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// What lies under the digests, and the watchers themselves, are watched too (issue 43, item 2):
// EventBridge rules on CloudTrail's management events, made and delivered like the others
// (securityEvents):
//
//   - DigestMappingChanged: lambda CreateEventSourceMapping, UpdateEventSourceMapping or
//     DeleteEventSourceMapping (any of Lambda's versioned event names, matched by prefix) on the
//     digest function's stream mapping. Update and Delete name the mapping only by its UUID
//     (requestParameters.uUID, as CloudTrail lower-cases a request member's first letter; not
//     confirmed from a sample event, so "uuid" and "UUID" are matched too, and the value ignoring
//     case), which the stack knows (the mapping's Ref); disabling the
//     mapping is an UpdateEventSourceMapping. Create names the function
//     (requestParameters.functionName, in every spelling FunctionChanged takes: a mapping recreated
//     on the digest function) or the ledger table's stream (requestParameters.eventSourceArn: any
//     new reader of the stream, which also takes a share of its read throughput). An Update that
//     moves the mapping to another function names its UUID too. A deploy of this stack that
//     changes the mapping matches as well.
//   - LedgerTableChanged: dynamodb UpdateTable (the stream, deletion protection, the indexes),
//     UpdateTimeToLive, DeleteTable, UpdateContinuousBackups (point-in-time recovery), DeleteBackup,
//     RestoreTableToPointInTime and RestoreTableFromBackup on the ledger table, named by its name or
//     its ARN (requestParameters.tableName, sourceTableName, sourceTableArn), or a backup of it
//     (requestParameters.backupArn, <table ARN>/backup/<id>).
//   - WatcherRulesChanged: events DisableRule, DeleteRule or PutRule on a rule of this stack
//     (requestParameters.name: these calls take a rule's name only): every security rule, the sweeps'
//     schedules and the digest tick's.
//   - WatcherTargetsChanged: events RemoveTargets or PutTargets on a rule of this stack
//     (requestParameters.rule), and DisableRule, DeleteRule or PutRule on either watcher: a rule may
//     not see its own disabling (CloudTrail's event arrives after the call took effect), so each of
//     the two reports the other being switched off.
//   - AlarmsChanged: CloudWatch's (source aws.monitoring, eventSource monitoring.amazonaws.com, as
//     the EventBridge event reference gives them) DisableAlarmActions, DeleteAlarms (requestParameters.alarmNames, a
//     list: any name in it), PutMetricAlarm or SetAlarmState (requestParameters.alarmName) on an
//     alarm of this stack, matched by the prefix every alarm name has ("<prefix>-", observability.go;
//     like FunctionChanged, a stage named like this one plus a dash also matches: a false alarm,
//     never a missed change). PutMetricAlarm is how an alarm is rewritten (another threshold, no
//     actions, another metric); SetAlarmState how one is forced to OK until its next evaluation.
//   - TrailChanged: cloudtrail StopLogging, DeleteTrail, UpdateTrail or PutEventSelectors on any
//     trail: the rules see nothing once the trail that delivers management events to EventBridge
//     stops, and the stack cannot tell which trail that is (it is the account's or the
//     organization's).
//   - BackupVaultChanged: the ledger's AWS Backup vault and plan, where the stage keeps them
//     (backupVaultRules).
//
// The rule names are known only once every rule exists, so the two rules on rules get their
// patterns' names last (watchRules): the security events are the last rules the stack makes.
// WatcherTargetsChanged watches the rule calls on both watchers, and WatcherRulesChanged every
// rule's, so each watcher's disabling is reported by the other.

// Construct ids of the rules that watch the stack's rules.
const (
	watcherRulesID   = "WatcherRulesChanged"
	watcherTargetsID = "WatcherTargetsChanged"
)

// The calls the watchers watch, by CloudTrail event name.
var (
	mappingCalls = []string{"CreateEventSourceMapping", "UpdateEventSourceMapping", "DeleteEventSourceMapping"}
	tableCalls   = []string{"UpdateTable", "UpdateTimeToLive", "DeleteTable", "UpdateContinuousBackups", "DeleteBackup",
		"RestoreTableToPointInTime", "RestoreTableFromBackup"}
	ruleCalls   = []string{"DisableRule", "DeleteRule", "PutRule"}
	targetCalls = []string{"RemoveTargets", "PutTargets"}
	alarmCalls  = []string{"DisableAlarmActions", "DeleteAlarms", "PutMetricAlarm", "SetAlarmState"}
	trailCalls  = []string{"StopLogging", "DeleteTrail", "UpdateTrail", "PutEventSelectors"}
)

// watcherRules are the rules on the digests' mapping, the ledger table and the watchers. The two
// on rules carry no names yet: watchRules gives them.
func (w *alarms) watcherRules(o observed) []securityRule {
	table := o.ledger.TableName()
	mapping := o.digests.mapping.Ref()
	uuid := []interface{}{map[string]interface{}{"equals-ignore-case": mapping}}
	return append([]securityRule{
		{"DigestMappingChanged", "the digest function's stream mapping was disabled, changed or deleted, or a mapping " +
			"was created on the digest function or on the ledger table's stream", "aws.lambda",
			map[string]interface{}{
				"eventSource": []string{"lambda.amazonaws.com"},
				"eventName":   prefixes(mappingCalls...),
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"uUID": uuid}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"uuid": uuid}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"UUID": uuid}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"functionName": functionSpellings(w.p.Prefix + "-" + string(settings.Digest))}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"eventSourceArn": []*string{o.ledger.TableStreamArn()}}},
				},
			}},
		{"LedgerTableChanged", "the ledger table's stream, deletion protection, TTL or point-in-time recovery was " +
			"changed, it was deleted, or a backup of it was deleted or restored", "aws.dynamodb",
			map[string]interface{}{
				"eventSource": []string{"dynamodb.amazonaws.com"},
				"eventName":   tableCalls,
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"tableName": nameOrArn(*table, ":table/")}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"sourceTableName": nameOrArn(*table, ":table/")}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"sourceTableArn": nameOrArn(*table, ":table/")}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"backupArn": []interface{}{
						map[string]interface{}{"wildcard": "*:table/" + *table + "/backup/*"}}}},
				},
			}},
		{watcherRulesID, "a rule of this stack (a security rule, a sweep's or the digest tick's schedule) was disabled, " +
			"deleted or rewritten", "aws.events", nil},
		{watcherTargetsID, "a rule of this stack had its targets removed or replaced, or WatcherRulesChanged was " +
			"disabled, deleted or rewritten", "aws.events", nil},
		{"AlarmsChanged", "an alarm of this stack had its actions disabled, was deleted, rewritten or forced into a state",
			"aws.monitoring",
			map[string]interface{}{
				"eventSource": []string{"monitoring.amazonaws.com"},
				"eventName":   alarmCalls,
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"alarmNames": prefixes(w.p.Prefix + "-")}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"alarmName": prefixes(w.p.Prefix + "-")}},
				},
			}},
		{"TrailChanged", "a trail of the account (any: the one that delivers these events among them) was stopped, " +
			"deleted, or given other settings or event selectors", "aws.cloudtrail",
			map[string]interface{}{
				"eventSource": []string{"cloudtrail.amazonaws.com"},
				"eventName":   trailCalls,
			}},
	}, backupVaultRules(w.stack)...)
}

// backupVaultRules is BackupVaultChanged where the stack keeps AWS Backup's daily backups of the
// ledger table (backup.go): backup DeleteRecoveryPoint, UpdateRecoveryPointLifecycle (a shorter
// retention), DeleteBackupVault, the vault's lock or access policy put or deleted, on the vault
// (requestParameters.backupVaultName: its name, or an ARN ending in ":backup-vault:<name>"), and
// DeleteBackupPlan, UpdateBackupPlan or DeleteBackupSelection on its plan
// (requestParameters.backupPlanId, the plan's Ref). The field names follow the API's
// BackupVaultName and BackupPlanId as CloudTrail spells request members; not confirmed from a
// sample event.
func backupVaultRules(stack awscdk.Stack) []securityRule {
	vaults, plans := stackResources(stack, "AWS::Backup::BackupVault"), stackRefs(stack, "AWS::Backup::BackupPlan")
	if len(vaults) != 1 || len(plans) != 1 {
		return nil
	}
	vault, ok := vaults[0].(awsbackup.CfnBackupVault)
	if !ok || vault.BackupVaultName() == nil {
		return nil
	}
	name := *vault.BackupVaultName()
	return []securityRule{{"BackupVaultChanged", "a backup of the ledger table in the stack's vault was deleted or given a " +
		"shorter life, the vault's lock or access policy was changed, the vault deleted, or the backup plan changed or deleted",
		"aws.backup",
		map[string]interface{}{
			"eventSource": []string{"backup.amazonaws.com"},
			"eventName":   backupCalls,
			"$or": []interface{}{
				map[string]interface{}{"requestParameters": map[string]interface{}{"backupVaultName": nameOrArn(name, ":backup-vault:")}},
				map[string]interface{}{"requestParameters": map[string]interface{}{"backupPlanId": plans}},
			},
		}}}
}

// backupCalls are the AWS Backup calls BackupVaultChanged watches.
var backupCalls = []string{"DeleteRecoveryPoint", "UpdateRecoveryPointLifecycle", "DeleteBackupVault",
	"PutBackupVaultLockConfiguration", "DeleteBackupVaultLockConfiguration", "PutBackupVaultAccessPolicy",
	"DeleteBackupVaultAccessPolicy", "DeleteBackupPlan", "UpdateBackupPlan", "DeleteBackupSelection"}

// watchRules gives the two rules on rules their patterns, now that every rule of the stack
// exists: WatcherRulesChanged every rule's name, WatcherTargetsChanged every rule's name as a
// target call names it and both watchers' as a rule call does. A resource cannot Ref itself, and
// two that Ref each other are a circular dependency, so the two watchers have names of their own
// (watcherName) and are named by them; every other rule by its Ref.
func watchRules(stack awscdk.Stack, prefix string, made map[string]awscdk.CfnResource) {
	rulesRule, targetsRule := made[watcherRulesID], made[watcherTargetsID]
	if rulesRule == nil || targetsRule == nil {
		return
	}
	watchers := []*string{jsii.String(watcherName(prefix, watcherRulesID)), jsii.String(watcherName(prefix, watcherTargetsID))}
	names := slices.Clone(watchers)
	for _, r := range stackResources(stack, "AWS::Events::Rule") {
		if r != rulesRule && r != targetsRule {
			names = append(names, r.Ref())
		}
	}
	rulesRule.AddPropertyOverride(jsii.String("EventPattern.detail"), map[string]interface{}{
		"eventSource":       []string{"events.amazonaws.com"},
		"eventName":         ruleCalls,
		"requestParameters": map[string]interface{}{"name": names},
	})
	targetsRule.AddPropertyOverride(jsii.String("EventPattern.detail"), map[string]interface{}{
		"eventSource": []string{"events.amazonaws.com"},
		"$or": []interface{}{
			map[string]interface{}{"eventName": targetCalls, "requestParameters": map[string]interface{}{"rule": names}},
			map[string]interface{}{"eventName": ruleCalls, "requestParameters": map[string]interface{}{"name": watchers}},
		},
	})
}

// watcherName is the name a watcher rule is given: "<prefix>-<id>", at most 64 characters for the
// longest prefix (resetledger- and a stage of 25).
func watcherName(prefix, id string) string { return prefix + "-" + id }

// functionSpellings matches one function as a caller may name it: its name, the name with
// ":<qualifier>", a partial (<account>:function:<name>) or full ARN, with or without a qualifier.
func functionSpellings(name string) []interface{} {
	return []interface{}{name,
		map[string]interface{}{"prefix": name + ":"},
		map[string]interface{}{"suffix": ":function:" + name},
		map[string]interface{}{"wildcard": "*:function:" + name + ":*"}}
}
