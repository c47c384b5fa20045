package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
)

// Operators are a role, and the table's resource policy lets no one else write. The role holds
// what ledgerctl's read commands and resolve call, and nothing more; the ledger table denies every
// write to every principal but the five function roles and this role, whatever their identity
// policies allow (an administrator's dynamodb:* included). Who wrote is then one of six roles,
// each write a CloudTrail data event where dataEventsTrail is set (audit.go).

// operatorCall is one DynamoDB call ledgerctl makes for an operator, and the commands that make
// it: read from cmd/ledgerctl and the pkg/dynamostore methods it calls.
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

// operatorCalls are the calls of ledgerctl explain, export, verify, stuck, stats, timeline and resolve (view
// only renders what they read). ledgerctl send is a producer's tool, not an operator's: it seals
// with the content key and sends to the intent queue, and the role may do neither. resolve's
// caller identity comes from sts:GetCallerIdentity, which needs no permission.
var operatorCalls = []operatorCall{
	{"dynamodb:GetItem", ledgerTarget, "explain, verify <challenge> and resolve read a row (Store.Get, consistent); resolve reads back a write whose answer was lost and the held fallback row it settles"},
	{"dynamodb:Query", openIndexTarget, "stuck and stats list the open index's keys (Store.ListOpen)"},
	{"dynamodb:BatchGetItem", ledgerTarget, "stuck and stats read the listed rows (Store.ListOpen), timeline the rows of a subject or destination (Store.ListByRef)"},
	{"dynamodb:Query", subjectIndexTarget, "timeline --subject lists a subject's keys, newest first (Store.ListByRef)"},
	{"dynamodb:Query", destinationIndexTarget, "timeline --destination-ref lists a destination's keys, newest first (Store.ListByRef)"},
	{"dynamodb:Scan", ledgerTarget, "export and verify --all page through the table (Scanner.Page)"},
	{"dynamodb:UpdateItem", ledgerTarget, "resolve records the decision as a conditional update (Store.Apply), and settles a held fallback row the same way"},
	{"dynamodb:DeleteItem", contentTarget, "resolve with --content-table purges the sealed content of the row it closes (ledger.Service.purge); it cannot read content"},
}

// operator defines the LedgerOperator role and the ledger table's write Deny. It returns the role.
func (p *LedgerStackProps) operator(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, st storage) awsiam.Role {
	role := awsiam.NewRole(stack, jsii.String("LedgerOperatorRole"), &awsiam.RoleProps{
		AssumedBy:   p.operatorPrincipal(),
		Description: jsii.String(p.Prefix + " operator: ledgerctl explain, export, verify, stuck, stats, timeline and resolve"),
	})
	targets := map[string]*string{
		ledgerTarget:           st.ledger.TableArn(),
		openIndexTarget:        st.ledgerIndexArn(dynamostore.IndexName),
		subjectIndexTarget:     st.ledgerIndexArn(dynamostore.SubjectIndex),
		destinationIndexTarget: st.ledgerIndexArn(dynamostore.DestinationIndex),
		contentTarget:          st.content.TableArn(),
	}
	byTarget := map[string][]string{}
	var order []string
	for _, c := range operatorCalls {
		if _, ok := byTarget[c.on]; !ok {
			order = append(order, c.on)
		}
		byTarget[c.on] = append(byTarget[c.on], c.action)
	}
	for _, on := range order {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings(byTarget[on]...), Resources: &[]*string{targets[on]},
		}))
	}
	// The tables are under the ledger key: DynamoDB uses it with the caller's permissions, and only
	// through DynamoDB (reads decrypt, resolve's writes encrypt), as the functions' grant does.
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"),
		Resources: jsii.Strings(*st.ledgerKey.KeyArn()),
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{
				"kms:ViaService": awscdk.Fn_Sub(jsii.String("dynamodb.${AWS::Region}.${AWS::URLSuffix}"), nil),
			},
		},
	}))

	writers := []*string{role.RoleArn()}
	for _, name := range settings.Functions {
		writers = append(writers, fns[name].Role().RoleArn())
	}
	st.ledger.AddToResourcePolicy(onlyLedgerWriters(writers))
	awscdk.NewCfnOutput(stack, jsii.String(outputs.OperatorRoleARN.Name), &awscdk.CfnOutputProps{
		Value: role.RoleArn(), Description: jsii.String("Operators assume this role to run ledgerctl (reads and resolve)"),
	})
	return role
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
