package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/settings"
)

// The stack's two HMAC keys besides the attempt-proof key (events.go), each with one use, so that
// no key answers a question another use asks:
//   - the fingerprint key MACs destinations into the limits table's counter keys
//     (internal/fingerprint). Only dispatch may GenerateMac with it and nobody may VerifyMac, the
//     account root and every IAM policy included: whoever could do either could confirm a guessed
//     address or phone number against the table's keys (issue 33, "no address oracle").
//   - the intent key binds what a producer sealed to the intent's fields: producers GenerateMac,
//     claim VerifyMac, nobody else either.
//
// Both policies deny only the MAC operations: the account root keeps the key policy's default
// statement, so the key stays administrable (describe, tag, schedule deletion, put a new policy),
// and changing the policy is what the stack's security events alarm on (TestSecurityEvents).

// hmacKey defines an HMAC_256 key. KMS rotates no HMAC key (EnableKeyRotation supports symmetric
// encryption keys only), so rotation is off (docs/deploy.md says how to rotate by hand).
func (p *LedgerStackProps) hmacKey(stack awscdk.Stack, id, desc string) awskms.Key {
	return awskms.NewKey(stack, jsii.String(id), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " " + desc),
		KeySpec:           awskms.KeySpec_HMAC_256,
		KeyUsage:          awskms.KeyUsage_GENERATE_VERIFY_MAC,
		EnableKeyRotation: jsii.Bool(false),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
		RemovalPolicy:     p.removalPolicy(),
	})
}

// macKeys defines the fingerprint key and the intent key.
func (p *LedgerStackProps) macKeys(stack awscdk.Stack) (fingerprintKey, intentKey awskms.Key) {
	fingerprintKey = p.hmacKey(stack, awscall.FingerprintKey,
		"destination fingerprints (dispatch MACs each destination into the limits table's keys; nobody verifies)")
	intentKey = p.hmacKey(stack, awscall.IntentKey,
		"intent binding (producers MAC an intent's fields, claim verifies them)")
	return fingerprintKey, intentKey
}

// onlyMac denies action on key to every principal but principals (aws:PrincipalArn); with no
// principals, to every principal.
func onlyMac(key awskms.Key, sid, action string, principals []*string) {
	st := &awsiam.PolicyStatementProps{
		Sid:        jsii.String(sid),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(action),
		Resources:  jsii.Strings("*"),
	}
	if len(principals) > 0 {
		st.Conditions = &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": principals}}
	}
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(st), jsii.Bool(false))
}

// grantFingerprints lets dispatch MAC destinations (kms:GenerateMac, nothing else) under the
// fingerprint key, denies GenerateMac to every other principal and VerifyMac to every principal.
// Dispatch only ever generates: it compares nothing, the counter's key is the MAC itself.
func grantFingerprints(fns map[settings.Role]awslambda.Function, key awskms.Key) {
	dispatch := fns[settings.Dispatch]
	dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("kms:GenerateMac"), Resources: jsii.Strings(*key.KeyArn()),
	}))
	onlyMac(key, "OnlyDispatchFingerprints", "kms:GenerateMac", []*string{dispatch.Role().RoleArn()})
	onlyMac(key, "NoFingerprintVerify", "kms:VerifyMac", nil)
}

// grantIntents lets claim verify intents (kms:VerifyMac) under the intent key and producers
// (producerArns) bind them (kms:GenerateMac), and denies VerifyMac to every principal but claim
// and GenerateMac to every principal but the producers. Without producerArns (the local stage
// only: Validate refuses it elsewhere) GenerateMac is neither granted nor denied by the key.
func (p *LedgerStackProps) grantIntents(fns map[settings.Role]awslambda.Function, key awskms.Key) {
	claim := fns[settings.Claim]
	claim.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("kms:VerifyMac"), Resources: jsii.Strings(*key.KeyArn()),
	}))
	onlyMac(key, "OnlyClaimVerifiesIntents", "kms:VerifyMac", []*string{claim.Role().RoleArn()})
	if len(p.ProducerPrincipalArns) == 0 {
		return
	}
	var producers []awsiam.IPrincipal
	var arns []*string
	for _, arn := range p.ProducerPrincipalArns {
		producers = append(producers, awsiam.NewArnPrincipal(jsii.String(arn)))
		arns = append(arns, jsii.String(arn))
	}
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("ProducersBindIntents"),
		Principals: &producers,
		Actions:    jsii.Strings("kms:GenerateMac"),
		Resources:  jsii.Strings("*"),
	}), jsii.Bool(false))
	onlyMac(key, "OnlyProducersBindIntents", "kms:GenerateMac", arns)
}
