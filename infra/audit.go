package main

import (
	"fmt"
	"math"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudtrail"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
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

// trailKey is the key the data-events trail's log files are encrypted with: only CloudTrail,
// for this trail, may encrypt with it.
func (p *LedgerStackProps) trailKey(stack awscdk.Stack) awskms.Key {
	trailArn := awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String("cloudtrail"), Resource: jsii.String("trail"), ResourceName: jsii.String(p.DataEventsTrail),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	}, stack)
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

// validateAudit checks the trail's name.
func (p *LedgerStackProps) validateAudit(bad func(string, ...any)) {
	if n := p.DataEventsTrail; n != "" && !trailName.MatchString(n) {
		bad("DataEventsTrail %q: want 3 to 128 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", n)
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
		Description: jsii.String(w.p.Prefix + " EventBridge publishes key, queue, topic and ledger policy changes to the alarm topic"),
	})
	for _, r := range []securityRule{
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
	} {
		desc := fmt.Sprintf("Someone tried to change what keeps the evidence readable: %s (CloudTrail, success or failure). "+
			"Runbook: docs/operations.md, Alarms and what to do, %s.", r.watches, r.id)
		rule := awsevents.NewRule(stack, jsii.String(r.id), &awsevents.RuleProps{
			Description: jsii.String(desc),
			EventPattern: &awsevents.EventPattern{
				Source: jsii.Strings(r.source), DetailType: jsii.Strings("AWS API Call via CloudTrail"), Detail: &r.detail,
			},
		})
		rule.AddTarget(awseventstargets.NewSnsTopic(w.topic, &awseventstargets.SnsTopicProps{Role: role}))
		w.add(r.id+"Undelivered", fmt.Sprintf("EventBridge could not publish the %s rule's event to the alarm topic: "+
			"its role may not publish there or use the topic's key.", r.id),
			awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String("AWS/Events"), MetricName: jsii.String("FailedInvocations"),
				DimensionsMap: &map[string]*string{"RuleName": rule.RuleName()},
				Statistic:     jsii.String("Sum"), Period: seconds(alarmPeriod),
			}), 1, gte, quiet)
	}
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
