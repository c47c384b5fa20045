package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// External template linters (lint/template.sh, run by `make lint-template`): cfn-lint with the
// cfn-lint-serverless rules, and checkov. A finding that does not apply to this design is
// suppressed here, on the resource, with its reason, so the synthesized template says why:
//
//	checkov:  Metadata.checkov.skip = [{id: CKV_..., comment: reason}]   (read by checkov)
//	cfn-lint: Metadata.cfn-lint.config.ignore_checks = [rule id, ...]     (read by cfn-lint)
//	          Metadata.cfn-lint-reasons = {rule id: reason}                (for readers and tests;
//	          cfn-lint's own config has no reason field)
//
// Everything else is fixed in the stack, not here.

// linterSkip is one suppressed check and why it does not apply.
type linterSkip struct {
	check  string // a checkov id (CKV_...) or a cfn-lint rule id
	reason string
}

// anyOwner keys the suppressions that apply to every resource of a type.
const anyOwner = "*"

// The reasons the two sweeps (reconcile and expire) and the two SQS event sources share.
const (
	// opaqueQueueReason is why the queues other than the provider events queue and its DLQ use
	// SQS-managed SSE.
	opaqueQueueReason = "Encrypted at rest with SQS-managed SSE (SqsManagedSseEnabled: true), which this " +
		"check does not recognise (it only accepts KmsMasterKeyId). A customer-managed key would add a KMS grant " +
		"for every producer and consumer for no gain in what is exposed: reset secrets and addresses never reach " +
		"this queue in clear (an intent's link, body and address travel sealed under the content key); it holds " +
		"sealed envelopes, opaque ids, hashes or stream-record metadata. The provider events queues, which hold " +
		"providers' event JSON with addresses, use a customer-managed key. TLS is enforced by the queue policy."
	sweepNoDLQ = "Invoked only by its once-a-minute schedule, with async retries off: the next tick is " +
		"the retry. A DLQ would collect schedule events that carry no data; a failing sweep shows in the " +
		"function's Errors metric"
	sqsSourceNoDestination = "An SQS event source mapping does not support an on-failure destination (only " +
		"stream and Kafka sources do)."
	scheduleNoDLQ = "A schedule target's event carries no data and the next tick, one minute " +
		"later, is the retry; a target DLQ would hold empty tick events."
	securityRuleNoDLQ = "The target is the on-call alarm topic. A delivery EventBridge gives up on is counted in the " +
		"rule's FailedInvocations metric, which the rule's Undelivered alarm watches and reports to on-call through " +
		"CloudWatch's own path; a DLQ would keep the lost notification where no one reads it, behind an alarm of its own."
	sweepNoRetries = "The sweep's asynchronous invoke config sets retries to 0 on purpose: " +
		"the next scheduled tick is the retry, and an on-failure destination would record only that a " +
		"data-free tick failed, which the function's Errors metric already counts."
)

// onlyThroughItsFunctionSkip skips WS1003 (a Lambda role's policy with a star in its actions) on a
// function role: its only star is the Action of its OnlyThroughItsFunction Deny, which refuses every
// action to code that is not the role's own function; every Allow names its actions.
var onlyThroughItsFunctionSkip = linterSkip{"WS1003", "The star is the Action of a Deny, not an Allow: " +
	"OnlyThroughItsFunction refuses every action when lambda:SourceFunctionArn names another function " +
	"(a function someone else created with this role). Every Allow of the role names its actions."}

// opaqueQueue skips CKV_AWS_27 on a queue that holds nothing personal in clear.
var opaqueQueue = linterSkip{"CKV_AWS_27", opaqueQueueReason}

// linterSkips lists the suppressions by CloudFormation type and then by owner: the id of the
// construct directly under the stack that the resource belongs to (e.g. "ClaimFunction" for the
// function and its SQS event source mapping), or anyOwner.
var linterSkips = map[string]map[string][]linterSkip{
	"AWS::SQS::Queue": {
		"IntentQueue":   {opaqueQueue},
		"DispatchQueue": {opaqueQueue},
		"IntentDlq": {opaqueQueue, {"ES6000", "This queue is the intent queue's dead-letter queue (its redrive target), so it is " +
			"the end of the line: a redrive policy on it would only move poison intents to yet another queue. It " +
			"keeps them 14 days for inspection and redrive by an operator."}},
		"StreamFailureDlq": {opaqueQueue, {"ES6000", "This queue is the dispatch stream mapping's on-failure destination, a " +
			"dead-letter queue itself: nothing consumes it, so a redrive policy would never apply. It keeps the " +
			"failed batches' metadata 14 days as evidence; reconcile re-drives the claims they point at once they " +
			"are past due."}},
		"DispatchQueueDlq": {opaqueQueue, {"ES6000", "This queue is the dispatch queue's dead-letter queue (its redrive target), " +
			"so it is the end of the line: a redrive policy on it would only move the messages to yet another queue. " +
			"It keeps them 14 days as evidence; the rows they name are re-driven by reconcile, not lost."}},
		digestDLQID: {opaqueQueue, {"ES6000", "This queue is the digest stream mapping's on-failure destination, a " +
			"dead-letter queue itself: nothing consumes it, so a redrive policy would never apply. It keeps the " +
			"metadata (shard, sequence range) of the batches the digest function gave up on 14 days as evidence, " +
			"and is alarmed on depth."}},
		// The provider events queue and its DLQ hold personal data under a customer-managed key
		// (KmsMasterKeyId), so CKV_AWS_27 passes on them and is not skipped.
		"ProviderEventsDlq": {{"ES6000", fmt.Sprintf("This queue is the provider events queue's dead-letter queue (its "+
			"redrive target), so it is the end of the line: a redrive policy on it would only move the events to yet "+
			"another queue. It keeps them %d days from their arrival (a day past the source queue's %d), for the depth "+
			"alarm only: they are providers' event JSON with addresses, which only the events role may decrypt.",
			int(providerEventsDLQRetention.Hours()/24), int(providerEventsRetention.Hours()/24))}},
	},
	"AWS::KMS::Key": {
		digestKeyID: {{"CKV_AWS_33", "The wildcard principals are a Deny (OnlyDigestSigns: kms:Sign for every principal " +
			"but the digest role) and an Allow of kms:GetPublicKey, kms:Verify and kms:DescribeKey only, conditioned on " +
			"kms:CallerAccount being this account (AccountVerifies): any principal of the account may check a digest's " +
			"signature without an IAM grant, nobody outside it, and nobody but the digest role may sign."}},
		"AttemptProofKey": {{"CKV_AWS_7", "An HMAC_256 key (GenerateMac/VerifyMac for the attempt proofs): KMS " +
			"supports automatic rotation only for symmetric encryption keys, and CloudFormation requires " +
			"EnableKeyRotation to be omitted or false for HMAC keys. This check treats HMAC keys as rotatable."}},
		"FingerprintKey": {{"CKV_AWS_7", "An HMAC_256 key (GenerateMac for the destination fingerprints): KMS " +
			"supports automatic rotation only for symmetric encryption keys, and CloudFormation requires " +
			"EnableKeyRotation to be omitted or false for HMAC keys. Rotating it by hand resets the destination " +
			"counters (docs/deploy.md)."}},
		"IntentKey": {{"CKV_AWS_7", "An HMAC_256 key (producers GenerateMac, claim VerifyMac, binding an intent's " +
			"fields): KMS supports automatic rotation only for symmetric encryption keys, and CloudFormation requires " +
			"EnableKeyRotation to be omitted or false for HMAC keys."}},
	},
	"AWS::DynamoDB::Table": {
		"ContentTable": {{"CKV_AWS_28", "The content table holds sealed secret-bearing messages for minutes (TTL at " +
			"challenge expiry, purged at every terminal state); point-in-time backups would keep reset secrets for " +
			"35 days, which the design forbids. The ledger table has PITR."}},
		"BudgetTable": {{"CKV_AWS_28", "The budget table holds one send-rate timestamp per channel, rewritten on " +
			"every send: a restore would bring back a stale one, and losing it only empties the budget (the " +
			"provider's own limit still answers not-sent, which dispatch retries). No evidence lives there; the " +
			"ledger table has PITR."}},
		"LimitsTable": {{"CKV_AWS_28", "The limits table holds send-limit counters that expire an hour after " +
			"their window and each subject's newest challenge: a restore would bring back stale counts. Every " +
			"limit decision is evidence in the ledger table, which has PITR."}},
	},
	"AWS::SecretsManager::Secret": {
		// Only with a webhook transport (webhook.go).
		"WebhookSecret": {{"CKV_AWS_149", "The webhook signing secret is encrypted with the account's aws/secretsmanager " +
			"key. A customer-managed key would add a key policy and kms:Decrypt grants to the senders without narrowing " +
			"who can read it: that is secretsmanager:GetSecretValue, which only the dispatch and reconcile roles hold."}},
	},
	"AWS::CloudTrail::Trail": {
		"DataEventsTrail": {{"CKV_AWS_67", "This trail records the write data events of one DynamoDB table, the ledger, " +
			"which exists only in this stack's region: a multi-region trail would record nothing more of it. The " +
			"account's management-event trail, which should cover every region, belongs to the account, not to this stack."}},
	},
	"AWS::S3::Bucket": {
		digestBucketID: {{"CKV_AWS_18", "This bucket holds only the signed digests, written by the digest role alone " +
			"(its policy denies every other write and every delete; Object Lock COMPLIANCE keeps every version). Reads " +
			"of it are S3 data events, which an account trail records where S3 access must be audited; server access " +
			"logs would need yet another bucket, whose own access would go unlogged in turn."}},
		"DataEventsTrailBucket": {{"CKV_AWS_18", "This bucket holds only the CloudTrail log of the ledger table's " +
			"writes. Reads of it are S3 data events, which an account trail records where S3 access must be audited; " +
			"server access logs would need yet another bucket, whose own access would go unlogged in turn."}},
	},
	"AWS::Logs::LogGroup": {
		anyOwner: {{"CKV_AWS_158", "CloudWatch Logs encrypts these log groups at rest with its own key. A customer-" +
			"managed key would protect nothing more: the functions log opaque challenge ids and content hashes, " +
			"never a token, body or address (the canary test checks every log line), and the key would need a " +
			"logs service grant in its key policy."}},
	},
	"AWS::Lambda::Function": {
		anyOwner: {
			{"CKV_AWS_117", "The functions reach only AWS public service endpoints (DynamoDB, KMS, SES, End User " +
				"Messaging) and optionally an https webhook; they have no private resource to reach. A VPC would add " +
				"NAT or interface endpoints and ENI cold starts without narrowing what the roles may do."},
			{"CKV_AWS_173", "The environment holds no secret, only table names, the content key ARN, transport " +
				"names, the from address and tuning values; Lambda encrypts it at rest with its service key. A " +
				"customer-managed key would add a KMS decrypt grant to every role for nothing confidential."},
			{"WS1000", "Deferred, not rejected: active tracing needs xray:PutTraceSegments and " +
				"xray:PutTelemetryRecords on * in every execution role (Lambda refuses the setting without them), " +
				"so it is to be turned on together with that grant. The functions are not instrumented with the " +
				"X-Ray SDK, so until then Lambda's metrics, the EMF metrics and the JSON logs (with request ids) " +
				"show what Lambda's own trace segments would."},
			{"W3005", "CDK's Function construct emits DependsOn on its role and the role's default policy; the " +
				"role dependency is redundant with the GetAtt, harmless, and not under this stack's control."},
		},
		"ClaimFunction": {
			{"CKV_AWS_116", "Invoked only by its SQS event source mapping (synchronously), never asynchronously, so " +
				"a function DLQ would never receive anything. Failed intents go to the intent queue's redrive DLQ " +
				"after maxReceiveCount receives."},
			{"CKV_AWS_115", "Reserved concurrency on an SQS-triggered function throttles the pollers, and throttled " +
				"receives count toward maxReceiveCount, sending valid intents to the DLQ. Concurrency is bounded by " +
				"the event source (and, if ever needed, its MaximumConcurrency), not by a reservation."},
		},
		"DispatchFunction": {
			{"CKV_AWS_116", "Invoked only by its two event source mappings (the ledger stream and the dispatch " +
				"queue), never asynchronously, so a function DLQ would never receive anything. Stream records it " +
				"gives up on go to the stream mapping's on-failure destination, the stream-failure DLQ; queue " +
				"messages to the dispatch queue's redrive DLQ."},
			{"CKV_AWS_115", "Concurrency is bounded by its sources: one concurrent batch per stream shard " +
				"(parallelization factor 1) and the dispatch queue mapping's MaximumConcurrency. A reservation " +
				"would only take capacity from the account pool, and on an SQS-triggered function it throttles the " +
				"pollers, whose throttled receives count toward maxReceiveCount."},
		},
		"EventsFunction": {
			{"CKV_AWS_116", "Invoked only by its SQS event source mapping (synchronously), never asynchronously, so " +
				"a function DLQ would never receive anything. Provider events it keeps failing on go to the provider " +
				"events queue's redrive DLQ after maxReceiveCount receives."},
			{"CKV_AWS_115", "Reserved concurrency on an SQS-triggered function throttles the pollers, and throttled " +
				"receives count toward maxReceiveCount, sending good provider events to the DLQ. Concurrency is bounded " +
				"by the event source's MaximumConcurrency (eventsMaxConcurrency)."},
		},
		"DigestFunction": {
			{"CKV_AWS_116", "Invoked only by its stream event source mapping (synchronously), never asynchronously, so " +
				"a function DLQ would never receive anything. Batches it gives up on go to the mapping's on-failure " +
				"destination, DigestFailureDlq (alarmed)."},
			{"CKV_AWS_115", "Concurrency is bounded by its source: one batch per stream shard at a time " +
				"(parallelization factor 1). A reservation would only take capacity from the account pool, and a " +
				"throttled digest batch waits in the stream, where a long wait becomes a gap (DigestIteratorAge alarms)."},
		},
		"ReconcileFunction": {{"CKV_AWS_116", sweepNoDLQ + " and in the open-claim age alarm."}},
		"ExpireFunction":    {{"CKV_AWS_116", sweepNoDLQ + "."}},
		"OperateFunction": {
			{"CKV_AWS_116", "Invoked only synchronously, through its AWS_IAM function URL (its resource policy denies " +
				"every other invocation, OnlyThroughTheUrl), so a function DLQ would never receive anything: the " +
				"operator's ledgerctl gets the answer or the error and retries itself."},
			{"CKV_AWS_115", "Called by hand by a few operators (ledgerctl resolve), one request at a time; each call is a " +
				"conditional update, so concurrent calls are harmless, and a reservation would only take capacity " +
				"from the account pool the other functions draw on."},
		},
	},
	// The star is the action of a Deny, not of an Allow (functions.go): each function role's
	// OnlyThroughItsFunction refuses every action to code that is not its own function.
	"AWS::IAM::Role": {
		"ClaimRole": {onlyThroughItsFunctionSkip}, "DispatchRole": {onlyThroughItsFunctionSkip},
		"ReconcileRole": {onlyThroughItsFunctionSkip}, "ExpireRole": {onlyThroughItsFunctionSkip},
		"EventsRole": {onlyThroughItsFunctionSkip}, "DigestRole": {onlyThroughItsFunctionSkip},
		"OperateRole": {onlyThroughItsFunctionSkip},
	},
	"AWS::Lambda::EventSourceMapping": {
		"ClaimIntentQueueSource": {{"ES1001", sqsSourceNoDestination + " The intent queue's redrive policy is its failure destination."}},
		"DispatchQueueSource":    {{"ES1001", sqsSourceNoDestination + " The dispatch queue's redrive policy is its failure destination."}},
		"ProviderEventsSource":   {{"ES1001", sqsSourceNoDestination + " The provider events queue's redrive policy is its failure destination."}},
	},
	"AWS::Events::Rule": {
		"ReconcileSchedule": {{"ES4000", scheduleNoDLQ + " Missed sweeps show as open claims aging past their lease (alarmed)."}},
		"ExpireSchedule":    {{"ES4000", scheduleNoDLQ}},
		"DigestSchedule": {{"ES4000", "A tick carries no data and the next tick, DIGEST_INTERVAL later, is the retry; " +
			"missed ticks show as no digest written (DigestHeartbeat) and a stale newest digest (ledgerctl verify)."}},
		"KeyStateOrPolicyChanged":     {{"ES4000", securityRuleNoDLQ}},
		"LedgerResourcePolicyChanged": {{"ES4000", securityRuleNoDLQ}},
		"QueueChanged":                {{"ES4000", securityRuleNoDLQ}},
		"ProviderEventsTopicChanged":  {{"ES4000", securityRuleNoDLQ}},
	},
}

// suppressLinterFindings adds the linterSkips metadata to the stack's resources. Call it once,
// after every resource is defined.
func suppressLinterFindings(stack awscdk.Stack) {
	prefix := *stack.Node().Path() + "/"
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if !*awscdk.CfnResource_IsCfnResource(c) {
			continue
		}
		res := c.(awscdk.CfnResource)
		byOwner := linterSkips[*res.CfnResourceType()]
		owner, _, _ := strings.Cut(strings.TrimPrefix(*res.Node().Path(), prefix), "/")
		skips := slices.Concat(byOwner[anyOwner], byOwner[owner])
		if len(skips) == 0 {
			continue
		}
		var checkov []map[string]string
		var cfnLint []string
		reasons := map[string]string{}
		for _, s := range skips {
			if strings.HasPrefix(s.check, "CKV_") {
				checkov = append(checkov, map[string]string{"id": s.check, "comment": s.reason})
			} else {
				cfnLint = append(cfnLint, s.check)
				reasons[s.check] = s.reason
			}
		}
		if len(checkov) > 0 {
			res.AddMetadata(jsii.String("checkov"), map[string]any{"skip": checkov})
		}
		if len(cfnLint) > 0 {
			sort.Strings(cfnLint)
			res.AddMetadata(jsii.String("cfn-lint"), map[string]any{"config": map[string]any{"ignore_checks": cfnLint}})
			res.AddMetadata(jsii.String("cfn-lint-reasons"), reasons)
		}
	}
}
