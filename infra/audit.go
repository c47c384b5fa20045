package main

import (
	"math"
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudtrail"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
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
	trailArn := awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String("cloudtrail"), Resource: jsii.String("trail"), ResourceName: jsii.String(p.DataEventsTrail),
		ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	}, stack)
	key := awskms.NewKey(stack, jsii.String("DataEventsTrailKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " CloudTrail data events of the ledger table"),
		EnableKeyRotation: jsii.Bool(true),
		// The log outlives the stack, as the evidence it records does.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
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
