package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsbackup"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/outputs"
)

// Evidence outlives accidents. Rows live HISTORY_RETENTION (400 days by default) after their last
// write, point-in-time recovery reaches back 35 days: AWS Backup keeps a daily backup of the ledger
// table for the whole retention period, in a vault whose lock (governance mode) refuses to delete
// a backup before that period, under a key of its own.

// maxLockDays is the longest minimum retention a vault lock takes.
const maxLockDays = 36500

// backupSchedule is when the daily backup starts: 03:00 UTC.
var backupSchedule = &awsevents.CronOptions{Hour: jsii.String("3"), Minute: jsii.String("0")}

// backup defines the ledger table's backup plan, vault and vault key, unless the stage skips them.
func (p *LedgerStackProps) backup(stack awscdk.Stack, st storage) {
	if p.SkipBackup {
		return
	}
	retention := awscdk.Duration_Days(jsii.Number(p.retentionDays()))
	// A vault key of its own: with AWS Backup's advanced DynamoDB backup on (a Region setting of
	// the account, see the README), backups are encrypted under the vault's key, not the table's
	// ("Encryption for backups in AWS Backup", AWS Backup developer guide), so losing the ledger
	// key does not lose them. Retained with the stack's other keys (deletionProtection); the vault is
	// always retained: CloudFormation cannot delete a vault that holds recovery points.
	key := awskms.NewKey(stack, jsii.String("BackupVaultKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " AWS Backup vault of the ledger table"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
	})
	vault := awsbackup.NewBackupVault(stack, jsii.String("LedgerBackupVault"), &awsbackup.BackupVaultProps{
		BackupVaultName: jsii.String(p.Prefix + "-ledger"),
		EncryptionKey:   key,
		// Governance mode (no ChangeableFor): no one deletes a recovery point before MinRetention
		// or shortens its retention, except a principal allowed backup:DeleteBackupVaultLockConfiguration,
		// which can lift the lock. Compliance mode would bind even that, irreversibly after its grace
		// time; the README says how to choose it.
		LockConfiguration: &awsbackup.LockConfiguration{MinRetention: retention},
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	plan := awsbackup.NewBackupPlan(stack, jsii.String("LedgerBackupPlan"), &awsbackup.BackupPlanProps{
		BackupPlanName: jsii.String(p.Prefix + "-ledger"),
		BackupVault:    vault,
		BackupPlanRules: &[]awsbackup.BackupPlanRule{awsbackup.NewBackupPlanRule(&awsbackup.BackupPlanRuleProps{
			RuleName:           jsii.String("DailyForTheRetentionPeriod"),
			ScheduleExpression: awsevents.Schedule_Cron(backupSchedule),
			DeleteAfter:        retention,
		})},
	})
	sel := plan.AddSelection(jsii.String("LedgerTable"), &awsbackup.BackupSelectionOptions{
		Resources: &[]awsbackup.BackupResource{awsbackup.BackupResource_FromDynamoDbTable(st.ledger)},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(sel, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM4"),
		Reason: jsii.String("The role AWS Backup assumes (trusting backup.amazonaws.com only) to back up the ledger table " +
			"holds AWSBackupServiceRolePolicyForBackup, the AWS-maintained policy for backup jobs: it follows the calls " +
			"AWS Backup makes for DynamoDB (native and advanced backups, tags, the table's key), which a copy here would " +
			"not. It allows no restore (AllowRestores is off) and no data-plane read or write of any table."),
		AppliesTo: &[]interface{}{"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSBackupServiceRolePolicyForBackup"},
	}}, jsii.Bool(true))
	awscdk.NewCfnOutput(stack, jsii.String(outputs.BackupVault.Name), &awscdk.CfnOutputProps{
		Value: vault.BackupVaultName(), Description: jsii.String("AWS Backup vault of the ledger table's daily backups"),
	})
}

// validateBackup checks that a vault lock can hold the retention period.
func (p *LedgerStackProps) validateBackup(bad func(string, ...any)) {
	if !p.SkipBackup && p.retentionDays() > maxLockDays {
		bad("historyRetention %v: a backup vault lock keeps at most %d days (pass backup=false, or shorten it)",
			p.Functions.Policy.Retention, maxLockDays)
	}
}
