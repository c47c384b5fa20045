package main

import (
	"strconv"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
)

// Operators are a role, and the table's resource policy lets no one else write. The role reads:
// what ledgerctl's read commands call, and nothing more. It writes nothing itself: an operator's
// write (ledgerctl resolve) is a request to the operator function (functions/operate) through its
// function URL, whose AuthType AWS_IAM makes AWS authenticate the request's SigV4 signature; the
// function records the principal AWS authenticated, so the client cannot name another. The ledger
// table denies every write to every principal but the five function roles and the operator
// function's role, whatever their identity policies allow (an administrator's dynamodb:* included).
// Who wrote is then one of six roles, each write a CloudTrail data event where dataEventsTrail is
// set (audit.go), and an operator's write also names its caller in the entry.

// operatorCall is one DynamoDB call ledgerctl makes for an operator, and the commands that make
// it: read from cmd/ledgerctl and the internal/dynamostore methods it calls.
type operatorCall struct {
	action string
	on     string // ledgerTarget, openIndexTarget, subjectIndexTarget, destinationIndexTarget or contentTarget
	why    string
}

// What an operator call is made on.
const (
	ledgerTarget    = "ledger table"
	openIndexTarget = "ledger table's open index"
	// The timeline indexes (dynamostore.SubjectIndex, DestinationIndex).
	subjectIndexTarget     = "ledger table's subject index"
	destinationIndexTarget = "ledger table's destination index"
	contentTarget          = "content table"
)

// operatorCalls are the calls of ledgerctl explain, export, verify, stuck, stats and timeline (view
// only renders what they read): reads only. ledgerctl resolve calls the operator function
// (operateCalls), and ledgerctl send is a producer's tool, not an operator's: it seals with the
// content key and sends to the intent queue, and the role may do neither.
var operatorCalls = []operatorCall{
	{"dynamodb:GetItem", ledgerTarget, "explain and verify <challenge> read a row (Store.Get, consistent)"},
	{"dynamodb:Query", openIndexTarget, "stuck and stats list the open index's keys (Store.ListOpen)"},
	{"dynamodb:BatchGetItem", ledgerTarget, "stuck and stats read the listed rows (Store.ListOpen), timeline the rows of a subject or destination (Store.ListByRef)"},
	{"dynamodb:Query", subjectIndexTarget, "timeline --subject lists a subject's keys, newest first (Store.ListByRef)"},
	{"dynamodb:Query", destinationIndexTarget, "timeline --destination-ref lists a destination's keys, newest first (Store.ListByRef)"},
	{"dynamodb:Scan", ledgerTarget, "export and verify --all page through the table (Scanner.Page)"},
}

// operateCalls are the DynamoDB calls of the operator function (handler.Operate: resolve.Resolver.Resolve).
var operateCalls = []operatorCall{
	{"dynamodb:GetItem", ledgerTarget, "resolve reads the row (Store.Get, consistent), reads back a write whose answer was lost, and the held fallback row it settles"},
	{"dynamodb:UpdateItem", ledgerTarget, "resolve records the decision as a conditional update (Store.Apply), and settles a held fallback row the same way"},
	{"dynamodb:DeleteItem", contentTarget, "resolve purges the sealed content of the row it closes (the ledger's purge); it cannot read content"},
}

// operateTimeout is the operator function's timeout: one read and one conditional write or two.
const operateTimeout = 30 * time.Second

// operator defines the LedgerOperator role, the operator function with its function URL, and the
// ledger table's write Deny. It returns the role.
func (p *LedgerStackProps) operator(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, st storage, dg digests) awsiam.Role {
	role := awsiam.NewRole(stack, jsii.String("LedgerOperatorRole"), &awsiam.RoleProps{
		AssumedBy:   p.operatorPrincipal(),
		Description: jsii.String(p.Prefix + " operator: ledgerctl explain, export, verify, stuck, stats and timeline, and resolve through the operator function"),
	})
	targets := st.operatorTargets()
	grantTableCalls(role, operatorCalls, targets)
	// The tables are under the ledger key: DynamoDB uses it with the caller's permissions, and only
	// through DynamoDB; the role only reads.
	role.AddToPolicy(ledgerKeyViaDynamoDB(st, "kms:Decrypt", "kms:DescribeKey"))
	grantDigestReads(stack, role, dg)

	fn := p.operateFunction(stack, st, role)
	writers := []*string{fn.Role().RoleArn()}
	for _, name := range settings.Functions {
		writers = append(writers, fns[name].Role().RoleArn())
	}
	st.ledger.AddToResourcePolicy(onlyLedgerWriters(writers))
	awscdk.NewCfnOutput(stack, jsii.String(outputs.OperatorRoleARN.Name), &awscdk.CfnOutputProps{
		Value: role.RoleArn(), Description: jsii.String("Operators assume this role to run ledgerctl (reads, and resolve through the operator function)"),
	})
	awscdk.NewCfnOutput(stack, jsii.String(outputs.OperatorFunction.Name), &awscdk.CfnOutputProps{
		Value: fn.FunctionName(), Description: jsii.String("operator function"),
	})
	return role
}

// grantDigestReads lets the operator role run ledgerctl verify --digest-bucket --digest-key: list
// every version of every digest (s3digest.NewFirstVersions), read each digest's first version,
// and read the key's public key. (The key policy's AccountVerifies allows the key reads to any
// principal of the account; the role's own grant says what the role is for.)
func grantDigestReads(stack awscdk.Stack, role awsiam.Role, dg digests) {
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("s3:ListBucket", "s3:ListBucketVersions"), Resources: jsii.Strings(*dg.bucket.BucketArn()),
	}))
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:GetObject", "s3:GetObjectVersion"),
		Resources: jsii.Strings(*dg.bucket.ArnForObjects(jsii.String("digests/*"))),
	}))
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("kms:GetPublicKey", "kms:Verify", "kms:DescribeKey"), Resources: jsii.Strings(*dg.key.KeyArn()),
	}))
	cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("ledgerctl verify reads every digest, each its own object digests/<seq>.json, so the read " +
			"is granted on the digest bucket's digests/* (read only; the bucket's policy denies every write but the digest role's)."),
		AppliesTo: &[]interface{}{"Resource::<" + *stack.GetLogicalId(dg.bucket.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>/digests/*"},
	}}, jsii.Bool(true))
}

// operatorTargets are the resources operator and operate calls are made on.
func (st storage) operatorTargets() map[string]*string {
	return map[string]*string{
		ledgerTarget:           st.ledger.TableArn(),
		openIndexTarget:        st.ledgerIndexArn(dynamostore.IndexName),
		subjectIndexTarget:     st.ledgerIndexArn(dynamostore.SubjectIndex),
		destinationIndexTarget: st.ledgerIndexArn(dynamostore.DestinationIndex),
		contentTarget:          st.content.TableArn(),
	}
}

// grantTableCalls allows g calls, one statement per target in the order calls first name them.
func grantTableCalls(g awsiam.IGrantable, calls []operatorCall, targets map[string]*string) {
	byTarget := map[string][]string{}
	var order []string
	for _, c := range calls {
		if _, ok := byTarget[c.on]; !ok {
			order = append(order, c.on)
		}
		byTarget[c.on] = append(byTarget[c.on], c.action)
	}
	for _, on := range order {
		g.GrantPrincipal().AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(byTarget[on]...), Resources: &[]*string{targets[on]},
		}))
	}
}

// ledgerKeyViaDynamoDB allows actions on the ledger key only through DynamoDB.
func ledgerKeyViaDynamoDB(st storage, actions ...string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: jsii.Strings(*st.ledgerKey.KeyArn()),
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{
				"kms:ViaService": awscdk.Fn_Sub(jsii.String("dynamodb.${AWS::Region}.${AWS::URLSuffix}"), nil),
			},
		},
	})
}

// operateFunction defines the operator function (settings.Operate), its role's grants, its
// function URL with AuthType AWS_IAM, who may invoke it, and the URL's output. The invokers are the
// operator role and the principals operatorArns names (the entry then names that principal
// itself, not a session of the role).
//
// Since October 2025 a function URL needs both lambda:InvokeFunctionUrl and lambda:InvokeFunction
// (conditioned on lambda:InvokedViaFunctionUrl) ("Control access to Lambda function URLs", Lambda
// developer guide). The resource policy (AWS::Lambda::ResourcePolicy) allows those two to the
// invokers and denies, to every principal: any invocation that is not through the URL (a direct
// Invoke could hand the function a request context it made up, naming anyone), and any
// invocation by a principal that is not an invoker. A Deny in the function's policy holds against
// any identity policy of the account (lambda:* included); changing the policy is an administrator's
// act, and an alarm's. The local stage (SkipOperatorDenies) gives the two allows as
// AWS::Lambda::Permission, without the Denies: the emulator cannot create the resource policy.
func (p *LedgerStackProps) operateFunction(stack awscdk.Stack, st storage, operators awsiam.Role) awslambda.Function {
	fs := p.Functions
	fs.LedgerTable, fs.ContentTable = *st.ledger.TableName(), *st.content.TableName()
	env := map[string]*string{}
	for k, v := range fs.Environ(settings.Operate) {
		env[k] = jsii.String(v)
	}
	fn := p.function(stack, settings.Operate, env)
	grantTableCalls(fn, operateCalls, st.operatorTargets())
	fn.AddToRolePolicy(ledgerKeyViaDynamoDB(st, "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"))

	url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	invokers := []*string{operators.RoleArn()}
	for _, arn := range p.OperatorPrincipalArns {
		invokers = append(invokers, jsii.String(arn))
	}
	viaURL := map[string]interface{}{"Bool": map[string]interface{}{"lambda:InvokedViaFunctionUrl": "true"}}
	iamURL := map[string]interface{}{"StringEquals": map[string]interface{}{"lambda:FunctionUrlAuthType": "AWS_IAM"}}
	// The role's own grant: within the account either side suffices, but the role's policy then
	// says what the role is for.
	operators.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("lambda:InvokeFunctionUrl"), Resources: &[]*string{fn.FunctionArn()}, Conditions: &iamURL,
	}))
	operators.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("lambda:InvokeFunction"), Resources: &[]*string{fn.FunctionArn()}, Conditions: &viaURL,
	}))
	if p.SkipOperatorDenies {
		for i, who := range invokers {
			n := strconv.Itoa(i)
			awslambda.NewCfnPermission(stack, jsii.String("OperatorsInvokeUrl"+n), &awslambda.CfnPermissionProps{
				Action: jsii.String("lambda:InvokeFunctionUrl"), FunctionName: fn.FunctionArn(), Principal: who,
				FunctionUrlAuthType: jsii.String("AWS_IAM"),
			})
			awslambda.NewCfnPermission(stack, jsii.String("OperatorsInvokeViaUrl"+n), &awslambda.CfnPermissionProps{
				Action: jsii.String("lambda:InvokeFunction"), FunctionName: fn.FunctionArn(), Principal: who,
				InvokedViaFunctionUrl: jsii.Bool(true),
			})
		}
	} else {
		awslambda.NewCfnResourcePolicy(stack, jsii.String("OperateFunctionPolicy"), &awslambda.CfnResourcePolicyProps{
			ResourceArn:    fn.FunctionArn(),
			PolicyDocument: operateFunctionPolicy(fn.FunctionArn(), invokers),
		})
	}
	awscdk.NewCfnOutput(stack, jsii.String(outputs.OperatorFunctionURL.Name), &awscdk.CfnOutputProps{
		Value: url.Url(), Description: jsii.String("ledgerctl resolve posts here, signed with the operator's credentials (AuthType AWS_IAM)"),
	})
	return fn
}

// operateFunctionPolicy is the operator function's resource policy: invokers may invoke it through
// its URL, and nobody may invoke it otherwise.
func operateFunctionPolicy(fnArn *string, invokers []*string) awsiam.PolicyDocument {
	var principals []awsiam.IPrincipal
	for _, who := range invokers {
		principals = append(principals, awsiam.NewArnPrincipal(who))
	}
	resources := &[]*string{fnArn}
	// The Denies name the function and every qualifier of it: an invocation of function:F:$LATEST
	// meets this policy with the qualified ARN, which a Resource of F alone does not match.
	everyQualifier := &[]*string{fnArn, jsii.String(*fnArn + ":*")}
	return awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &[]awsiam.PolicyStatement{
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("OperatorsInvokeUrl"), Principals: &principals, Actions: jsii.Strings("lambda:InvokeFunctionUrl"),
			Resources:  resources,
			Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"lambda:FunctionUrlAuthType": "AWS_IAM"}},
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("OperatorsInvokeViaUrl"), Principals: &principals, Actions: jsii.Strings("lambda:InvokeFunction"),
			Resources:  resources,
			Conditions: &map[string]interface{}{"Bool": map[string]interface{}{"lambda:InvokedViaFunctionUrl": "true"}},
		}),
		// A direct Invoke carries whatever request context its caller wrote.
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("OnlyThroughTheUrl"), Effect: awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()}, Actions: jsii.Strings("lambda:InvokeFunction"),
			Resources:  everyQualifier,
			Conditions: &map[string]interface{}{"BoolIfExists": map[string]interface{}{"lambda:InvokedViaFunctionUrl": "false"}},
		}),
		awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("OnlyOperatorsInvoke"), Effect: awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("lambda:InvokeFunctionUrl", "lambda:InvokeFunction"),
			Resources:  everyQualifier,
			Conditions: &map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": invokers}},
		}),
	}})
}

// operatorPrincipal is who may assume the operator role: the principals operatorArns names, or
// the account (any IAM principal of the account whose own policy allows sts:AssumeRole on it).
func (p *LedgerStackProps) operatorPrincipal() awsiam.IPrincipal {
	if len(p.OperatorPrincipalArns) == 0 {
		return awsiam.NewAccountRootPrincipal()
	}
	var ps []awsiam.IPrincipal
	for _, arn := range p.OperatorPrincipalArns {
		ps = append(ps, awsiam.NewArnPrincipal(jsii.String(arn)))
	}
	return awsiam.NewCompositePrincipal(ps...)
}

// ledgerWriteActions are the DynamoDB actions that change items: the single-item writes (a
// TransactWriteItems is authorized as these, item by item), the batch write, and PartiQL's.
var ledgerWriteActions = []string{
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
}

// onlyLedgerWriters denies every item write to every principal but writers, whatever its identity
// policy allows: an explicit Deny in the table's resource policy wins over any Allow.
//
// Its Resource is "*". A resource-based policy takes effect only for the resource it is attached
// to ("When you specify an ARN in the Resource field of a resource-based policy, the policy takes
// effect only if the specified ARN matches the ARN of the DynamoDB resource to which it is
// attached", DynamoDB developer guide, rbac-examples), so "*" in the ledger table's policy means
// this table and its indexes. The table's own ARN cannot be written there: the table's name is
// generated, and a GetAtt of the table inside its own ResourcePolicy property is a circular
// reference CloudFormation refuses. aws-cdk-lib's DynamoDB README ("Resource Policy", "Adding
// Resource Policy Statements Dynamically") says the same: "Auto-generated table names: Must use
// resources: ['*'] to avoid circular dependencies", the alternative being a fixed table name in
// an Fn::Sub; renaming the ledger table would replace it, and the evidence with it.
func onlyLedgerWriters(writers []*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyLedgerWriters"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(ledgerWriteActions...),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": writers},
		},
	})
}
