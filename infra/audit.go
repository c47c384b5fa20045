package main

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudtrail"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Who wrote the ledger, recorded outside the ledger: with dataEventsTrail=<name> the stack creates
// a CloudTrail trail of that name that logs every write data event of the ledger table (PutItem,
// UpdateItem, DeleteItem, batch and PartiQL writes: the calling principal, its session, the key
// written), into a bucket of its own, encrypted under a key of its own, with log file validation,
// so a digest proves a log file unedited. Reads are not logged (they are most of the calls and
// change nothing), nor management events (the account's own trail has those).

// trailName is what CloudTrail accepts as a trail name.
var trailName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{1,126}[A-Za-z0-9]$`)

// auditTrail defines the data-events trail when DataEventsTrail names one.
func (p *LedgerStackProps) auditTrail(stack awscdk.Stack, st storage) {
	if p.DataEventsTrail == "" {
		return
	}
	key := p.trailKey(stack)

	bucket := awss3.NewBucket(stack, jsii.String("DataEventsTrailBucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_KMS,
		EncryptionKey:     key,
		BucketKeyEnabled:  jsii.Bool(true),
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		// Each log file is locked in COMPLIANCE mode for the history retention as CloudTrail
		// writes it (issue 43): nobody, the account root included, can delete or overwrite a
		// version of it, or shorten the lock, before the rows it is about may go.
		ObjectLockEnabled:          jsii.Bool(true),
		ObjectLockDefaultRetention: awss3.ObjectLockRetention_Compliance(awscdk.Duration_Days(jsii.Number(p.digestRetentionDays()))),
		// A log file is kept as long as the rows it is about: a row lives HISTORY_RETENTION after
		// its last write.
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Expiration:                  awscdk.Duration_Days(jsii.Number(p.retentionDays())),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(p.retentionDays())),
		}},
	})
	cdknag.NagSuppressions_AddResourceSuppressions(bucket, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("This bucket holds only the CloudTrail log of the ledger table's writes. Its own reads " +
			"are S3 data events, which an account trail records where S3 access must be audited; server access logs " +
			"would need yet another bucket, whose access would go unlogged in turn."),
	}}, jsii.Bool(true))

	trailLogBucketPolicy(bucket, p.dataEventsTrailArn(stack))
	// Synth says which shape holds the trail's log files (issue 43): this one, not a log-archive
	// account's.
	awscdk.Annotations_Of(bucket).AddInfo(jsii.String("resetledger:trailLogsInThisAccount: the data-events trail " +
		"writes to a bucket of this stack, in this account, locked (Object Lock COMPLIANCE for the history retention; " +
		"no deletes, writes only by CloudTrail for this trail). A log-archive account, where nobody of this account " +
		"has any right, is the stronger shape: docs/operations.md, Who wrote, recorded outside the ledger."))

	trail := awscloudtrail.NewTrail(stack, jsii.String("DataEventsTrail"), &awscloudtrail.TrailProps{
		TrailName:                  jsii.String(p.DataEventsTrail),
		Bucket:                     bucket,
		EncryptionKey:              key,
		EnableFileValidation:       jsii.Bool(true),
		IncludeGlobalServiceEvents: jsii.Bool(false),
		IsMultiRegionTrail:         jsii.Bool(false),
		SendToCloudWatchLogs:       jsii.Bool(false),
	})
	// The L2 Trail has no advanced event selectors; CloudFormation's AWS::CloudTrail::Trail does.
	// With advanced selectors the trail logs only what they select: no management events.
	cfn := trail.Node().DefaultChild().(awscloudtrail.CfnTrail)
	// The L2 renders an empty EventSelectors list; CloudTrail takes basic or advanced selectors,
	// not both, so the property goes.
	cfn.AddPropertyDeletionOverride(jsii.String("EventSelectors"))
	cfn.SetAdvancedEventSelectors(&[]interface{}{
		&awscloudtrail.CfnTrail_AdvancedEventSelectorProperty{
			Name: jsii.String("Writes to the ledger table"),
			FieldSelectors: &[]interface{}{
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("eventCategory"), EqualTo: jsii.Strings("Data")},
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("resources.type"), EqualTo: jsii.Strings("AWS::DynamoDB::Table")},
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("resources.ARN"), EqualTo: &[]*string{st.ledger.TableArn()}},
				&awscloudtrail.CfnTrail_AdvancedFieldSelectorProperty{Field: jsii.String("readOnly"), EqualTo: jsii.Strings("false")},
			},
		},
	})
}

// Sids of the data-events trail bucket's Denies.
const (
	noTrailLogDeletesSid = "NoTrailLogDeletes"
	onlyThisTrailWrites  = "OnlyThisTrailWrites"
)

// trailLogDeletes and trailLogWrites are the object deletes and writes of the trail's bucket
// policy: every s3:DeleteObject* and s3:PutObject* action, and the governance bypass.
var (
	trailLogDeletes = []string{"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:DeleteObjectTagging",
		"s3:DeleteObjectVersionTagging", "s3:BypassGovernanceRetention"}
	trailLogWrites = []string{"s3:PutObject", "s3:PutObjectAcl", "s3:PutObjectVersionAcl", "s3:PutObjectRetention",
		"s3:PutObjectLegalHold", "s3:PutObjectTagging", "s3:PutObjectVersionTagging"}
)

// trailLogBucketPolicy adds the trail bucket's Denies (issue 43): nobody deletes an object
// (NoTrailLogDeletes: CloudTrail never deletes a log file, and S3's lifecycle expirations are not
// requests a bucket policy governs), and nobody but CloudTrail, delivering for this trail, writes
// one (OnlyThisTrailWrites: every request whose aws:SourceArn is not the trail, which is every IAM
// principal's, since only a service sets the key, and CloudTrail's for any other trail). With
// Object Lock they make a log file's first version permanent for the retention and its key
// unusable for another: CloudTrail's digest files then prove every log file unedited.
func trailLogBucketPolicy(bucket awss3.Bucket, trailArn *string) {
	objects := jsii.Strings(*bucket.ArnForObjects(jsii.String("*")))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String(noTrailLogDeletesSid), Effect: awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(trailLogDeletes...), Resources: objects,
	}))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid: jsii.String(onlyThisTrailWrites), Effect: awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(trailLogWrites...), Resources: objects,
		Conditions: &map[string]interface{}{"ArnNotEquals": map[string]interface{}{"aws:SourceArn": trailArn}},
	}))
}

// dataEventsTrailArn is the data-events trail's ARN, built from its name (not the trail's
// attribute: the trail depends on its bucket's policy, which names it).
func (p *LedgerStackProps) dataEventsTrailArn(stack awscdk.Stack) *string {
	return awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String("cloudtrail"), Resource: jsii.String("trail"), ResourceName: jsii.String(p.DataEventsTrail),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	}, stack)
}

// trailKey is the key the data-events trail's log files are encrypted with: only CloudTrail,
// for this trail, may encrypt with it.
func (p *LedgerStackProps) trailKey(stack awscdk.Stack) awskms.Key {
	trailArn := p.dataEventsTrailArn(stack)
	key := awskms.NewKey(stack, jsii.String("DataEventsTrailKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " CloudTrail data events of the ledger table"),
		EnableKeyRotation: jsii.Bool(true),
		// Retained with the stack's other keys (deletionProtection); the bucket always is.
		RemovalPolicy: p.removalPolicy(),
		PendingWindow: awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
	})
	// CloudTrail encrypts the log files it writes for this trail (AWS CloudTrail user guide,
	// "Configure AWS KMS key policies for CloudTrail"); readers decrypt with IAM permissions
	// the key's account statement allows.
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudTrailEncryptsThisTrail"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudtrail.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"aws:SourceArn": trailArn},
			"StringLike": map[string]interface{}{"kms:EncryptionContext:aws:cloudtrail:arn": awscdk.Arn_Format(&awscdk.ArnComponents{
				Service: jsii.String("cloudtrail"), Region: jsii.String("*"), Resource: jsii.String("trail"),
				ResourceName: jsii.String("*"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
			}, stack)},
		},
	}), jsii.Bool(false))
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("CloudTrailDescribesThisKey"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudtrail.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:DescribeKey"),
		Resources:  jsii.Strings("*"),
	}), jsii.Bool(false))
	return key
}

// retentionDays is the history retention in whole days, rounded up.
func (p *LedgerStackProps) retentionDays() float64 {
	return math.Ceil(p.Functions.Policy.Retention.Hours() / 24)
}

// operatorArn is what operatorArns may name: an IAM role or user, or a role's session, of a
// 12-digit account; never "*" or an account's root, which would trust every principal of it.
var operatorArn = regexp.MustCompile(`^arn:aws[a-z-]*:(iam::\d{12}:(role|user)/[\w+=,.@/-]+|sts::\d{12}:assumed-role/[\w+=,.@-]+/[\w+=,.@-]+)$`)

// validateAudit checks the trail's name and the operators, and that every stage but the local
// one names both: without operatorArns any principal of the account allowed sts:AssumeRole may
// act as an operator, and without dataEventsTrail nothing outside the ledger records who wrote it.
func (p *LedgerStackProps) validateAudit(bad func(string, ...any)) {
	if n := p.DataEventsTrail; n != "" && !trailName.MatchString(n) {
		bad("DataEventsTrail %q: want 3 to 128 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", n)
	}
	for _, arn := range p.OperatorPrincipalArns {
		if !operatorArn.MatchString(arn) {
			bad("operatorArns %q: want an IAM role or user ARN (arn:aws:iam::<account>:role/<name>) or a role session's", arn)
		}
	}
	if p.LocalStage {
		return
	}
	if len(p.OperatorPrincipalArns) == 0 {
		bad("operatorArns is not set: without it the LedgerOperator role trusts the whole account, so any principal " +
			"of it whose own policy allows sts:AssumeRole may resolve rows through the operator function. Pass " +
			"-c operatorArns=<the on-call and compliance role ARNs> (only the local emulator's stage, -c localStage=true, " +
			"may leave it unset)")
	}
	if p.SkipOperatorDenies {
		bad("operatorDenies=false is only for the local emulator's stage (-c localStage=true): without the functions' " +
			"resource policies any principal of the account allowed lambda:InvokeFunction can invoke the operator function " +
			"directly with a request context it wrote, naming anyone, and hand any other function a forged event")
	}
	if p.DataEventsTrail == "" {
		bad("dataEventsTrail is not set: without it nothing outside the ledger records who wrote to it. Pass "+
			"-c dataEventsTrail=<a trail name, e.g. %s-ledger-writes> (only the local emulator's stage, -c localStage=true, "+
			"may leave it unset)", p.Prefix)
	}
}

// keyDeletionWindowDays is every key's deletion window: the longest KMS allows. A key scheduled
// for deletion by accident can be cancelled for 30 days, and the KeyDisabledOrScheduledForDeletion
// rule tells on-call the day it happens.
const keyDeletionWindowDays = 30

// Tampering with what keeps the evidence readable and closed is told to on-call as it happens:
// EventBridge rules on CloudTrail's management events, delivered to the alarm topic.
//
//   - KeyStateOrPolicyChanged: kms:DisableKey, kms:ScheduleKeyDeletion or kms:PutKeyPolicy on any
//     key the stack defines. A disabled or deleted ledger key makes the table and the backups that
//     inherit its encryption unreadable; a key policy holds the Denies that keep content, attempt
//     proofs and provider events to their roles.
//   - LedgerResourcePolicyChanged: dynamodb:PutResourcePolicy or DeleteResourcePolicy on the
//     ledger table, which is how someone would remove OnlyLedgerWriters (operator.go).
//   - QueueChanged: sqs:SetQueueAttributes, AddPermission or RemovePermission (a queue's policy,
//     with its Denies OnlyProducersSendIntents, OnlyTopicDelivers and NoPurgeOfEvidence, and its
//     redrive, retention and key are attributes), PurgeQueue or DeleteQueue on any queue the stack
//     defines. CloudTrail records the queue as requestParameters.queueUrl, the URL the caller
//     passed, which the legacy endpoints spell differently (https://queue.amazonaws.com/...,
//     https://<region>.queue.amazonaws.com/...), so the pattern matches the URL's end,
//     /<account>/<queue name>, which every spelling shares (EventBridge suffix matching).
//   - ProviderEventsTopicChanged: sns:SetTopicAttributes, AddPermission, RemovePermission,
//     Subscribe or DeleteTopic on the provider events topic (requestParameters.topicArn): its
//     policy holds OnlyProvidersPublish, OnlyOurSubscription and OnlySqsSubscription, and a
//     subscription, even a denied one, is someone reaching for its events; and
//     sns:SetSubscriptionAttributes or Unsubscribe on one of its subscriptions
//     (requestParameters.subscriptionArn, the topic's ARN and ":" then the subscription's id),
//     which no topic policy can deny: a filter policy or an unsubscribe silently stops the events.
//   - BucketChanged, FunctionChanged, RolePassedToFunction, RoleChanged, SesConfigurationSetChanged,
//     SmsConfigurationSetChanged, SmsProtectConfigurationChanged and DataEventsTrailChanged: the rest
//     of the boundary (securityRules).
//   - DigestMappingChanged, LedgerTableChanged, WatcherRulesChanged, WatcherTargetsChanged,
//     AlarmsChanged and TrailChanged: what lies under the digests, and the watchers (watchers.go).
//
// Every rule matches failed calls too (an AccessDenied attempt is worth knowing), and a deploy of
// this stack that changes a key, queue, topic or table policy matches as well (CloudFormation
// makes the same call).
// EventBridge receives these events through CloudTrail: the EventBridge user guide says a trail
// with logging enabled is required for "AWS API Call via CloudTrail" events (README).

// securityRule is one such rule: its id, what it watches, and its pattern's source and detail.
type securityRule struct {
	id, watches string
	source      string
	detail      map[string]interface{}
}

// securityEvents defines the rules, their publishing role and, per rule, an alarm on deliveries
// that failed (a topic in another account, or encrypted under a key the role may not use).
func (w *alarms) securityEvents(o observed) {
	stack := w.stack
	// EventBridge publishes with a role of its own (an execution role, which every target type
	// takes), so the on-call topic, which the stack does not own, needs no statement for
	// events.amazonaws.com when it is in this account.
	role := awsiam.NewRole(stack, jsii.String("SecurityEventsRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("events.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
		Description: jsii.String(w.p.Prefix + " EventBridge publishes changes of the stack's keys, queues, topic, ledger policy, " +
			"buckets, functions, roles, configuration sets, trails, digest mapping, ledger table, rules and alarms to the alarm topic"),
	})
	// IAM's calls reach EventBridge in us-east-1 only (CloudTrail records a global service's events
	// there); the stack is environment-agnostic, so synth cannot tell where it will be deployed.
	if region := stack.Region(); *awscdk.Token_IsUnresolved(region) || *region != "us-east-1" {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("resetledger:roleEventsUsEast1Only"), jsii.String(
			"RoleChanged sees IAM calls only when the stack is deployed in us-east-1: EventBridge receives IAM's "+
				"CloudTrail events in that Region only. Elsewhere, watch the stack's roles from us-east-1 as "+
				"docs/deploy.md (The boundary moving is seen) says."), nil)
	}
	made := map[string]awscdk.CfnResource{}
	for _, r := range w.securityRules(o) {
		desc := fmt.Sprintf("Someone tried to change what keeps the evidence readable: %s (CloudTrail, success or failure). "+
			"Runbook: docs/operations.md, Alarms and what to do, %s.", r.watches, r.id)
		var name *string
		if r.id == watcherRulesID || r.id == watcherTargetsID { // they name themselves (watchers.go)
			name = jsii.String(watcherName(w.p.Prefix, r.id))
		}
		rule := awsevents.NewRule(stack, jsii.String(r.id), &awsevents.RuleProps{
			RuleName:    name,
			Description: jsii.String(desc),
			EventPattern: &awsevents.EventPattern{
				Source: jsii.Strings(r.source), DetailType: jsii.Strings("AWS API Call via CloudTrail"), Detail: &r.detail,
			},
		})
		rule.AddTarget(awseventstargets.NewSnsTopic(w.topic, &awseventstargets.SnsTopicProps{Role: role}))
		// cfn-lint-serverless asks every rule's target for a DLQ (ES4000); the Undelivered alarm
		// below is this rule's, as linters.go says for the first four.
		cfn := rule.Node().DefaultChild().(awscdk.CfnResource)
		made[r.id] = cfn
		cfn.AddMetadata(jsii.String("cfn-lint"), map[string]any{"config": map[string]any{"ignore_checks": []string{"ES4000"}}})
		cfn.AddMetadata(jsii.String("cfn-lint-reasons"), map[string]string{"ES4000": securityRuleNoDLQ})
		w.add(r.id+"Undelivered", fmt.Sprintf("EventBridge could not publish the %s rule's event to the alarm topic: "+
			"its role may not publish there or use the topic's key.", r.id),
			awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("FailedInvocations"),
				DimensionsMap: &map[string]*string{"RuleName": rule.RuleName()},
				Statistic:     jsii.String("Sum"), Period: seconds(alarmPeriod),
			}), 1, gte, quiet)
	}
	watchRules(stack, w.p.Prefix, made) // the rules on rules name every rule, themselves included (watchers.go)
}

// stackKeys returns the id and the ARN of every KMS key the stack defines so far, found in the
// construct tree, so a key another part of the stack adds is watched without being listed here.
func stackKeys(stack awscdk.Stack) []*string {
	var ids []*string
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if !*awscdk.CfnResource_IsCfnResource(c) {
			continue
		}
		res := c.(awscdk.CfnResource)
		if *res.CfnResourceType() != "AWS::KMS::Key" {
			continue
		}
		ids = append(ids, res.Ref(), awscdk.Token_AsString(res.GetAtt(jsii.String("Arn"), awscdk.ResolutionTypeHint_STRING), nil))
	}
	return ids
}

// stackQueues returns, for every SQS queue the stack defines so far (found in the construct tree,
// like stackKeys), an EventBridge suffix match on the end of its URL, /<account>/<queue name>.
func stackQueues(stack awscdk.Stack) []interface{} {
	var ends []interface{}
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if !*awscdk.CfnResource_IsCfnResource(c) {
			continue
		}
		res := c.(awscdk.CfnResource)
		if *res.CfnResourceType() != "AWS::SQS::Queue" {
			continue
		}
		name := awscdk.Token_AsString(res.GetAtt(jsii.String("QueueName"), awscdk.ResolutionTypeHint_STRING), nil)
		ends = append(ends, map[string]interface{}{"suffix": jsii.String("/" + *stack.Account() + "/" + *name)})
	}
	return ends
}

// securityRules lists the rules for this stack: the four above, and those that watch the rest of
// the boundary (issue 34, part 5), each matching CloudTrail's eventSource, eventName and the
// resource in requestParameters:
//
//   - BucketChanged: a bucket of this stack (the data-events trail's, the digests') had its policy,
//     Object Lock configuration, versioning, lifecycle, encryption, public access block, ACL,
//     ownership or replication changed or removed, or was deleted (requestParameters.bucketName).
//     CloudTrail names a call by its REST operation, which is not always the SDK's: a lifecycle
//     put is logged as PutBucketLifecycle (seen in CloudTrail samples) and the public access block
//     as PutBucketPublicAccessBlock; both spellings of each are listed, so either matches.
//     Object-level calls (PutObjectRetention, DeleteObject) are data events, not management
//     events, and reach no rule; COMPLIANCE-mode Object Lock refuses them anyway.
//   - FunctionChanged: a function of this stack had its configuration (its environment holds the
//     send limits) or code updated, its resource policy or permissions changed (AddPermission,
//     RemovePermission, PutResourcePolicy, DeleteResourcePolicy: how the operator function's
//     Denies would go), its URL configuration changed, its reserved concurrency set, or was
//     deleted. Lambda's CloudTrail event names carry the API version
//     (UpdateFunctionConfiguration20150331v2, UpdateFunctionCode20150331v2,
//     AddPermission20150331v2, DeleteFunction20150331), so eventName matches by prefix. The
//     function is requestParameters.functionName, which is what the caller passed: a name, a
//     partial ARN (<account>:function:<name>) or an ARN, each possibly with ":<qualifier>"; the
//     resource policy calls name it in requestParameters.resourceArn (the field name follows the
//     API's ResourceArn as CloudTrail spells request members; not confirmed from a sample event).
//     The functions are matched by the stack's name prefix (stackFunctions).
//   - RolePassedToFunction: lambda:CreateFunction or UpdateFunctionConfiguration (any of Lambda's
//     versioned event names, matched by prefix) whose requestParameters.role names a role of this
//     stack: whoever may pass the role (iam:PassRole) gives a function of their own the role's
//     permissions. Each function role denies every request another function's code makes with it
//     (OnlyThroughItsFunction, functions.go), but not what Lambda does with the role outside the
//     code (an event source mapping's polling), so the creation itself is told. The role is an ARN
//     (the API takes nothing else); the pattern matches its end, "/<role name>", ignoring case (IAM
//     role names are unique regardless of case), so every partition, path and casing of the stack's
//     own roles matches and a role whose name merely ends the same does not (the "/" before the
//     name). A deploy of this stack that changes a function's configuration matches too.
//     (requestParameters.role follows the API's Role parameter as CloudTrail spells request
//     members; not confirmed from a sample event.)
//   - RoleChanged: a role of this stack (the functions' roles, which the ledger's OnlyLedgerWriters
//     names as its writers, the operator function's among them; LedgerOperatorRole, whose trust
//     policy is operatorArns; SecurityEventsRole, which publishes these rules' events) had an
//     inline or managed policy, its trust policy or its permissions boundary changed, or was
//     deleted (requestParameters.roleName). IAM is a global service: CloudTrail records its calls
//     in us-east-1, and EventBridge receives them there only, so in a stack deployed to another
//     Region this rule never fires (synth warns; docs/deploy.md says what covers the gap).
//   - SesConfigurationSetChanged: the SES configuration set the senders name (this stack's, or
//     the one sesConfigurationSet names) had an event destination created, changed or deleted, its
//     sending, reputation, delivery, tracking, suppression, VDM or archiving options changed, or was
//     deleted: SES v1 and v2 calls both have eventSource ses.amazonaws.com and
//     requestParameters.configurationSetName (the API's ConfigurationSetName; field name not
//     confirmed from a sample event).
//   - SmsConfigurationSetChanged: the End User Messaging SMS configuration set (this stack's, or
//     the one smsConfigurationSet names) had an event destination created, changed or deleted, its
//     defaults changed, or was deleted (requestParameters.configurationSetName, which the API
//     takes as a name or an ARN: both match; field name not confirmed from a sample event).
//   - SmsProtectConfigurationChanged: the protect configuration every SMS names (the country
//     allow-list) was changed, had its country rules or number overrides changed, was deleted, or
//     was associated with or disassociated from the configuration set
//     (requestParameters.protectConfigurationId, an id or an ARN; or configurationSetName for
//     the association calls; field names not confirmed from a sample event).
//   - DataEventsTrailChanged: StopLogging, DeleteTrail, UpdateTrail, PutEventSelectors or
//     PutInsightSelectors on the data-events trail (requestParameters.name, the trail's name or
//     ARN, as the caller passed it; samples show both).
func (w *alarms) securityRules(o observed) []securityRule {
	stack := w.stack
	fnNames, fnArns := stackFunctions(stack, w.p.Prefix)
	rules := []securityRule{
		{"KeyStateOrPolicyChanged", "a key of this stack was disabled, scheduled for deletion or given a new key policy", "aws.kms",
			map[string]interface{}{
				"eventSource": []string{"kms.amazonaws.com"}, "eventName": []string{"DisableKey", "ScheduleKeyDeletion", "PutKeyPolicy"},
				// The three calls take the key as its id or its ARN, never an alias.
				"requestParameters": map[string]interface{}{"keyId": stackKeys(stack)},
			}},
		{"LedgerResourcePolicyChanged", "the ledger table's resource policy (its write Deny) was replaced or deleted", "aws.dynamodb",
			map[string]interface{}{
				"eventSource": []string{"dynamodb.amazonaws.com"}, "eventName": []string{"PutResourcePolicy", "DeleteResourcePolicy"},
				"requestParameters": map[string]interface{}{"resourceArn": []*string{o.ledger.TableArn()}},
			}},
		{"QueueChanged", "a queue of this stack had its attributes (its policy, redrive, retention or key) or permissions " +
			"changed, or was purged or deleted", "aws.sqs",
			map[string]interface{}{
				"eventSource":       []string{"sqs.amazonaws.com"},
				"eventName":         []string{"SetQueueAttributes", "AddPermission", "RemovePermission", "PurgeQueue", "DeleteQueue"},
				"requestParameters": map[string]interface{}{"queueUrl": stackQueues(stack)},
			}},
		{"ProviderEventsTopicChanged", "the provider events topic had its attributes (its policy, key or delivery) or " +
			"permissions changed, was subscribed to or deleted, or one of its subscriptions was changed or removed", "aws.sns",
			map[string]interface{}{
				"eventSource": []string{"sns.amazonaws.com"},
				"eventName": []string{"SetTopicAttributes", "AddPermission", "RemovePermission", "Subscribe", "DeleteTopic",
					"SetSubscriptionAttributes", "Unsubscribe"},
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"topicArn": []*string{o.events.topic.TopicArn()}}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"subscriptionArn": []interface{}{
						map[string]interface{}{"prefix": jsii.String(*o.events.topic.TopicArn() + ":")},
					}}},
				},
			}},
		{"FunctionChanged", "a function of this stack had its configuration (the send limits are its environment), code, " +
			"permissions, resource policy, URL or reserved concurrency changed, or was deleted", "aws.lambda",
			map[string]interface{}{
				"eventSource": []string{"lambda.amazonaws.com"},
				"eventName":   prefixes(functionCalls...),
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"functionName": fnNames}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"resourceArn": fnArns}},
				},
			}},
		{"RolePassedToFunction", "a function was created with a role of this stack, or given one (lambda CreateFunction or " +
			"UpdateFunctionConfiguration naming it): code that is not the role's own function acting as the role", "aws.lambda",
			map[string]interface{}{
				"eventSource":       []string{"lambda.amazonaws.com"},
				"eventName":         prefixes("CreateFunction", "UpdateFunctionConfiguration"),
				"requestParameters": map[string]interface{}{"role": stackRoleArns(stack)},
			}},
		{"RoleChanged", "a role of this stack (a writer's, the operator's, the security events') had a policy, its trust " +
			"policy or its permissions boundary changed, or was deleted (IAM's events reach EventBridge in us-east-1 only)", "aws.iam",
			map[string]interface{}{
				"eventSource":       []string{"iam.amazonaws.com"},
				"eventName":         roleCalls,
				"requestParameters": map[string]interface{}{"roleName": stackRefs(stack, "AWS::IAM::Role")},
			}},
	}
	rules = append(rules, w.stageSecurityRules(o)...)
	return append(rules, w.watcherRules(o)...) // watchers.go
}

// stageSecurityRules are the rules on what a stage may not have: a pattern may not match on an
// empty list, so a stage without buckets, configuration sets, a protect configuration or a trail
// has no rule on them.
func (w *alarms) stageSecurityRules(o observed) []securityRule {
	var rules []securityRule
	if buckets := stackRefs(w.stack, "AWS::S3::Bucket"); len(buckets) > 0 {
		rules = append(rules, securityRule{"BucketChanged", "a bucket of this stack (the data-events trail's, the digests') " +
			"had its policy, Object Lock, versioning, lifecycle, encryption, public access block, ACL, ownership or " +
			"replication changed, or was deleted", "aws.s3",
			map[string]interface{}{
				"eventSource":       []string{"s3.amazonaws.com"},
				"eventName":         bucketCalls,
				"requestParameters": map[string]interface{}{"bucketName": buckets},
			}})
	}
	if set := o.events.sesSet; set != "" {
		rules = append(rules, securityRule{"SesConfigurationSetChanged", "the SES configuration set the senders name had an " +
			"event destination or its options changed, or was deleted", "aws.ses",
			map[string]interface{}{
				"eventSource":       []string{"ses.amazonaws.com"},
				"eventName":         sesSetCalls,
				"requestParameters": map[string]interface{}{"configurationSetName": []string{set}},
			}})
	}
	if set := o.events.smsSet; set != "" {
		rules = append(rules, securityRule{"SmsConfigurationSetChanged", "the SMS configuration set the senders name had an " +
			"event destination or its defaults changed, or was deleted", "aws.sms-voice",
			map[string]interface{}{
				"eventSource":       []string{"sms-voice.amazonaws.com"},
				"eventName":         smsSetCalls,
				"requestParameters": map[string]interface{}{"configurationSetName": nameOrArn(set, ":configuration-set/")},
			}})
	}
	if pc := o.events.smsProtect; pc != "" {
		rules = append(rules, securityRule{"SmsProtectConfigurationChanged", "the SMS protect configuration (the country " +
			"allow-list) was changed, deleted, or associated with or taken from the configuration set", "aws.sms-voice",
			map[string]interface{}{
				"eventSource": []string{"sms-voice.amazonaws.com"},
				"eventName":   smsProtectCalls,
				"$or": []interface{}{
					map[string]interface{}{"requestParameters": map[string]interface{}{"protectConfigurationId": nameOrArn(pc, ":protect-configuration/")}},
					map[string]interface{}{"requestParameters": map[string]interface{}{"configurationSetName": nameOrArn(o.events.smsSet, ":configuration-set/")}},
				},
			}})
	}
	if trail := w.p.DataEventsTrail; trail != "" {
		rules = append(rules, securityRule{"DataEventsTrailChanged", "the data-events trail was stopped, deleted or " +
			"given other settings or event selectors", "aws.cloudtrail",
			map[string]interface{}{
				"eventSource":       []string{"cloudtrail.amazonaws.com"},
				"eventName":         []string{"StopLogging", "DeleteTrail", "UpdateTrail", "PutEventSelectors", "PutInsightSelectors"},
				"requestParameters": map[string]interface{}{"name": nameOrArn(trail, ":trail/")},
			}})
	}
	return rules
}

// The calls each rule watches, by CloudTrail event name (for Lambda, the name's prefix).
var (
	bucketCalls = []string{"PutBucketPolicy", "DeleteBucketPolicy", "PutObjectLockConfiguration", "PutBucketVersioning",
		"PutBucketLifecycle", "PutBucketLifecycleConfiguration", "DeleteBucketLifecycle",
		"PutBucketEncryption", "DeleteBucketEncryption",
		"PutBucketPublicAccessBlock", "PutPublicAccessBlock", "DeleteBucketPublicAccessBlock", "DeletePublicAccessBlock",
		"PutBucketAcl", "PutBucketOwnershipControls", "DeleteBucketOwnershipControls",
		"PutBucketReplication", "DeleteBucketReplication", "DeleteBucket"}
	// PublishVersion and the alias calls: a version or an alias has a resource policy of its own, not
	// the function's, so an invocation of it is outside the function policy's Denies (invokers.go).
	functionCalls = []string{"UpdateFunctionConfiguration", "UpdateFunctionCode", "AddPermission", "RemovePermission",
		"PutResourcePolicy", "DeleteResourcePolicy", "CreateFunctionUrlConfig", "UpdateFunctionUrlConfig",
		"DeleteFunctionUrlConfig", "PutFunctionConcurrency", "DeleteFunction", "PublishVersion", "CreateAlias",
		"UpdateAlias"}
	roleCalls = []string{"PutRolePolicy", "DeleteRolePolicy", "AttachRolePolicy", "DetachRolePolicy", "UpdateAssumeRolePolicy",
		"PutRolePermissionsBoundary", "DeleteRolePermissionsBoundary", "DeleteRole"}
	sesSetCalls = []string{
		// SES v2
		"CreateConfigurationSetEventDestination", "UpdateConfigurationSetEventDestination", "DeleteConfigurationSetEventDestination",
		"DeleteConfigurationSet", "UpdateConfigurationSet", "PutConfigurationSetSendingOptions", "PutConfigurationSetReputationOptions",
		"PutConfigurationSetDeliveryOptions", "PutConfigurationSetTrackingOptions", "PutConfigurationSetSuppressionOptions",
		"PutConfigurationSetVdmOptions", "PutConfigurationSetArchivingOptions",
		// SES v1 (the event destination calls share their names with v2)
		"UpdateConfigurationSetSendingEnabled", "UpdateConfigurationSetReputationMetricsEnabled",
		"UpdateConfigurationSetTrackingOptions", "DeleteConfigurationSetTrackingOptions"}
	smsSetCalls = []string{"CreateEventDestination", "UpdateEventDestination", "DeleteEventDestination", "DeleteConfigurationSet",
		"SetDefaultMessageType", "DeleteDefaultMessageType", "SetDefaultSenderId", "DeleteDefaultSenderId",
		"SetDefaultMessageFeedbackEnabled"}
	smsProtectCalls = []string{"UpdateProtectConfiguration", "UpdateProtectConfigurationCountryRuleSet", "DeleteProtectConfiguration",
		"PutProtectConfigurationRuleSetNumberOverride", "DeleteProtectConfigurationRuleSetNumberOverride",
		"AssociateProtectConfiguration", "DisassociateProtectConfiguration"}
)

// prefixes is an EventBridge match on any of the prefixes.
func prefixes(ps ...string) []interface{} {
	var out []interface{}
	for _, p := range ps {
		out = append(out, map[string]interface{}{"prefix": p})
	}
	return out
}

// nameOrArn matches a resource the caller may name by its name (or id) or by its ARN, which
// ends in kind (":configuration-set/", ":trail/") and the name.
func nameOrArn(name, kind string) []interface{} {
	return []interface{}{name, map[string]interface{}{"suffix": kind + name}}
}

// stackResources returns every CloudFormation resource of type typ the stack defines so far,
// found in the construct tree, like stackKeys.
func stackResources(stack awscdk.Stack, typ string) []awscdk.CfnResource {
	var out []awscdk.CfnResource
	for _, c := range *stack.Node().FindAll(constructs.ConstructOrder_PREORDER) {
		if !*awscdk.CfnResource_IsCfnResource(c) {
			continue
		}
		if res := c.(awscdk.CfnResource); *res.CfnResourceType() == typ {
			out = append(out, res)
		}
	}
	return out
}

// stackRefs returns the Ref of every resource of type typ: a bucket's or a role's name.
func stackRefs(stack awscdk.Stack, typ string) []*string {
	var refs []*string
	for _, res := range stackResources(stack, typ) {
		refs = append(refs, res.Ref())
	}
	return refs
}

// stackRoleArns matches every role of the stack by the end of its ARN, "/<role name>", ignoring
// case: a role ARN is arn:<partition>:iam::<account>:role/<path><name>, and IAM role names are
// unique in an account regardless of case.
func stackRoleArns(stack awscdk.Stack) []interface{} {
	var out []interface{}
	for _, name := range stackRefs(stack, "AWS::IAM::Role") {
		out = append(out, map[string]interface{}{"suffix": map[string]interface{}{"equals-ignore-case": jsii.String("/" + *name)}})
	}
	return out
}

// stackFunctions matches every function of the stack as a caller may name it:
// requestParameters.functionName takes a name, the name with ":<qualifier>", or a partial
// (<account>:function:<name>) or full ARN with or without one; requestParameters.resourceArn a
// full ARN, qualified or not. The stack names its functions <prefix>-<role> (functions.go), so
// one prefix match covers them all, a function added later included, in a pattern that stays far
// below EventBridge's default limit of 2048 characters (a match per function and spelling would
// not: 8 functions came to 2,500). Its one overreach: a function outside this stack whose name
// starts with the same "<prefix>-" (the stack of a stage named like this one plus a dash, e.g.
// "prod-eu" for "prod") also matches, which is a false alarm, never a missed change. A function
// of the stack named otherwise is matched by its own name.
func stackFunctions(stack awscdk.Stack, prefix string) (names, arns []interface{}) {
	names = []interface{}{
		map[string]interface{}{"prefix": prefix + "-"},
		map[string]interface{}{"wildcard": "*:function:" + prefix + "-*"},
	}
	arns = []interface{}{map[string]interface{}{"wildcard": "*:function:" + prefix + "-*"}}
	for _, res := range stackResources(stack, "AWS::Lambda::Function") {
		if fn, ok := res.(awslambda.CfnFunction); ok && fn.FunctionName() != nil &&
			!*awscdk.Token_IsUnresolved(fn.FunctionName()) && strings.HasPrefix(*fn.FunctionName(), prefix+"-") {
			continue
		}
		name := *res.Ref()
		names = append(names, jsii.String(name),
			map[string]interface{}{"prefix": jsii.String(name + ":")},
			map[string]interface{}{"suffix": jsii.String(":function:" + name)},
			map[string]interface{}{"wildcard": jsii.String("*:function:" + name + ":*")})
		arns = append(arns,
			map[string]interface{}{"suffix": jsii.String(":function:" + name)},
			map[string]interface{}{"wildcard": jsii.String("*:function:" + name + ":*")})
	}
	return names, arns
}
