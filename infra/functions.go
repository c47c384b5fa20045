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
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(p.Prefix + " " + string(name) + " function"),
	})
	logs.GrantWrite(role)
	props := &awslambda.FunctionProps{
		FunctionName: jsii.String(p.Prefix + "-" + string(name)),
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

// timeout returns a function's timeout.
func (p *LedgerStackProps) timeout(name settings.Role) time.Duration {
	if _, ok := p.sweepRate(name); ok {
		return p.SweepTimeout
	}
	return functionTimeouts[name]
}
