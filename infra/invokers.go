package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// Nobody but a function's trigger may invoke it (issue 42). Each function's resource policy
// (AWS::Lambda::ResourcePolicy) denies lambda:InvokeFunction, on the function and on every
// qualifier of it (function:F and function:F:*, so an invocation of F:$LATEST is refused too), to
// every principal but what its trigger needs:
//
//   - an event source mapping (claim: the intent queue; dispatch: the dispatch queue and the ledger
//     stream; events: the provider events queue; digest: the ledger stream) needs nothing: the
//     Deny OnlyItsEventSourceInvokes refuses every IAM principal (aws:PrincipalIsAWSService false,
//     or missing), whatever its identity policy allows;
//   - a schedule (reconcile, expire) needs EventBridge for its rule: the policy allows
//     events.amazonaws.com with aws:SourceArn the rule and aws:SourceAccount the account
//     (ItsScheduleInvokes), and denies every invocation whose aws:SourceArn is not the rule
//     (OnlyItsScheduleInvokes), which is every IAM principal's (only a service sets the key) and
//     any other rule's;
//   - the operator function's URL (operator.go: OnlyThroughTheUrl, OnlyOperatorsInvoke).
//
// Why a mapping is unaffected. Lambda's developer guide says the mapping reads its source with the
// function's execution role ("Lambda resource access permissions": "Lambda also uses the execution
// role to get permission to read from event sources when you use an event source mapping") and
// that a resource-based policy is what grants other accounts and AWS services the right to invoke
// ("Lambda resource access permissions"; the whitepaper "Serverless Architectures with AWS Lambda":
// pull-model sources need the execution role's permissions, push-model sources the function
// policy). A mapping invokes with neither: its role holds no lambda:InvokeFunction (AWS's own
// AWSLambdaSQSQueueExecutionRole and AWSLambdaDynamoDBExecutionRole grant none) and these
// functions had no resource policy before this one, yet their mappings invoke them. So the
// mapping's invocation is not a lambda:InvokeFunction request by an IAM principal, which is all
// OnlyItsEventSourceInvokes denies; were it authorized as the Lambda service, the Deny would not
// apply either (aws:PrincipalIsAWSService is true for a service). A service other than Lambda
// still needs an Allow in the policy, and there is none. The schedules' Deny leaves EventBridge's
// invocation for its rule alone by the rule's own aws:SourceArn, the condition its Allow has.
//
// The local emulator (ministack) cannot create AWS::Lambda::ResourcePolicy and enforces no IAM:
// the local stage (SkipOperatorDenies) has none of these policies, and its schedules invoke
// through the CDK target's AWS::Lambda::Permission. What the policies refuse is proven by the
// policy evaluator (TestBoundaries), not by the emulator.

// Sids of the functions' resource policies.
const (
	onlyItsEventSourceSid = "OnlyItsEventSourceInvokes"
	itsScheduleSid        = "ItsScheduleInvokes"
	onlyItsScheduleSid    = "OnlyItsScheduleInvokes"
)

// The digest function has both: its stream mapping and its tick's schedule (see invokers).
//
// invokers gives each event-source-triggered and scheduled function its resource policy; the
// operator function has its own (operator.go). The digest function has both a trigger and a
// schedule (its heartbeat tick, digest.go): OnlyItsEventSourceInvokes still refuses every IAM
// principal, and ItsScheduleInvokes lets EventBridge invoke it for its own rule; no Deny by
// aws:SourceArn, which would also hold for an invocation by its mapping if Lambda authorized
// one as a service without that key. Another rule has no Allow, so it may not invoke it either.
func (p *LedgerStackProps) invokers(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, digest awslambda.Function, schedules map[settings.Role]awsevents.Rule) {
	if p.SkipOperatorDenies {
		return
	}
	all := map[settings.Role]awslambda.Function{settings.Digest: digest}
	for _, name := range settings.Functions {
		all[name] = fns[name]
	}
	for name, fn := range all {
		rule, scheduled := schedules[name]
		mapped := !scheduled || name == settings.Digest
		var statements []awsiam.PolicyStatement
		if mapped {
			statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String(onlyItsEventSourceSid), Effect: awsiam.Effect_DENY,
				Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
				Actions:    jsii.Strings("lambda:InvokeFunction"),
				Resources:  functionAndQualifiers(fn),
				Conditions: &map[string]interface{}{"BoolIfExists": map[string]interface{}{"aws:PrincipalIsAWSService": "false"}},
			}))
		}
		if scheduled {
			statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid:        jsii.String(itsScheduleSid),
				Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), nil)},
				Actions:    jsii.Strings("lambda:InvokeFunction"),
				Resources:  &[]*string{fn.FunctionArn()},
				Conditions: &map[string]interface{}{
					"ArnLike":      map[string]interface{}{"aws:SourceArn": rule.RuleArn()},
					"StringEquals": map[string]interface{}{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()},
				},
			}))
		}
		if scheduled && !mapped {
			statements = append(statements, awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Sid: jsii.String(onlyItsScheduleSid), Effect: awsiam.Effect_DENY,
				Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
				Actions:    jsii.Strings("lambda:InvokeFunction"),
				Resources:  functionAndQualifiers(fn),
				Conditions: &map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:SourceArn": rule.RuleArn()}},
			}))
		}
		functionPolicy(stack, title(name), fn, statements...)
	}
}

// functionPolicy gives fn its whole resource policy, of statements.
func functionPolicy(stack awscdk.Stack, id string, fn awslambda.Function, statements ...awsiam.PolicyStatement) {
	awslambda.NewCfnResourcePolicy(stack, jsii.String(id+"FunctionPolicy"), &awslambda.CfnResourcePolicyProps{
		ResourceArn:    fn.FunctionArn(),
		PolicyDocument: awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements}),
	})
}

// functionAndQualifiers names fn and every version or alias of it ($LATEST included): a
// statement whose Resource is only the function's ARN does not apply to an invocation of
// function:F:$LATEST, which Lambda evaluates against the same policy.
func functionAndQualifiers(fn awslambda.IFunction) *[]*string {
	return &[]*string{fn.FunctionArn(), jsii.String(*fn.FunctionArn() + ":*")}
}
