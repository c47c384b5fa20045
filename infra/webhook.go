package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/settings"
)

// webhookSecretLength is the length of the generated signing secret: 64 letters and digits, about
// 380 bits, above the 32 bytes the transport requires (webhook.MinSecretLen, pkg/webhook).
const webhookSecretLength = 64

// webhookSecret creates the secret that signs every webhook request (pkg/webhook: the
// Webhook-Signature header, HMAC-SHA-256), when a channel sends through the webhook; nil
// otherwise. Secrets Manager generates its first value: letters and digits only, so it can be
// pasted into a receiver's configuration as it is. The senders read it once when they start
// (WEBHOOK_SECRET_ARN); docs/operations.md says how to rotate it with the receiver.
func (p *LedgerStackProps) webhookSecret(stack awscdk.Stack) awssecretsmanager.Secret {
	if !p.Functions.UsesWebhook() {
		return nil
	}
	secret := awssecretsmanager.NewSecret(stack, jsii.String("WebhookSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String(p.Prefix + " webhook signing secret (HMAC-SHA-256 of every webhook request; the receiver holds the same value)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(webhookSecretLength), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: p.removalPolicy(),
	})
	cdknag.NagSuppressions_AddResourceSuppressions(secret, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SMG4"),
		Reason: jsii.String("The receiver holds the same value and must accept a new one before the senders sign with " +
			"it, which a rotation function cannot arrange: rotation is an operator's procedure (docs/operations.md, " +
			"rotate the webhook signing secret), with both values accepted by the receiver in between."),
	}}, jsii.Bool(true))
	return secret
}

// secretARN is the secret's ARN as Fn::GetAtt Id, which is the ARN both in CloudFormation and in
// the local emulator (whose Ref of a secret gives its name, where CloudFormation gives the ARN).
func secretARN(secret awssecretsmanager.Secret) *string {
	return secret.Node().DefaultChild().(awssecretsmanager.CfnSecret).AttrId()
}

// grantWebhookSecret lets the senders read the signing secret: secretsmanager:GetSecretValue on
// it, nothing else (not GrantRead, which adds DescribeSecret). Dispatch signs its sends, reconcile
// its same-key retries and its lookups. The secret is encrypted under the account's
// aws/secretsmanager key, whose policy lets Secrets Manager decrypt for a caller it authorized.
func grantWebhookSecret(fns map[settings.Role]awslambda.Function, secret awssecretsmanager.Secret) {
	if secret == nil {
		return
	}
	for _, name := range settings.Senders {
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("secretsmanager:GetSecretValue"),
			Resources: &[]*string{secretARN(secret)},
		}))
	}
}
