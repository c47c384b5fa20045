package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
)

// Who may take from and add to the queues (issue 42). An identity policy of the account that allows
// sqs:* could otherwise receive, hide or delete intents (a reset silently lost: no row, no
// evidence) and add messages to the dispatch queue and the DLQs. Explicit Denies in the queues'
// policies, which no identity policy outweighs:
//
//   - the intent queue refuses sqs:ReceiveMessage, sqs:DeleteMessage and
//     sqs:ChangeMessageVisibility (their batch calls are authorized as the same actions) to every
//     principal but the claim role, whose event source mapping polls with it
//     (OnlyClaimReceivesIntents), and sqs:PurgeQueue to everyone (NoPurgeOfIntents: nothing
//     purges it; with receiving closed, a purge was the one way left to drop every intent at once);
//     who may send is OnlyProducersSendIntents (permissions.go);
//   - the dispatch queue refuses sqs:SendMessage to every principal but dispatch (a deferred row's
//     wake-up) and reconcile (its re-drives) (OnlyDispatchAndReconcileSend);
//   - each DLQ refuses sqs:SendMessage to every IAM principal but the role that writes it: the
//     stream-failure DLQ the dispatch role (the stream mapping's on-failure destination, which
//     Lambda sends to with the function's role; OnlyDispatchFailures), the digest failure DLQ the
//     digest role (OnlyDigestFailures); the intent DLQ and the dispatch queue's DLQ nobody
//     (NoSendsButRedrive): SQS itself moves a message there from its source queue after
//     maxReceiveCount receives. The provider events queue and its DLQ refuse every sender but the
//     topic's delivery already (OnlyTopicDelivers, events.go).
//
// The DLQ Denies apply to IAM principals only (aws:PrincipalIsAWSService false, or missing). SQS
// moves a message to a dead-letter queue under the source queue's redrive policy, governed by the
// DLQ's redrive allow policy (Amazon SQS developer guide, "Using policies for dead-letter queues"),
// not by a SendMessage of any principal that a queue policy names; should the move ever be
// authorized as the SQS service, a service principal is outside these Denies, and no service is
// allowed to send by any statement, so none can be used to reach the DLQs instead.
//
// The local emulator enforces no queue policy: TestBoundaries evaluates them.

// Sids of the queue policies.
const (
	onlyClaimReceivesSid = "OnlyClaimReceivesIntents"
	noPurgeOfIntentsSid  = "NoPurgeOfIntents"
	onlyDispatchSendsSid = "OnlyDispatchAndReconcileSend"
	onlyDispatchFailSid  = "OnlyDispatchFailures"
	onlyDigestFailSid    = "OnlyDigestFailures"
	noSendsButRedriveSid = "NoSendsButRedrive"
)

// intentReceives are the actions only the claim role may make on the intent queue.
var intentReceives = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}

// queueBoundaries adds the Denies above to the queues' policies.
func queueBoundaries(fns map[settings.Role]awslambda.Function, in intake, q dispatchQueues, dg digests) {
	roleArn := func(fn awslambda.IFunction) *string { return fn.Role().RoleArn() }
	deny := func(queue awssqs.Queue, sid string, actions []string, conditions map[string]interface{}) {
		st := &awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Effect: awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings(actions...),
			Resources:  jsii.Strings(*queue.QueueArn()),
		}
		if len(conditions) > 0 {
			st.Conditions = &conditions
		}
		queue.AddToResourcePolicy(awsiam.NewPolicyStatement(st))
	}
	onlyRoles := func(roles ...*string) map[string]interface{} {
		return map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": roles}}
	}
	iamPrincipals := map[string]interface{}{"aws:PrincipalIsAWSService": "false"}

	deny(in.queue, onlyClaimReceivesSid, intentReceives, onlyRoles(roleArn(fns[settings.Claim])))
	deny(in.queue, noPurgeOfIntentsSid, []string{"sqs:PurgeQueue"}, nil)
	deny(q.queue, onlyDispatchSendsSid, []string{"sqs:SendMessage"},
		onlyRoles(roleArn(fns[settings.Dispatch]), roleArn(fns[settings.Reconcile])))
	for _, d := range []struct {
		queue awssqs.Queue
		sid   string
		role  awslambda.IFunction
	}{
		{q.streamDLQ, onlyDispatchFailSid, fns[settings.Dispatch]},
		{dg.dlq, onlyDigestFailSid, dg.fn},
		{in.dlq, noSendsButRedriveSid, nil},
		{q.dlq, noSendsButRedriveSid, nil},
	} {
		cond := map[string]interface{}{"BoolIfExists": iamPrincipals}
		if d.role != nil {
			cond["ArnNotEquals"] = map[string]interface{}{"aws:PrincipalArn": []*string{roleArn(d.role)}}
		}
		deny(d.queue, d.sid, []string{"sqs:SendMessage"}, cond)
	}
}
