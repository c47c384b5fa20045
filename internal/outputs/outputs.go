// Package outputs names the CloudFormation outputs of a deployed stage:
// what producers, operators (ledgerctl), the local scripts and the
// end-to-end test read from `cdk deploy --outputs-file`. infra writes every
// output under one of these names and a template test checks that it
// writes no other, so a name is typed once.
package outputs

import (
	"strings"

	"github.com/resetledger/resetledger/internal/settings"
)

// Output is one stack output.
type Output struct {
	// Name is the output's logical id in the template and its key in the
	// outputs file.
	Name string
	// Env is the environment variable the local tools export it as
	// (devstack outputs-env) and read it from; "" if none.
	Env string
	// Required outputs must be in an outputs file for the end-to-end test
	// and the local tools to accept it.
	Required bool
	// Conditional outputs exist only when the stage needs them (a
	// configuration set exists only for a channel that uses it).
	Conditional bool
}

// The outputs of a stage.
var (
	IntentQueueURL         = Output{Name: "IntentQueueUrl", Env: "INTENT_QUEUE_URL", Required: true}
	IntentQueueARN         = Output{Name: "IntentQueueArn"}
	IntentDLQURL           = Output{Name: "IntentDlqUrl", Env: "INTENT_DLQ_URL", Required: true}
	StreamFailureDLQURL    = Output{Name: "StreamFailureDlqUrl"}
	DispatchQueueURL       = Output{Name: "DispatchQueueUrl"}
	DispatchQueueDLQURL    = Output{Name: "DispatchQueueDlqUrl"}
	ProviderEventsTopicARN = Output{Name: "ProviderEventsTopicArn"}
	ProviderEventsQueueURL = Output{Name: "ProviderEventsQueueUrl"}
	ProviderEventsDLQURL   = Output{Name: "ProviderEventsDlqUrl"}
	SESConfigurationSet    = Output{Name: "SesConfigurationSetName", Conditional: true}
	SMSConfigurationSet    = Output{Name: "SmsConfigurationSetName", Conditional: true}
	LedgerTable            = Output{Name: "LedgerTableName", Env: settings.LedgerTable.Env, Required: true}
	ContentTable           = Output{Name: "ContentTableName", Env: settings.ContentTable.Env, Required: true}
	BudgetTable            = Output{Name: "BudgetTableName"}
	// LimitsTable holds the send-limit counters (the end-to-end test binds
	// its recorded calls to it).
	LimitsTable   = Output{Name: "LimitsTableName"}
	ContentKeyARN = Output{Name: "ContentKeyArn", Env: settings.ContentKeyARN.Env, Required: true}
	// AttemptProofKeyARN is the HMAC key dispatch signs attempts with (the
	// local end-to-end test signs the events it publishes with it).
	AttemptProofKeyARN = Output{Name: "AttemptProofKeyArn", Env: settings.AttemptProofKeyARN.Env}
	// IntentKeyARN is the HMAC key producers bind an intent's fields with
	// (kms:GenerateMac), next to the content key they seal with.
	IntentKeyARN = Output{Name: "IntentKeyArn", Env: settings.IntentKeyARN.Env, Required: true}
	// FingerprintKeyARN is the HMAC key of the destination fingerprints (the
	// end-to-end test binds dispatch's recorded calls to it).
	FingerprintKeyARN = Output{Name: "FingerprintKeyArn"}
	// OperatorRoleARN is the LedgerOperator role ledgerctl's operators assume.
	OperatorRoleARN = Output{Name: "LedgerOperatorRoleArn"}
	// OperatorFunctionURL is the operator function's URL (AuthType
	// AWS_IAM): ledgerctl resolve posts to it, signed with the caller's
	// credentials.
	OperatorFunctionURL = Output{Name: "OperatorFunctionUrl", Env: "OPERATOR_URL"}
	// OperatorFunction is the operator function's name (the local end-to-end
	// test invokes it with a URL-shaped event: the emulator's function URLs
	// carry no IAM context).
	OperatorFunction = Output{Name: "OperateFunctionName"}
	// DigestBucket is the digest bucket (Object Lock, COMPLIANCE) and
	// DigestKeyARN the KMS key the digests are signed with: ledgerctl
	// verify --digest-bucket --digest-key reads both.
	DigestBucket = Output{Name: "DigestBucketName", Env: settings.DigestBucket.Env, Required: true}
	DigestKeyARN = Output{Name: "DigestKeyArn", Env: settings.DigestKeyARN.Env, Required: true}
	// DigestFunction is the digest function's name.
	DigestFunction = Output{Name: "DigestFunctionName"}
	// DigestFailureDLQURL is the on-failure destination of the digest
	// function's stream mapping.
	DigestFailureDLQURL = Output{Name: "DigestFailureDlqUrl"}
	// BackupVault is the AWS Backup vault of the ledger table's daily backups (not on a
	// stage with backup=false).
	BackupVault = Output{Name: "LedgerBackupVaultName", Conditional: true}
	// WebhookSecretARN is the Secrets Manager secret that signs every
	// webhook request (only on a stage with a webhook transport): operators
	// rotate it, and the local stage gives its value to the local provider.
	WebhookSecretARN = Output{Name: "WebhookSecretArn", Conditional: true}
)

// Function is the output holding the deployed name of a function
// ("ClaimFunctionName"). The claim and dispatch functions' are required.
func Function(role settings.Role) Output {
	name := string(role)
	return Output{
		Name:     strings.ToUpper(name[:1]) + name[1:] + "FunctionName",
		Required: role == settings.Claim || role == settings.Dispatch,
	}
}

// All lists every output a stage can have.
func All() []Output {
	all := []Output{
		IntentQueueURL, IntentQueueARN, IntentDLQURL, StreamFailureDLQURL, DispatchQueueURL, DispatchQueueDLQURL,
		ProviderEventsTopicARN, ProviderEventsQueueURL, ProviderEventsDLQURL, SESConfigurationSet, SMSConfigurationSet,
		LedgerTable, ContentTable, BudgetTable, LimitsTable, ContentKeyARN, AttemptProofKeyARN, IntentKeyARN, FingerprintKeyARN,
		OperatorRoleARN, OperatorFunctionURL, OperatorFunction, BackupVault,
		DigestBucket, DigestKeyARN, DigestFunction, DigestFailureDLQURL,
		WebhookSecretARN,
	}
	for _, r := range settings.Functions {
		all = append(all, Function(r))
	}
	return all
}
