package main

import (
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// Fixed timeouts of the event-driven functions; the sweeps' is LedgerStackProps.SweepTimeout.
var functionTimeouts = map[settings.Role]time.Duration{
	settings.Claim:    30 * time.Second,
	settings.Dispatch: 60 * time.Second,
	// Events records one provider event per message: a read and a conditional update or two.
	settings.Events: 30 * time.Second,
	// The operator function (operator.go).
	settings.Operate: operateTimeout,
	// The digest function (digest.go).
	settings.Digest: digestTimeout,
}

const functionMemoryMB = 256

// functions defines the five functions (settings.Functions), each with the environment its
// settings give it and the stack's tables, content key and dispatch queue.
func (p *LedgerStackProps) functions(stack awscdk.Stack, st storage, dispatchQueue awssqs.Queue, ev providerEvents, webhookSecret awssecretsmanager.Secret) map[settings.Role]awslambda.Function {
	env := p.environment(st, dispatchQueue, ev, webhookSecret)
	fns := map[settings.Role]awslambda.Function{}
	for _, name := range settings.Functions {
		fns[name] = p.function(stack, name, env[name])
	}
	return fns
}

// environment returns each function's environment: the variables the functions' settings give
// it (settings.Settings.Environ), with the stack's tables, content key, attempt-proof key and
// dispatch queue, and the configuration sets whose events reach the events function (the stack's
// own or context's).
func (p *LedgerStackProps) environment(st storage, dispatchQueue awssqs.Queue, ev providerEvents, webhookSecret awssecretsmanager.Secret) map[settings.Role]map[string]*string {
	fs := p.Functions
	fs.LedgerTable, fs.ContentTable, fs.BudgetTable = *st.ledger.TableName(), *st.content.TableName(), *st.budget.TableName()
	fs.LimitsTable = *st.limits.TableName()
	fs.SubjectIndex = !p.SkipSubjectIndex
	fs.ContentKeyARN, fs.DispatchQueueURL = *st.contentKey.KeyArn(), *dispatchQueue.QueueUrl()
	fs.AttemptProofKeyARN = *ev.proofKey.KeyArn()
	fs.FingerprintKeyARN, fs.IntentKeyARN = *st.fingerprintKey.KeyArn(), *st.intentKey.KeyArn()
	fs.SESConfigurationSet, fs.SMSConfigurationSet = ev.sesSet, ev.smsSet
	fs.SMSProtectConfigurationID = ev.smsProtect
	if webhookSecret != nil {
		fs.WebhookSecretARN = *secretARN(webhookSecret)
	}
	env := map[settings.Role]map[string]*string{}
	for _, name := range settings.Functions {
		env[name] = map[string]*string{}
		for k, v := range fs.Environ(name) {
			env[name][k] = jsii.String(v)
		}
	}
	return env
}

// function defines one Lambda function with its own role and log group (no managed policies).
func (p *LedgerStackProps) function(stack awscdk.Stack, name settings.Role, env map[string]*string) awslambda.Function {
	id := title(name)
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + p.Prefix + "-" + string(name)),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: p.removalPolicy(),
	})
	fnName := p.Prefix + "-" + string(name)
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(p.Prefix + " " + string(name) + " function"),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			onlyThroughItsFunctionSid: awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{
				Statements: &[]awsiam.PolicyStatement{onlyThroughItsFunction(functionArn(stack, fnName))},
			}),
		},
	})
	logs.GrantWrite(role)
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(fnName),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(p.AssetDir, string(name))), nil),
		Architecture: p.Architecture,
		MemorySize:   jsii.Number(functionMemoryMB),
		Timeout:      seconds(p.timeout(name)),
		Environment:  &env,
		LogGroup:     logs,
		Role:         role,
	}
	if rate, ok := p.sweepRate(name); ok {
		// A failed sweep is not retried asynchronously: the next scheduled tick is the retry.
		props.RetryAttempts = jsii.Number(0)
		// One sweep of a kind at a time; a tick throttled by a running sweep is dropped once the
		// next tick is due instead of queueing up behind it.
		props.ReservedConcurrentExecutions = jsii.Number(1)
		props.MaxEventAge = seconds(rate)
	}
	return awslambda.NewFunction(stack, jsii.String(id+"Function"), props)
}

// onlyThroughItsFunctionSid is the Sid (and the inline policy's name) of each function role's Deny
// of every request another function makes with it.
const onlyThroughItsFunctionSid = "OnlyThroughItsFunction"

// onlyThroughItsFunction is a function role's Deny of every action, on every resource, when the
// request's lambda:SourceFunctionArn is there and is not fnArn: the role acts only through its own
// function, so whoever passes it to a function of their own (iam:PassRole with
// lambda:CreateFunction, or lambda:UpdateFunctionConfiguration of another function) gets nothing
// its code can use.
//
// Lambda puts lambda:SourceFunctionArn, the unqualified ARN of the function, in the request
// context of every AWS call made with the function's credentials from inside its execution
// environment (the code's calls), and of the CloudWatch Logs, X-Ray and EFS calls Lambda makes for
// the function; the calls Lambda makes with the role outside the environment carry none: reading an
// event source mapping's queue or stream, sending to a mapping's on-failure destination, and the
// KMS calls SQS and DynamoDB make for those reads ("Using source function ARN to control function
// access behavior", Lambda developer guide). A Deny on ArnNotEquals alone would also hold where
// the key is missing (a negated operator holds on a missing key) and stop the mappings, so the
// statement also requires the key (Null false). The key cannot be used in a resource-based policy
// (same page), which is why the Deny is the role's own, not the keys' or the queues'.
//
// What it leaves open is what Lambda does with the role outside a function's code: a function
// created with this role and given an event source mapping of its own has the mapping read with
// the role (the claim role's could receive intents, the events role's provider events). That
// function's creation names the role, which the RolePassedToFunction rule reports (audit.go), and
// docs/deploy.md's SCP denies iam:PassRole on the stack's roles to all but the deploy role.
func onlyThroughItsFunction(fnArn *string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(onlyThroughItsFunctionSid),
		Effect:    awsiam.Effect_DENY,
		Actions:   jsii.Strings("*"),
		Resources: jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"lambda:SourceFunctionArn": fnArn},
			"Null":         map[string]interface{}{"lambda:SourceFunctionArn": "false"},
		},
	})
}

// functionArn is the ARN of the stack's function name, built from the name (not the function's
// attribute) so a role can name its function before the function exists.
func functionArn(stack awscdk.Stack, name string) *string {
	return awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String("lambda"), Resource: jsii.String("function"), ResourceName: jsii.String(name),
		ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	}, stack)
}

// timeout returns a function's timeout.
func (p *LedgerStackProps) timeout(name settings.Role) time.Duration {
	if _, ok := p.sweepRate(name); ok {
		return p.SweepTimeout
	}
	return functionTimeouts[name]
}
