package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/iampolicy"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The trust boundaries of the production stack (issue 25, "what must be true"), proven by
// evaluating requests against the synthesized template's policies with internal/iampolicy rather
// than by reading them:
//
//   - a principal of the account whose own policy allows sqs:*, sns:*, kms:* and dynamodb:* on *
//     (a role granted too broadly, or taken over) cannot send an intent, send or publish a
//     provider event, open, re-encrypt or seal content, sign or verify an attempt, bind or
//     verify an intent, compute or verify a destination fingerprint (so the limits table's keys
//     confirm no guessed address), read provider event payloads (from the queue, or by
//     subscribing to the topic), purge the provider events in flight, or write the ledger;
//   - the principals the stack exists for still can: the producer, SNS, SES, End User Messaging
//     SMS, each function, the operator role, and CloudFormation subscribing the stack's queue;
//   - each of the first is denied by the explicit Deny whose Sid it names: without that one
//     statement the same request is allowed, so the Deny is what protects it;
//   - (issue 42) an insider allowed lambda:InvokeFunction on * (with and without a qualifier),
//     iam:PassRole, lambda:CreateFunction and sqs:* cannot invoke any function but through its
//     trigger, cannot act as a function's role from a function of its own (the role's own Deny,
//     removed from the role's policy to show it is load-bearing), and cannot take intents or add
//     to the dispatch queue or the DLQs (insiderChecks); the triggers themselves still can
//     (triggerChecks);
//   - (issue 43) the same insider, with s3:*, cannot delete or overwrite a log file of the
//     data-events trail, nor change its retention (NoTrailLogDeletes, OnlyThisTrailWrites), nor can
//     another trail deliver into its bucket, while CloudTrail still delivers for the trail; and
//     EventBridge may invoke the digest function for its tick's rule only.
//
// What is evaluated is each request against the policies as deployed. That the same principal
// could first change a policy (kms:PutKeyPolicy, sqs:SetQueueAttributes, sns:SetTopicAttributes,
// dynamodb:PutResourcePolicy are all within its four wildcards) is not checked here: no resource
// policy can stop that. The stack's EventBridge rules tell on-call of every such call
// (TestSecurityEvents), and the README's "What the Denies rest on" says what would stop it.

// The account and region the template is evaluated in, and the principals from outside it.
var (
	boundaryPseudo = iampolicy.Pseudo{Region: "us-east-1", Account: "111122223333"}
	producerARN    = "arn:aws:iam::111122223333:role/account-service"
	attackerARN    = "arn:aws:iam::111122223333:role/attacker"
	// insiderARN is an in-account principal with what a real insider has (issue 34).
	insiderARN = "arn:aws:iam::111122223333:role/insider"
	// oncallARN is the principal operatorArns names in the production template: it may assume
	// LedgerOperator and invoke the operator function.
	oncallARN = "arn:aws:iam::111122223333:role/oncall"
	// deployerARN is the role CloudFormation deploys the stack with (the CDK bootstrap's
	// execution role, which has AdministratorAccess by default).
	deployerARN = "arn:aws:iam::111122223333:role/cdk-hnb659fds-cfn-exec-role-111122223333-us-east-1"
)

// A resource of the template, by type and construct name; for an S3 bucket, path names an object
// in it (the request is on arn:aws:s3:::<bucket>/<path>, the policy the bucket's); for a function,
// qualifier names a version or alias of it (the request is on function:<name>:<qualifier>).
type boundaryResource struct{ typ, name, path, qualifier string }

// on names the resources the checks are made on.
var on = struct {
	intentQueue, eventsQueue, eventsDLQ, eventsTopic, topicKey, contentKey, proofKey, eventsQueueKey,
	fingerprintKey, intentKey, ledgerTable, operatorRole, operateFn, digestKey, digestBucket, digestObject,
	trailLog boundaryResource
}{
	intentQueue:    boundaryResource{typ: "AWS::SQS::Queue", name: "IntentQueue"},
	eventsQueue:    boundaryResource{typ: "AWS::SQS::Queue", name: "ProviderEventsQueue"},
	eventsDLQ:      boundaryResource{typ: "AWS::SQS::Queue", name: "ProviderEventsDlq"},
	eventsTopic:    boundaryResource{typ: "AWS::SNS::Topic", name: "ProviderEventsTopic"},
	topicKey:       boundaryResource{typ: "AWS::KMS::Key", name: "ProviderEventsKey"},
	contentKey:     boundaryResource{typ: "AWS::KMS::Key", name: "ContentKey"},
	proofKey:       boundaryResource{typ: "AWS::KMS::Key", name: "AttemptProofKey"},
	eventsQueueKey: boundaryResource{typ: "AWS::KMS::Key", name: "ProviderEventsQueueKey"},
	fingerprintKey: boundaryResource{typ: "AWS::KMS::Key", name: "FingerprintKey"},
	intentKey:      boundaryResource{typ: "AWS::KMS::Key", name: "IntentKey"},
	ledgerTable:    boundaryResource{typ: "AWS::DynamoDB::Table", name: "LedgerTable"},
	operatorRole:   boundaryResource{typ: "AWS::IAM::Role", name: "LedgerOperatorRole"},
	operateFn:      boundaryResource{typ: "AWS::Lambda::Function", name: "OperateFunction"},
	digestKey:      boundaryResource{typ: "AWS::KMS::Key", name: digestKeyID},
	digestBucket:   boundaryResource{typ: "AWS::S3::Bucket", name: digestBucketID},
	// A digest the writer already wrote (s3digest names them digests/<seq>.json).
	digestObject: boundaryResource{typ: "AWS::S3::Bucket", name: digestBucketID, path: "digests/00000000000000000001.json"},
	// A log file the data-events trail delivered (issue 43).
	trailLog: boundaryResource{typ: "AWS::S3::Bucket", name: "DataEventsTrailBucket",
		path: "AWSLogs/111122223333/CloudTrail/us-east-1/2026/12/06/111122223333_CloudTrail_us-east-1_20261206T0000Z_a1b2.json.gz"},
}

// prodTrailArn is the production stage's data-events trail (loadBoundaries names it).
const prodTrailArn = "arn:aws:cloudtrail:us-east-1:111122223333:trail/resetledger-prod-ledger-writes"

// cloudTrailDelivers is the context of CloudTrail's PutObject of a log file for trail.
func cloudTrailDelivers(trail string) func(*boundaries) map[string]string {
	return func(b *boundaries) map[string]string {
		ctx := b.source(trail)
		ctx["s3:x-amz-acl"] = "bucket-owner-full-control"
		return ctx
	}
}

// queueNamed is a queue of the template by construct name.
func queueNamed(name string) boundaryResource {
	return boundaryResource{typ: "AWS::SQS::Queue", name: name}
}

// function is one function of the template.
func function(name settings.Role) boundaryResource {
	return boundaryResource{typ: "AWS::Lambda::Function", name: title(name) + "Function"}
}

// qualified is r with a qualifier.
func qualified(r boundaryResource, qualifier string) boundaryResource {
	r.qualifier = qualifier
	return r
}

// insiderFunctionARN is a function the insider created (lambda:CreateFunction) and gave a role of
// the stack (iam:PassRole): its code's requests carry its own ARN as lambda:SourceFunctionArn.
const insiderFunctionARN = "arn:aws:lambda:us-east-1:111122223333:function:insider-fn"

// everyFunction is each function of the stack: the five, the operator function and the digest
// function.
var everyFunction = append(slices.Clone(settings.Functions), settings.Operate, settings.Digest)

// functionRole is the role of one function, as the template names it (DispatchRole).
func functionRole(name settings.Role) boundaryResource {
	return boundaryResource{typ: "AWS::IAM::Role", name: title(name) + "Role"}
}

// A boundaryCaller makes requests: a role the template defines (its identity policies are the
// template's), a principal from outside it with its own policy, or a service.
type boundaryCaller struct {
	name      string
	role      *boundaryResource
	principal string
	identity  func(b *boundaries) (iampolicy.Policy, error)
	service   string
	// source is the function whose code makes a role's requests (lambda:SourceFunctionArn); empty
	// for a request Lambda makes with the role outside any function's code.
	source string
}

// as names the callers.
var as = struct {
	attacker, insider, oncall, producer, deployer, sns, ses, sms, operator boundaryCaller
}{
	// The attacker is any role of the account whose policy allows every action of the four
	// services on every resource.
	attacker: boundaryCaller{name: "attacker", principal: attackerARN, identity: func(*boundaries) (iampolicy.Policy, error) {
		return parsePolicy("attacker's policy", `{"Statement":[{"Effect":"Allow","Action":["sqs:*","sns:*","kms:*","dynamodb:*"],"Resource":"*"}]}`)
	}},
	// The insider is any principal of the account with what a real one has: every action of
	// DynamoDB, KMS (what key policies deny aside), S3, SQS, SES and End User Messaging SMS, and
	// sts:AssumeRole, lambda:InvokeFunction (with or without a qualifier), iam:PassRole and
	// lambda:CreateFunction on every resource (issue 42). (What it can do once it assumed
	// LedgerOperator is the operator role's checks: as.operator; what a function it creates with a
	// role of the stack can do is that role's requests from insiderFunctionARN.)
	insider: boundaryCaller{name: "insider", principal: insiderARN, identity: func(*boundaries) (iampolicy.Policy, error) {
		return parsePolicy("insider's policy", `{"Statement":[{"Effect":"Allow","Action":["dynamodb:*","kms:*","s3:*","sqs:*","ses:*","sms-voice:*",
			"sts:AssumeRole","lambda:InvokeFunction","iam:PassRole","lambda:CreateFunction"],"Resource":"*"}]}`)
	}},
	// On-call is named by operatorArns; its own policy allows it every Lambda invocation.
	oncall: boundaryCaller{name: "oncall", principal: oncallARN, identity: func(*boundaries) (iampolicy.Policy, error) {
		return parsePolicy("oncall's policy", `{"Statement":[{"Effect":"Allow","Action":["lambda:InvokeFunction","lambda:InvokeFunctionUrl"],"Resource":"*"}]}`)
	}},
	// The producer has the policy the README gives the account service's role.
	producer: boundaryCaller{name: "producer", principal: producerARN, identity: func(b *boundaries) (iampolicy.Policy, error) {
		queue, err := b.arn(on.intentQueue)
		if err != nil {
			return iampolicy.Policy{}, err
		}
		key, err := b.arn(on.contentKey)
		if err != nil {
			return iampolicy.Policy{}, err
		}
		intentKey, err := b.arn(on.intentKey)
		if err != nil {
			return iampolicy.Policy{}, err
		}
		return parsePolicy("producer's policy (README)", `{"Statement":[
			{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"`+queue+`"},
			{"Effect":"Allow","Action":"kms:GenerateDataKey","Resource":"`+key+`",
			 "Condition":{"StringEquals":{"kms:EncryptionContext:purpose":"`+envelope.Purpose+`"}}},
			{"Effect":"Allow","Action":"kms:GenerateMac","Resource":"`+intentKey+`"}]}`)
	}},
	// The deployer is CloudFormation, allowed everything.
	deployer: boundaryCaller{name: "deployer", principal: deployerARN, identity: func(*boundaries) (iampolicy.Policy, error) {
		return parsePolicy("deployer's policy", `{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}`)
	}},
	sns:      boundaryCaller{name: "sns.amazonaws.com", service: "sns.amazonaws.com"},
	ses:      boundaryCaller{name: "ses.amazonaws.com", service: "ses.amazonaws.com"},
	sms:      boundaryCaller{name: "sms-voice.amazonaws.com", service: "sms-voice.amazonaws.com"},
	operator: boundaryCaller{name: "LedgerOperatorRole", role: &on.operatorRole},
}

// asFunction is a function's role as a caller.
func asFunction(name settings.Role) boundaryCaller {
	r := functionRole(name)
	return boundaryCaller{name: string(name), role: &r}
}

// boundaryWrites are the DynamoDB actions that change items: the single-item writes (a
// TransactWriteItems is authorized as these, item by item), the batch write, and PartiQL's.
var boundaryWrites = []string{
	"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem",
	"dynamodb:PartiQLInsert", "dynamodb:PartiQLUpdate", "dynamodb:PartiQLDelete",
}

func parsePolicy(source, doc string) (iampolicy.Policy, error) {
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return iampolicy.Policy{}, fmt.Errorf("%s: %w", source, err)
	}
	return iampolicy.ParsePolicy(source, v)
}

// A boundaryCheck is one request and what must become of it.
type boundaryCheck struct {
	name    string
	who     boundaryCaller
	action  string
	on      boundaryResource
	ctx     func(b *boundaries) map[string]string
	allowed bool
	// deniedBy is the Sid of the Deny on the resource's policy that must deny the request, and
	// without which the request must be allowed. Empty for a request that must be allowed, or one
	// nothing in the account allows (an implicit deny, which no Deny needs to stand behind).
	deniedBy string
	// byRole says deniedBy is on the caller's role's identity policies, not the resource's policy.
	byRole bool
}

// boundaries is the production template, loaded for evaluation.
type boundaries struct {
	stack  *iampolicy.Stack
	sesSet string // the SES configuration set's ARN
	smsSet string // the End User Messaging SMS configuration set's ARN
}

// TestBoundaries evaluates every boundaryCheck against the production template: stage prod, with
// producerArns set and email through SES and SMS through End User Messaging SMS.
func TestBoundaries(t *testing.T) {
	b := loadBoundaries(t)
	checks := slices.Concat(attackerChecks(), insiderChecks(), legitimateChecks(), triggerChecks())
	t.Run("requests", func(t *testing.T) {
		for _, c := range checks {
			t.Run(c.who.name+" "+c.name, func(t *testing.T) {
				policyOf := c.on.name
				if c.byRole {
					policyOf = c.who.role.name
				}
				d, err := b.decide(b.stack, c)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case d.Allowed != c.allowed && c.allowed:
					t.Errorf("%s %s on %s is denied (%s), want allowed", c.who.name, c.action, c.on.name, d.Reason)
				case d.Allowed != c.allowed && c.deniedBy != "":
					t.Errorf("%s %s on %s is allowed (%s), want denied by %s on %s's policy", c.who.name, c.action, c.on.name, d.Reason, c.deniedBy, policyOf)
				case d.Allowed != c.allowed:
					t.Errorf("%s %s on %s is allowed (%s), want denied", c.who.name, c.action, c.on.name, d.Reason)
				case c.deniedBy != "" && !strings.HasSuffix(d.Reason, " statement "+c.deniedBy):
					t.Errorf("%s %s on %s is denied (%s), want denied by %s on %s's policy", c.who.name, c.action, c.on.name, d.Reason, c.deniedBy, policyOf)
				}
			})
		}
	})
	// Each denial proven by its Deny fails without it: remove that one statement, and the same
	// request must be allowed.
	t.Run("without each deny", func(t *testing.T) { boundaryDenialsAreLoadBearing(t, b, checks) })
	// Every function writes the ledger with the actions its role is granted, past the table's Deny.
	t.Run("functions write the ledger", func(t *testing.T) { functionsWriteTheLedger(t, b) })
}

// functionsWriteTheLedger: every function writes the ledger with the actions its
// role is granted, past the table's Deny.
func functionsWriteTheLedger(t *testing.T, b *boundaries) {
	table, err := b.arn(on.ledgerTable)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append(slices.Clone(settings.Functions), settings.Operate) {
		t.Run(string(name), func(t *testing.T) {
			role, err := b.arn(functionRole(name))
			if err != nil {
				t.Fatal(err)
			}
			writes := grantedWrites(b.stack.Roles[role], table)
			if len(writes) == 0 {
				t.Fatalf("the %s role is granted no write on the ledger table", name)
			}
			for _, action := range writes {
				d, err := b.stack.Decide(role, action, table, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed {
					t.Errorf("%s %s on the ledger table is denied (%s), want allowed", name, action, d.Reason)
				}
			}
		})
	}
}

// boundaryDenialsAreLoadBearing: each denial proven by its Deny fails without it:
// remove that one statement, and the same request must be allowed.
func boundaryDenialsAreLoadBearing(t *testing.T, b *boundaries, checks []boundaryCheck) {
	for _, c := range checks {
		if c.deniedBy == "" {
			continue
		}
		t.Run(c.deniedBy+" "+c.who.name+" "+c.name, func(t *testing.T) {
			arn, err := b.arn(c.on)
			if c.byRole {
				arn, err = b.arn(*c.who.role)
			}
			if err != nil {
				t.Fatal(err)
			}
			var without *iampolicy.Stack
			if c.byRole {
				without, err = b.stack.WithoutRoleStatement(arn, c.deniedBy)
			} else {
				without, err = b.stack.WithoutStatement(arn, c.deniedBy)
			}
			if errors.Is(err, iampolicy.ErrNoStatement) {
				t.Fatalf("statement %s not found on %s's policy", c.deniedBy, arn)
			}
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.decide(without, c)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				t.Errorf("without %s on %s's policy, %s %s is still denied (%s): %s is not what protects it",
					c.deniedBy, c.on.name, c.who.name, c.action, d.Reason, c.deniedBy)
			}
		})
	}
}

// attackerChecks are what a principal of the account allowed sqs:*, sns:*, kms:* and dynamodb:*
// on * must not do, each with the Deny that stops it. It is long because it is one table, a
// request per line.
func attackerChecks() []boundaryCheck {
	sealed := func(b *boundaries) map[string]string { return b.sealingContext(envelope.Purpose) }
	viaSQS := func(queue boundaryResource) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string { return b.viaSQS(queue) }
	}
	deny := func(name, action string, on boundaryResource, ctx func(*boundaries) map[string]string, sid string) boundaryCheck {
		return boundaryCheck{name: name, who: as.attacker, action: action, on: on, ctx: ctx, deniedBy: sid}
	}
	// The attacker's own queue, and the stack's queue subscribed over another protocol.
	ownQueue := func(*boundaries) map[string]string {
		return subscription("arn:aws:sqs:"+boundaryPseudo.Region+":"+boundaryPseudo.Account+":attacker", "sqs")
	}
	eventsQueueAs := func(protocol string) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string { return subscription(b.mustARN(on.eventsQueue), protocol) }
	}
	checks := []boundaryCheck{
		deny("sends an intent", "sqs:SendMessage", on.intentQueue, nil, "OnlyProducersSendIntents"),
		deny("sends a provider event", "sqs:SendMessage", on.eventsQueue, nil, "OnlyTopicDelivers"),
		deny("sends a provider event to the DLQ", "sqs:SendMessage", on.eventsDLQ, nil, "OnlyTopicDelivers"),
		deny("publishes a provider event", "sns:Publish", on.eventsTopic, nil, "OnlyProvidersPublish"),
		deny("subscribes its own queue to the provider events", "sns:Subscribe", on.eventsTopic, ownQueue, "OnlyOurSubscription"),
		deny("subscribes the events queue's ARN over another protocol", "sns:Subscribe", on.eventsTopic, eventsQueueAs("lambda"), "OnlySqsSubscription"),
		deny("purges the provider events in flight", "sqs:PurgeQueue", on.eventsQueue, nil, "NoPurgeOfEvidence"),
		deny("decrypts content", "kms:Decrypt", on.contentKey, sealed, "OnlySendersDecrypt"),
		deny("re-encrypts content's data key from the content key", "kms:ReEncryptFrom", on.contentKey, sealed, "OnlySendersDecrypt"),
		deny("re-encrypts a data key to the content key", "kms:ReEncryptTo", on.contentKey, sealed, "OnlySendersDecrypt"),
		deny("creates a grant on the content key", "kms:CreateGrant", on.contentKey, nil, "OnlySendersDecrypt"),
		deny("seals content with a data key", "kms:GenerateDataKey", on.contentKey, sealed, "OnlyProducersSeal"),
		deny("seals content with Encrypt", "kms:Encrypt", on.contentKey, sealed, "OnlyProducersSeal"),
		deny("signs an attempt", "kms:GenerateMac", on.proofKey, nil, "OnlySendersSign"),
		// No address oracle (issue 33): the limits table's keys are MACs of destinations under the
		// fingerprint key. Whoever could VerifyMac a guessed address against a key, or MAC one and
		// look it up, would learn whether it was sent to; nobody may verify, only dispatch may MAC.
		deny("verifies a guessed address against a destination fingerprint", "kms:VerifyMac", on.fingerprintKey, nil, "NoFingerprintVerify"),
		deny("fingerprints a guessed address", "kms:GenerateMac", on.fingerprintKey, nil, "OnlyDispatchFingerprints"),
		// Fingerprints made under the attempt-proof key before the fingerprint key existed stay in
		// the table until their windows end; and only events checks a proof.
		deny("verifies with the attempt-proof key", "kms:VerifyMac", on.proofKey, nil, "OnlyEventsVerify"),
		deny("binds an intent", "kms:GenerateMac", on.intentKey, nil, "OnlyProducersBindIntents"),
		deny("verifies an intent", "kms:VerifyMac", on.intentKey, nil, "OnlyClaimVerifiesIntents"),
		deny("reads provider events from the queue", "kms:Decrypt", on.eventsQueueKey, viaSQS(on.eventsQueue), "OnlyEventsReads"),
		deny("reads provider events from the DLQ", "kms:Decrypt", on.eventsQueueKey, viaSQS(on.eventsDLQ), "OnlyEventsReads"),
	}
	for _, action := range boundaryWrites {
		checks = append(checks, deny("writes the ledger ("+strings.TrimPrefix(action, "dynamodb:")+")", action, on.ledgerTable, nil, "OnlyLedgerWriters"))
		checks = append(checks, boundaryCheck{name: "writes the ledger (" + strings.TrimPrefix(action, "dynamodb:") + ")", who: as.insider,
			action: action, on: on.ledgerTable, deniedBy: "OnlyLedgerWriters"})
	}
	// The signed digests (issue 34): the insider (kms:* and s3:* on *) can neither sign a digest nor
	// delete or overwrite one. Object Lock would refuse to delete a locked version too, but the
	// evaluator sees policies, not locks: the Denies are checked here, the lock by TestDigestBucket.
	insiderDenied := func(name, action string, on boundaryResource, sid string) boundaryCheck {
		return boundaryCheck{name: name, who: as.insider, action: action, on: on, deniedBy: sid}
	}
	checks = append(checks,
		insiderDenied("signs a digest", "kms:Sign", on.digestKey, "OnlyDigestSigns"),
		insiderDenied("deletes a digest", "s3:DeleteObject", on.digestObject, "NoDigestDeletes"),
		insiderDenied("deletes a digest's version", "s3:DeleteObjectVersion", on.digestObject, "NoDigestDeletes"),
		insiderDenied("overwrites a digest", "s3:PutObject", on.digestObject, "OnlyDigestWrites"),
		insiderDenied("sets a digest's retention", "s3:PutObjectRetention", on.digestObject, "OnlyDigestWrites"),
		// The data-events trail's log files (issue 43): Object Lock keeps each version, which the
		// evaluator does not see (TestDataEventsTrail checks the lock); the Denies are checked here.
		insiderDenied("deletes a trail log file", "s3:DeleteObject", on.trailLog, noTrailLogDeletesSid),
		insiderDenied("deletes a trail log file's version", "s3:DeleteObjectVersion", on.trailLog, noTrailLogDeletesSid),
		insiderDenied("overwrites a trail log file", "s3:PutObject", on.trailLog, onlyThisTrailWrites),
		insiderDenied("sets a trail log file's retention", "s3:PutObjectRetention", on.trailLog, onlyThisTrailWrites),
		insiderDenied("puts a legal hold on a trail log file", "s3:PutObjectLegalHold", on.trailLog, onlyThisTrailWrites),
		// Another trail (the insider's own, in this account) delivering into the bucket.
		boundaryCheck{name: "delivers another trail's log file", who: cloudTrail, action: "s3:PutObject", on: on.trailLog,
			ctx:      cloudTrailDelivers(strings.TrimSuffix(prodTrailArn, "resetledger-prod-ledger-writes") + "insider"),
			deniedBy: onlyThisTrailWrites},
	)
	// The operator function records whoever its request context names: only a request through
	// the URL carries a context AWS wrote, and only an operator may make one.
	checks = append(checks,
		boundaryCheck{name: "invokes the operator function through its URL", who: as.insider, action: "lambda:InvokeFunction",
			on: on.operateFn, ctx: throughURL, deniedBy: "OnlyOperatorsInvoke"},
		boundaryCheck{name: "invokes the operator function directly, with a request context it wrote", who: as.oncall,
			action: "lambda:InvokeFunction", on: on.operateFn, deniedBy: "OnlyThroughTheUrl"},
	)
	return checks
}

// insiderChecks are what the insider (issue 42: lambda:InvokeFunction on *, iam:PassRole,
// lambda:CreateFunction and sqs:* among its grants) must not do, each with the Deny that stops it:
//   - invoke any function, by its name or with a qualifier ($LATEST), but through what triggers
//     it (the operator function: through its URL, which only operators may);
//   - act as a function's role from a function of its own (PassRole and CreateFunction: the
//     function's code's requests carry its own lambda:SourceFunctionArn), each role on what it
//     holds that matters;
//   - receive, delete, hide or purge intents, or add messages to the dispatch queue or the DLQs.
func insiderChecks() []boundaryCheck {
	var checks []boundaryCheck
	invokeSid := func(name settings.Role) string {
		switch name {
		case settings.Reconcile, settings.Expire:
			return onlyItsScheduleSid
		case settings.Operate:
			return "OnlyOperatorsInvoke"
		}
		return onlyItsEventSourceSid
	}
	for _, name := range everyFunction {
		var ctx func(*boundaries) map[string]string
		if name == settings.Operate {
			ctx = throughURL // a direct invocation meets OnlyThroughTheUrl first; the URL's, OnlyOperatorsInvoke alone
		}
		for _, q := range []string{"", "$LATEST"} {
			how := "invokes the " + string(name) + " function"
			if q != "" {
				how += " as " + string(name) + ":" + q
			}
			checks = append(checks, boundaryCheck{name: how, who: as.insider, action: "lambda:InvokeFunction",
				on: qualified(function(name), q), ctx: ctx, deniedBy: invokeSid(name)})
		}
	}
	checks = append(checks, boundaryCheck{name: "invokes the operator function directly as operate:$LATEST", who: as.oncall,
		action: "lambda:InvokeFunction", on: qualified(function(settings.Operate), "$LATEST"), deniedBy: "OnlyThroughTheUrl"})

	for _, r := range roleRequests() {
		checks = append(checks, boundaryCheck{name: r.what, who: asFunctionFrom(r.role, insiderFunctionARN),
			action: r.action, on: r.on, ctx: r.ctx, deniedBy: onlyThroughItsFunctionSid, byRole: true})
	}

	sqs := func(name, action string, on boundaryResource, sid string) boundaryCheck {
		return boundaryCheck{name: name, who: as.insider, action: action, on: on, deniedBy: sid}
	}
	for _, action := range intentReceives {
		checks = append(checks, sqs(strings.TrimPrefix(action, "sqs:")+" on the intent queue", action, on.intentQueue, onlyClaimReceivesSid))
	}
	checks = append(checks,
		sqs("purges the intent queue", "sqs:PurgeQueue", on.intentQueue, noPurgeOfIntentsSid),
		sqs("sends to the dispatch queue", "sqs:SendMessage", queueNamed("DispatchQueue"), onlyDispatchSendsSid),
		sqs("sends to the intent DLQ", "sqs:SendMessage", queueNamed("IntentDlq"), noSendsButRedriveSid),
		sqs("sends to the dispatch queue's DLQ", "sqs:SendMessage", queueNamed("DispatchQueueDlq"), noSendsButRedriveSid),
		sqs("sends to the stream-failure DLQ", "sqs:SendMessage", queueNamed("StreamFailureDlq"), onlyDispatchFailSid),
		sqs("sends to the digest failure DLQ", "sqs:SendMessage", queueNamed(digestDLQID), onlyDigestFailSid),
		sqs("sends a provider event", "sqs:SendMessage", on.eventsQueue, "OnlyTopicDelivers"),
		sqs("sends to the provider events DLQ", "sqs:SendMessage", on.eventsDLQ, "OnlyTopicDelivers"),
	)
	return checks
}

// roleRequest is a request a function's role is for: what its function's code does with it.
type roleRequest struct {
	what   string
	role   settings.Role
	action string
	on     boundaryResource
	ctx    func(*boundaries) map[string]string
}

// roleRequests are, for each function's role, the requests that matter most among what it holds.
func roleRequests() []roleRequest {
	sealed := func(b *boundaries) map[string]string { return b.sealingContext(envelope.Purpose) }
	return []roleRequest{
		{"verifies an intent", settings.Claim, "kms:VerifyMac", on.intentKey, nil},
		{"writes a claim", settings.Claim, "dynamodb:PutItem", on.ledgerTable, nil},
		{"decrypts content", settings.Dispatch, "kms:Decrypt", on.contentKey, sealed},
		{"signs an attempt", settings.Dispatch, "kms:GenerateMac", on.proofKey, nil},
		{"fingerprints a destination", settings.Dispatch, "kms:GenerateMac", on.fingerprintKey, nil},
		{"records a decision", settings.Dispatch, "dynamodb:UpdateItem", on.ledgerTable, nil},
		{"re-drives a row", settings.Reconcile, "sqs:SendMessage", queueNamed("DispatchQueue"), nil},
		{"records a decision", settings.Reconcile, "dynamodb:UpdateItem", on.ledgerTable, nil},
		{"expires a row", settings.Expire, "dynamodb:UpdateItem", on.ledgerTable, nil},
		{"verifies an attempt", settings.Events, "kms:VerifyMac", on.proofKey, nil},
		{"records a provider event", settings.Events, "dynamodb:UpdateItem", on.ledgerTable, nil},
		{"records an operator", settings.Operate, "dynamodb:UpdateItem", on.ledgerTable, nil},
		{"signs a digest", settings.Digest, "kms:Sign", on.digestKey, nil},
		{"writes a digest", settings.Digest, "s3:PutObject", on.digestObject, nil},
	}
}

// ownFunctionARN is the ARN of the production stage's function name.
func ownFunctionARN(name settings.Role) string {
	return "arn:aws:lambda:" + boundaryPseudo.Region + ":" + boundaryPseudo.Account + ":function:resetledger-prod-" + string(name)
}

// asFunctionFrom is a function's role as a caller, its requests made by the code of the function
// source (their lambda:SourceFunctionArn).
func asFunctionFrom(name settings.Role, source string) boundaryCaller {
	c := asFunction(name)
	c.name += " role in " + source[strings.LastIndex(source, ":")+1:]
	c.source = source
	return c
}

// triggerChecks are the requests the new Denies must leave alone: each function's own code acting
// as its role, what Lambda does with a role for an event source mapping (no
// lambda:SourceFunctionArn), the writers of the dispatch queue and the DLQs, and EventBridge
// invoking a sweep for its schedule (and for nothing else).
func triggerChecks() []boundaryCheck {
	allow := func(who boundaryCaller, name, action string, on boundaryResource, ctx func(*boundaries) map[string]string) boundaryCheck {
		return boundaryCheck{name: name, who: who, action: action, on: on, ctx: ctx, allowed: true}
	}
	var checks []boundaryCheck
	for _, r := range roleRequests() {
		checks = append(checks, allow(asFunctionFrom(r.role, ownFunctionARN(r.role)), r.what, r.action, r.on, r.ctx))
	}
	schedule := func(rule string) func(*boundaries) map[string]string {
		return func(b *boundaries) map[string]string {
			return b.source(b.mustARN(boundaryResource{typ: "AWS::Events::Rule", name: rule}))
		}
	}
	events := boundaryCaller{name: "events.amazonaws.com", service: "events.amazonaws.com"}
	checks = append(checks,
		// The mappings' pollers and on-failure sends carry no lambda:SourceFunctionArn.
		allow(asFunction(settings.Claim), "polls the intent queue", "sqs:ReceiveMessage", on.intentQueue, nil),
		allow(asFunction(settings.Claim), "deletes a claimed intent", "sqs:DeleteMessage", on.intentQueue, nil),
		allow(asFunction(settings.Dispatch), "polls the dispatch queue", "sqs:ReceiveMessage", queueNamed("DispatchQueue"), nil),
		allow(asFunction(settings.Dispatch), "sends a stream batch it gave up on", "sqs:SendMessage", queueNamed("StreamFailureDlq"), nil),
		allow(asFunction(settings.Digest), "sends a stream batch it gave up on", "sqs:SendMessage", queueNamed(digestDLQID), nil),
		allow(asFunctionFrom(settings.Dispatch, ownFunctionARN(settings.Dispatch)), "wakes a deferred row", "sqs:SendMessage",
			queueNamed("DispatchQueue"), nil),
		allow(events, "invokes reconcile for its schedule", "lambda:InvokeFunction", function(settings.Reconcile), schedule("ReconcileSchedule")),
		allow(events, "invokes expire for its schedule", "lambda:InvokeFunction", function(settings.Expire), schedule("ExpireSchedule")),
		// The digest function's heartbeat tick (issue 43): its own rule only.
		allow(events, "invokes digest for its tick", "lambda:InvokeFunction", function(settings.Digest), schedule("DigestSchedule")),
		boundaryCheck{name: "invokes digest for the reconcile schedule", who: events, action: "lambda:InvokeFunction",
			on: function(settings.Digest), ctx: schedule("ReconcileSchedule")},
		boundaryCheck{name: "invokes reconcile for the digest tick", who: events, action: "lambda:InvokeFunction",
			on: function(settings.Reconcile), ctx: schedule("DigestSchedule")},
		boundaryCheck{name: "invokes reconcile for the expire schedule", who: events, action: "lambda:InvokeFunction",
			on: function(settings.Reconcile), ctx: schedule("ExpireSchedule")},
		boundaryCheck{name: "invokes dispatch for a schedule", who: events, action: "lambda:InvokeFunction",
			on: function(settings.Dispatch), ctx: schedule("ReconcileSchedule")},
		// A function's role may not write a DLQ another function's mapping writes.
		boundaryCheck{name: "sends to the digest failure DLQ", who: asFunction(settings.Dispatch), action: "sqs:SendMessage", on: queueNamed(digestDLQID)},
	)
	return checks
}

// callerAccount is the context of a KMS request from a principal of the account.
func callerAccount(*boundaries) map[string]string {
	return map[string]string{"kms:CallerAccount": boundaryPseudo.Account}
}

// throughURL is the context of the invocation a function URL request with AuthType AWS_IAM makes.
func throughURL(*boundaries) map[string]string {
	return map[string]string{"lambda:InvokedViaFunctionUrl": "true", "lambda:FunctionUrlAuthType": "AWS_IAM"}
}

// legitimateChecks are the requests the stack exists for, and the nearby ones it must refuse
// without any Deny's help. It is long because it is one table, a request per line, after
// the few builders its lines share.
func legitimateChecks() []boundaryCheck {
	sealing := func(purpose string) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string { return b.sealingContext(purpose) }
	}
	fromTopic := func(queue boundaryResource) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string {
			ctx := b.source(b.mustARN(on.eventsTopic))
			if queue != (boundaryResource{}) {
				ctx["kms:EncryptionContext:aws:sqs:arn"] = b.mustARN(queue)
			}
			return ctx
		}
	}
	fromSet := func(set func(b *boundaries) string) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string { return b.source(set(b)) }
	}
	ses := func(b *boundaries) string { return b.sesSet }
	sms := func(b *boundaries) string { return b.smsSet }
	viaSQS := func(queue boundaryResource) func(b *boundaries) map[string]string {
		return func(b *boundaries) map[string]string { return b.viaSQS(queue) }
	}
	allow := func(who boundaryCaller, name, action string, on boundaryResource, ctx func(*boundaries) map[string]string) boundaryCheck {
		return boundaryCheck{name: name, who: who, action: action, on: on, ctx: ctx, allowed: true}
	}
	refuse := func(who boundaryCaller, name, action string, on boundaryResource, ctx func(*boundaries) map[string]string) boundaryCheck {
		return boundaryCheck{name: name, who: who, action: action, on: on, ctx: ctx}
	}
	return []boundaryCheck{
		allow(as.producer, "sends an intent", "sqs:SendMessage", on.intentQueue, nil),
		allow(as.producer, "seals content", "kms:GenerateDataKey", on.contentKey, sealing(envelope.Purpose)),
		// The key's grant to producers carries the purpose condition, so the README's role
		// condition is not the only one.
		refuse(as.producer, "seals for another purpose", "kms:GenerateDataKey", on.contentKey, sealing("other")),
		refuse(as.producer, "decrypts content", "kms:Decrypt", on.contentKey, sealing(envelope.Purpose)),

		// CloudFormation creates the stack's own subscription as the deploying principal.
		allow(as.deployer, "subscribes the events queue", "sns:Subscribe", on.eventsTopic,
			func(b *boundaries) map[string]string { return subscription(b.mustARN(on.eventsQueue), "sqs") }),

		allow(as.sns, "delivers to the events queue", "sqs:SendMessage", on.eventsQueue, fromTopic(boundaryResource{})),
		allow(as.sns, "delivers to the events DLQ", "sqs:SendMessage", on.eventsDLQ, fromTopic(boundaryResource{})),
		allow(as.sns, "encrypts for the events queue", "kms:GenerateDataKey", on.eventsQueueKey, fromTopic(on.eventsQueue)),
		allow(as.sns, "decrypts for the events queue", "kms:Decrypt", on.eventsQueueKey, fromTopic(on.eventsQueue)),
		refuse(as.sns, "delivers for another topic", "sqs:SendMessage", on.eventsQueue,
			func(b *boundaries) map[string]string { return b.source(b.mustARN(on.eventsTopic) + "-other") }),

		allow(as.ses, "publishes for its configuration set", "sns:Publish", on.eventsTopic, fromSet(ses)),
		allow(as.ses, "encrypts for the topic", "kms:GenerateDataKey", on.topicKey, fromSet(ses)),
		refuse(as.ses, "publishes for another configuration set", "sns:Publish", on.eventsTopic,
			func(b *boundaries) map[string]string { return b.source(b.sesSet + "-other") }),
		allow(as.sms, "publishes for its configuration set", "sns:Publish", on.eventsTopic, fromSet(sms)),
		allow(as.sms, "encrypts for the topic", "kms:GenerateDataKey", on.topicKey, fromSet(sms)),
		refuse(as.sms, "publishes for another configuration set", "sns:Publish", on.eventsTopic,
			func(b *boundaries) map[string]string { return b.source(b.smsSet + "-other") }),

		allow(asFunction(settings.Dispatch), "decrypts content", "kms:Decrypt", on.contentKey, sealing(envelope.Purpose)),
		// The production stage sends through SES and SMS, never again from reconcile: it opens no content.
		refuse(asFunction(settings.Reconcile), "decrypts content", "kms:Decrypt", on.contentKey, sealing(envelope.Purpose)),
		refuse(asFunction(settings.Claim), "decrypts content", "kms:Decrypt", on.contentKey, sealing(envelope.Purpose)),
		allow(asFunction(settings.Dispatch), "signs an attempt", "kms:GenerateMac", on.proofKey, nil),
		allow(asFunction(settings.Events), "verifies an attempt", "kms:VerifyMac", on.proofKey, nil),
		refuse(asFunction(settings.Events), "signs an attempt", "kms:GenerateMac", on.proofKey, nil),
		refuse(asFunction(settings.Dispatch), "verifies an attempt", "kms:VerifyMac", on.proofKey, nil),
		allow(asFunction(settings.Dispatch), "fingerprints a destination", "kms:GenerateMac", on.fingerprintKey, nil),
		refuse(asFunction(settings.Dispatch), "verifies a destination fingerprint", "kms:VerifyMac", on.fingerprintKey, nil),
		refuse(asFunction(settings.Events), "fingerprints a destination", "kms:GenerateMac", on.fingerprintKey, nil),
		allow(as.producer, "binds an intent", "kms:GenerateMac", on.intentKey, nil),
		refuse(as.producer, "verifies an intent", "kms:VerifyMac", on.intentKey, nil),
		allow(asFunction(settings.Claim), "verifies an intent", "kms:VerifyMac", on.intentKey, nil),
		refuse(asFunction(settings.Claim), "binds an intent", "kms:GenerateMac", on.intentKey, nil),
		// The account root keeps administering the fingerprint key (its policy's default
		// statement), but gets no MAC operation out of it.
		allow(as.deployer, "administers the fingerprint key", "kms:PutKeyPolicy", on.fingerprintKey, nil),
		refuse(as.deployer, "verifies a destination fingerprint", "kms:VerifyMac", on.fingerprintKey, nil),
		refuse(as.deployer, "fingerprints a guessed address", "kms:GenerateMac", on.fingerprintKey, nil),
		allow(asFunction(settings.Events), "reads provider events from the queue", "kms:Decrypt", on.eventsQueueKey, viaSQS(on.eventsQueue)),

		allow(as.operator, "reads a row", "dynamodb:GetItem", on.ledgerTable, nil),
		// The operator role writes nothing itself (checked twice over in TestOperatorCannotWriteTheLedger).
		refuse(as.operator, "updates a row", "dynamodb:UpdateItem", on.ledgerTable, nil),
		refuse(as.operator, "puts a row", "dynamodb:PutItem", on.ledgerTable, nil),
		refuse(as.operator, "deletes a row", "dynamodb:DeleteItem", on.ledgerTable, nil),
		allow(as.operator, "invokes the operator function's URL", "lambda:InvokeFunctionUrl", on.operateFn, throughURL),
		allow(as.operator, "invokes the operator function through its URL", "lambda:InvokeFunction", on.operateFn, throughURL),
		refuse(as.operator, "invokes the operator function directly", "lambda:InvokeFunction", on.operateFn, nil),
		allow(as.oncall, "invokes the operator function through its URL", "lambda:InvokeFunction", on.operateFn, throughURL),
		allow(asFunction(settings.Operate), "resolves a row", "dynamodb:UpdateItem", on.ledgerTable, nil),

		// The digest role writes and signs digests; the operator role and any principal of the
		// account check them; neither of those signs or writes.
		allow(asFunction(settings.Digest), "signs a digest", "kms:Sign", on.digestKey, nil),
		allow(asFunction(settings.Digest), "writes a digest", "s3:PutObject", on.digestObject, nil),
		allow(asFunction(settings.Digest), "locks a digest", "s3:PutObjectRetention", on.digestObject, nil),
		allow(asFunction(settings.Digest), "reads the newest digest", "s3:GetObject", on.digestObject, nil),
		allow(asFunction(settings.Digest), "probes for the newest digest", "s3:ListBucket", on.digestBucket, nil),
		refuse(asFunction(settings.Digest), "deletes a digest's version", "s3:DeleteObjectVersion", on.digestObject, nil),
		refuse(asFunction(settings.Dispatch), "signs a digest", "kms:Sign", on.digestKey, nil),
		allow(as.operator, "lists the digests' versions", "s3:ListBucketVersions", on.digestBucket, nil),
		allow(as.operator, "reads a digest's first version", "s3:GetObjectVersion", on.digestObject, nil),
		allow(as.operator, "reads the digest key's public key", "kms:GetPublicKey", on.digestKey, callerAccount),
		refuse(as.operator, "signs a digest", "kms:Sign", on.digestKey, callerAccount),
		refuse(as.operator, "writes a digest", "s3:PutObject", on.digestObject, nil),
		allow(as.insider, "verifies a digest's signature", "kms:Verify", on.digestKey, callerAccount),

		// CloudTrail still delivers the data-events trail's log files into its locked bucket.
		allow(cloudTrail, "delivers a log file of its trail", "s3:PutObject", on.trailLog, cloudTrailDelivers(prodTrailArn)),
	}
}

// cloudTrail is CloudTrail's service principal, delivering a trail's log files.
var cloudTrail = boundaryCaller{name: "cloudtrail.amazonaws.com", service: "cloudtrail.amazonaws.com"}

// loadBoundaries synthesizes the production stage and loads its template.
func loadBoundaries(t *testing.T) *boundaries {
	t.Helper()
	var stageProps *LedgerStackProps
	s := synth(t, func(p *LedgerStackProps) {
		prod := DefaultLedgerStackProps("prod")
		prod.AssetDir, prod.Functions.SESFrom, prod.AlarmTopicArn = p.AssetDir, p.Functions.SESFrom, p.AlarmTopicArn
		prod.Functions.Transports[ledger.Email], prod.Functions.Transports[ledger.SMS] = settings.TransportSES, settings.TransportSMS
		prod.ProducerPrincipalArns = []string{producerARN}
		prod.OperatorPrincipalArns = []string{oncallARN}
		prod.DataEventsTrail = "resetledger-prod-ledger-writes"
		*p = *prod
		stageProps = p
	})
	raw, err := json.Marshal(s.json)
	if err != nil {
		t.Fatal(err)
	}
	stack, err := iampolicy.LoadTemplate(raw, boundaryPseudo)
	if err != nil {
		t.Fatal(err)
	}
	b := &boundaries{stack: stack}
	b.sesSet = "arn:aws:ses:" + boundaryPseudo.Region + ":" + boundaryPseudo.Account + ":configuration-set/" + stageProps.sesConfigurationSet()
	sets := s.resources("AWS::SMSVOICE::ConfigurationSet")
	if len(sets) != 1 {
		t.Fatalf("want one End User Messaging SMS configuration set, got %d", len(sets))
	}
	for _, set := range sets {
		b.smsSet = "arn:aws:sms-voice:" + boundaryPseudo.Region + ":" + boundaryPseudo.Account + ":configuration-set/" + props(set)["ConfigurationSetName"].(string)
	}
	return b
}

func (b *boundaries) arn(r boundaryResource) (string, error) {
	arn, err := b.stack.ARN(r.typ, r.name)
	if err != nil {
		return "", fmt.Errorf("%s %s is not in the production template: %w", r.typ, r.name, err)
	}
	return arn, nil
}

// mustARN is arn for building a request's context: a missing resource fails the check that
// names it as its target, so here it only leaves the value empty.
func (b *boundaries) mustARN(r boundaryResource) string {
	arn, _ := b.arn(r)
	return arn
}

// sealingContext is the request context of a producer's GenerateDataKey (and of the senders'
// Decrypt): the envelope's encryption context (pkg/envelope), with purpose as given.
func (b *boundaries) sealingContext(purpose string) map[string]string {
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: "chal-boundary", Channel: ledger.Email}.Key()
	return map[string]string{
		"kms:EncryptionContext:purpose": purpose, "kms:EncryptionContext:dedupe_key": key,
		"kms:CallerAccount": boundaryPseudo.Account,
	}
}

// viaSQS is the context of the KMS call SQS makes with a receiver's credentials to decrypt a
// message of queue.
func (b *boundaries) viaSQS(queue boundaryResource) map[string]string {
	return map[string]string{
		"kms:ViaService": "sqs." + boundaryPseudo.Region + ".amazonaws.com", "kms:CallerAccount": boundaryPseudo.Account,
		"kms:EncryptionContext:aws:sqs:arn": b.mustARN(queue),
	}
}

// subscription is the context of an sns:Subscribe request: the endpoint and protocol it
// subscribes (Amazon SNS's condition keys for Subscribe).
func subscription(endpoint, protocol string) map[string]string {
	return map[string]string{"sns:Endpoint": endpoint, "sns:Protocol": protocol}
}

// source is the context a service's request carries for the resource it acts for.
func (b *boundaries) source(arn string) map[string]string {
	return map[string]string{"aws:SourceArn": arn, "aws:SourceAccount": boundaryPseudo.Account}
}

// decide evaluates c against stack (the loaded template, or a copy of it without one statement).
func (b *boundaries) decide(stack *iampolicy.Stack, c boundaryCheck) (iampolicy.Decision, error) {
	resource, err := b.arn(c.on)
	if err != nil {
		return iampolicy.Decision{}, err
	}
	if c.on.path != "" {
		resource += "/" + c.on.path
	}
	if c.on.qualifier != "" {
		resource += ":" + c.on.qualifier
	}
	var ctx map[string]string
	if c.ctx != nil {
		ctx = c.ctx(b)
	}
	if c.who.role != nil {
		role, err := b.arn(*c.who.role)
		if err != nil {
			return iampolicy.Decision{}, err
		}
		if c.who.source != "" {
			ctx = maps.Clone(ctx)
			if ctx == nil {
				ctx = map[string]string{}
			}
			ctx["lambda:SourceFunctionArn"] = c.who.source
		}
		return stack.Decide(role, c.action, resource, ctx)
	}
	req := iampolicy.Request{Action: c.action, Resource: resource, Context: ctx}
	if c.who.service != "" {
		req.Service = c.who.service
		return stack.Authorize(req, nil)
	}
	identity, err := c.who.identity(b)
	if err != nil {
		return iampolicy.Decision{}, err
	}
	req.Principal, req.Account = c.who.principal, boundaryPseudo.Account
	return stack.Authorize(req, []iampolicy.Policy{identity})
}

// grantedWrites are the ledger write actions role's identity policies allow on table.
func grantedWrites(role *iampolicy.Role, table string) []string {
	if role == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, pol := range role.Policies {
		for _, st := range pol.Statements {
			if st.Effect != iampolicy.Allow {
				continue
			}
			for _, res := range st.Resource {
				if !iampolicy.ArnLike(res, table) {
					continue
				}
				for _, granted := range st.Action {
					for _, w := range boundaryWrites {
						if iampolicy.Glob(strings.ToLower(granted), strings.ToLower(w)) && !seen[w] {
							seen[w] = true
							out = append(out, w)
						}
					}
				}
			}
		}
	}
	return out
}

// TestOperatorCannotWriteTheLedger: whoever can assume LedgerOperator (the insider of issue 34
// included, when operatorArns is unset) cannot write the ledger table directly, for two reasons
// that each suffice: the role's identity policies allow no write (an implicit deny), and the
// table's resource policy denies every write by a principal that is not a writer (OnlyLedgerWriters,
// which no longer exempts the operator role). Its writes go through the operator function, which
// records who AWS authenticated.
func TestOperatorCannotWriteTheLedger(t *testing.T) {
	b := loadBoundaries(t)
	table, err := b.arn(on.ledgerTable)
	if err != nil {
		t.Fatal(err)
	}
	role, err := b.arn(on.operatorRole)
	if err != nil {
		t.Fatal(err)
	}
	if writes := grantedWrites(b.stack.Roles[role], table); len(writes) != 0 {
		t.Errorf("the operator role is granted %v on the ledger table, want no write", writes)
	}
	without, err := b.stack.WithoutStatement(table, "OnlyLedgerWriters")
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range boundaryWrites {
		t.Run(action, func(t *testing.T) {
			d, err := b.stack.Decide(role, action, table, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || !strings.HasSuffix(d.Reason, " statement OnlyLedgerWriters") {
				t.Errorf("operator role %s on the ledger: %v (%s), want denied by the table's OnlyLedgerWriters", action, d.Allowed, d.Reason)
			}
			// Without the table's Deny, the role's own policies still allow nothing.
			if d, err = without.Decide(role, action, table, nil); err != nil || d.Allowed {
				t.Errorf("without OnlyLedgerWriters, operator role %s on the ledger: %v (%s, %v), want an implicit deny", action, d.Allowed, d.Reason, err)
			}
		})
	}
}
