package main

import (
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/digest"
)

// The signed digests (issue 34, docs/digests.md) are kept outside the table, where nobody in the
// account can change them:
//
//   - the digest key (KMS, ECC_NIST_P256, SIGN_VERIFY) signs them. Its policy denies kms:Sign to
//     every principal but the digest function's role (OnlyDigestSigns), the account root and every
//     identity policy included, and lets any principal of the account read the public key and
//     verify (AccountVerifies), so a reviewer needs no grant;
//   - the digest bucket keeps them: Object Lock in COMPLIANCE mode (each digest is locked until
//     its rows' retention ends, at least HISTORY_RETENTION; nobody, root included, can shorten or
//     remove that lock), versioning (Object Lock requires it, and a verifier reads each digest's
//     first version), TLS only, no public access, retained with the stack. Its policy denies
//     every delete to every principal (NoDigestDeletes) and every write to every principal but
//     the digest role (OnlyDigestWrites);
//   - the digest function reads every record of the ledger table's stream (no filter) and writes
//     one digest per batch, the batch gathered for DIGEST_INTERVAL (the batching window);
//   - an EventBridge schedule (DigestSchedule) invokes it every DIGEST_INTERVAL (whole minutes, at
//     least one: digestTickRate), and the tick writes a digest of no rows when the newest is older
//     than half that (internal/digeststream, Tick): a signed digest arrives every interval, quiet
//     or not, so a verifier tells "nothing happened" from "the digests stopped" (issue 43).
//
// What stays possible for an account administrator (replace the bucket or key policy, disable the
// key, disable, delete or recreate the stream mapping, turn the table's stream off, disable the
// schedule) is seen, not prevented: the stack's security events alarm on those calls
// (KeyStateOrPolicyChanged, BucketChanged, DigestMappingChanged, LedgerTableChanged,
// WatcherChanged: audit.go), DigestHeartbeat alarms when no digest was written for a heartbeat
// period, and a verifier finds the missing digests (a stale newest digest, a hole in the chain,
// rows not digested).

// Construct ids the boundary tests and the emulator-bound harnesses name.
const (
	digestKeyID    = awscall.DigestKey
	digestBucketID = awscall.DigestBucket
	digestDLQID    = "DigestFailureDlq"
)

// digestTimeout is the digest function's timeout: a batch costs a few HeadObject probes, one
// GetObject, one kms:Sign and one PutObject (more when another shard took the number first).
const digestTimeout = 2 * time.Minute

// digestBatchSize is the digest mapping's largest batch (DynamoDB Streams' maximum): the batching
// window, not the size, should end a batch, so one digest covers one interval. Lambda's 6 MB
// invocation payload still splits a busy interval into several digests, each signed and chained.
const digestBatchSize = 10000

// digestLagLimit is how far the digest function may fall behind the ledger stream before it
// alarms (DigestIteratorAge). DynamoDB Streams keeps records 24 hours: a record read later is
// lost, and its rows are a gap in the digests. One hour leaves 23 to repair the function.
const digestLagLimit = time.Hour

// digests is the digest key, bucket, function and the mapping's on-failure queue.
type digests struct {
	key    awskms.Key
	bucket awss3.Bucket
	fn     awslambda.Function
	dlq    awssqs.Queue
	// mapping is the stream mapping (its id is what UpdateEventSourceMapping names); tick the
	// heartbeat's schedule.
	mapping awslambda.CfnEventSourceMapping
	tick    awsevents.Rule
}

// digests defines the digest key, bucket and function with its stream trigger, and their outputs.
func (p *LedgerStackProps) digests(stack awscdk.Stack, st storage) digests {
	d := digests{key: p.digestKey(stack), bucket: p.digestBucket(stack)}
	fs := p.Functions
	fs.DigestBucket, fs.DigestKeyARN = *d.bucket.BucketName(), *d.key.KeyArn()
	fs.LedgerTable = *st.ledger.TableName() // a batch naming another table's stream is never signed
	env := map[string]*string{}
	for k, v := range fs.Environ(settings.Digest) {
		env[k] = jsii.String(v)
	}
	d.fn = p.function(stack, settings.Digest, env)
	role := d.fn.Role().RoleArn()

	// Only the digest role signs with the digest key.
	d.fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("kms:Sign"), Resources: jsii.Strings(*d.key.KeyArn()),
	}))
	onlyMac(d.key, "OnlyDigestSigns", "kms:Sign", []*string{role})

	// pkg/s3digest's writer: PutObject with If-None-Match and a COMPLIANCE retention (authorized
	// also as s3:PutObjectRetention), GetObject of the newest digest, HeadObject probes (as
	// s3:GetObject; without s3:ListBucket S3 answers a missing key with 403, not 404).
	d.fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("s3:PutObject", "s3:PutObjectRetention", "s3:GetObject"),
		Resources: jsii.Strings(*d.bucket.ArnForObjects(jsii.String("digests/*"))),
	}))
	d.fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("s3:ListBucket"), Resources: jsii.Strings(*d.bucket.BucketArn()),
	}))
	digestBucketPolicy(d.bucket, role)

	d.dlq = p.deadLetterQueue(stack, digestDLQID, dlqRetention, nil)
	cdknag.NagSuppressions_AddResourceSuppressions(d.dlq, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is itself a dead-letter queue: the on-failure destination of the digest " +
			"stream mapping (cdk-nag only recognises redrive-policy DLQs). It holds record metadata, is kept 14 days " +
			"and is alarmed on depth."),
	}}, jsii.Bool(true))
	d.mapping = p.digestTrigger(stack, st, d)
	d.tick = p.schedule(stack, settings.Digest, d.fn, p.digestTickRate())

	out := func(o outputs.Output, v *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(o.Name), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out(outputs.DigestBucket, d.bucket.BucketName(), "Signed digests of the ledger (Object Lock, COMPLIANCE): ledgerctl verify --digest-bucket")
	out(outputs.DigestKeyARN, d.key.KeyArn(), "The digests' signing key (ECC_NIST_P256): ledgerctl verify --digest-key")
	out(outputs.DigestFunction, d.fn.FunctionName(), "digest function")
	out(outputs.DigestFailureDLQURL, d.dlq.QueueUrl(), "Stream batches the digest function gave up on (metadata only)")
	return d
}

// digestKey defines the digest key. KMS rotates no asymmetric key. It is retained with the stack
// where the stage protects its evidence (deletionProtection): the digests it signed outlive the
// stack, and a verifier reads its public key (ledgerctl verify --digest-key, or the public key
// saved with an evidence copy). A throw-away stage deletes it with the ledger table.
func (p *LedgerStackProps) digestKey(stack awscdk.Stack) awskms.Key {
	key := awskms.NewKey(stack, jsii.String(digestKeyID), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " digest signing (the digest function signs the ledger's digests; anyone in the account verifies)"),
		KeySpec:           awskms.KeySpec_ECC_NIST_P256,
		KeyUsage:          awskms.KeyUsage_SIGN_VERIFY,
		EnableKeyRotation: jsii.Bool(false),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
		RemovalPolicy:     p.removalPolicy(),
	})
	// Any principal of the account may read the public key and verify, without an IAM grant.
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AccountVerifies"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:GetPublicKey", "kms:Verify", "kms:DescribeKey"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:CallerAccount": awscdk.Aws_ACCOUNT_ID()}},
	}), jsii.Bool(false))
	return key
}

// maxObjectLockDays is the longest default retention S3 Object Lock accepts (100 years). A longer
// HISTORY_RETENTION is not refused: the writer locks each digest with an explicit retain-until
// date, which the default does not bound.
const maxObjectLockDays = 36500

// digestRetentionDays is the digest bucket's default COMPLIANCE retention: HISTORY_RETENTION in
// days, rounded up, at most maxObjectLockDays. The writer also sets each digest's retain-until
// date explicitly (the latest retention of the rows it covers), so the default is the floor, not
// the rule.
func (p *LedgerStackProps) digestRetentionDays() float64 {
	return min(math.Ceil(p.Functions.Policy.Retention.Hours()/24), maxObjectLockDays)
}

// digestBucket defines the digest bucket.
//
// Encryption is SSE-S3, not a stack key: a digest holds dedupe keys (hashes), entry counts, chain
// heads and times, nothing secret, so a KMS key would add no confidentiality worth having, and it
// would add a way to destroy the evidence: whoever may disable the key or schedule its deletion
// (a key administrator) would make every digest unreadable, Object Lock notwithstanding.
// Nobody in the account can revoke SSE-S3.
func (p *LedgerStackProps) digestBucket(stack awscdk.Stack) awss3.Bucket {
	bucket := awss3.NewBucket(stack, jsii.String(digestBucketID), &awss3.BucketProps{
		Encryption:                 awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess:          awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:                 jsii.Bool(true),
		Versioned:                  jsii.Bool(true),
		ObjectLockEnabled:          jsii.Bool(true),
		ObjectLockDefaultRetention: awss3.ObjectLockRetention_Compliance(awscdk.Duration_Days(jsii.Number(p.digestRetentionDays()))),
		ObjectOwnership:            awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		// Locked objects cannot be deleted anyway; a stack deletion must not try.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	cdknag.NagSuppressions_AddResourceSuppressions(bucket, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-S1"),
		Reason: jsii.String("This bucket holds only the signed digests, written by the digest role alone (its policy " +
			"denies every other write and every delete, Object Lock keeps each version). Reads are S3 data events, which " +
			"an account trail records where S3 access must be audited; server access logs would need yet another " +
			"bucket, whose access would go unlogged in turn."),
	}}, jsii.Bool(true))
	return bucket
}

// digestObjectWrites are the object writes only the digest role may make: a new version of a
// digest, its retention and a legal hold (the digest role sets neither of the last two apart
// from the retention its PutObject carries).
var digestObjectWrites = []string{"s3:PutObject", "s3:PutObjectRetention", "s3:PutObjectLegalHold"}

// digestDeletes are the deletes nobody may make in the digest bucket. Object Lock already refuses
// to delete a locked version; a DeleteObject without a version id would still add a delete marker
// that hides the digest from readers of current versions (ledgerctl verify reads versions, but
// a stranger's tool may not), and BypassGovernanceRetention would matter if a digest were ever
// locked in GOVERNANCE mode.
var digestDeletes = []string{"s3:DeleteObject", "s3:DeleteObjectVersion", "s3:BypassGovernanceRetention"}

// digestBucketPolicy adds the bucket policy's Denies. The policy does not deny
// s3:PutBucketPolicy or s3:PutBucketObjectLockConfiguration: CloudFormation updates both with the
// deploying role, and the account root can always replace a bucket policy anyway. Neither can
// shorten a digest's lock (COMPLIANCE retention is per object version), and changing either is
// what the stack's security events alarm on.
func digestBucketPolicy(bucket awss3.Bucket, digestRole *string) {
	objects := jsii.Strings(*bucket.ArnForObjects(jsii.String("*")))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("NoDigestDeletes"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(digestDeletes...),
		Resources:  objects,
	}))
	bucket.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyDigestWrites"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings(digestObjectWrites...),
		Resources:  objects,
		Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": digestRole}},
	}))
}

// digestTrigger makes the digest function's stream mapping: every record (no filter), gathered
// for DIGEST_INTERVAL, one batch per shard at a time in order (ParallelizationFactor 1), never
// bisected (a digest covers its whole batch; a half batch would be a digest of fewer rows, not a
// retry of the same), retried until it succeeds or its records leave the stream (no retry or age
// limit: the 24 hours DynamoDB Streams keeps a record bound it), then sent to the on-failure
// queue, which alarms. TRIM_HORIZON: a mapping created after rows were written digests them.
//
// Declared without DynamoEventSource, as dispatch's is, so the stream read widens nothing: the
// role reads the stream's records through DynamoDB's use of the ledger key only.
func (p *LedgerStackProps) digestTrigger(stack awscdk.Stack, st storage, d digests) awslambda.CfnEventSourceMapping {
	fn, dlq := d.fn, d.dlq
	bucketLogicalID := *stack.GetLogicalId(d.bucket.Node().DefaultChild().(awscdk.CfnElement))
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"),
		Resources: jsii.Strings(*st.ledger.TableStreamArn()),
	}))
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("dynamodb:ListStreams"), Resources: jsii.Strings("*"),
	}))
	fn.AddToRolePolicy(ledgerKeyViaDynamoDB(st, "kms:Decrypt", "kms:DescribeKey"))
	cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"),
		Reason: jsii.String("dynamodb:ListStreams supports no resource-level permission, so the stream mapping's grant " +
			"gives it on *; the other stream actions are scoped to the ledger stream's ARN, and the digest objects to digests/* " +
			"(each digest is its own object, digests/<seq>.json)."),
		AppliesTo: &[]interface{}{"Resource::*", "Resource::<" + bucketLogicalID + ".Arn>/digests/*"},
	}}, jsii.Bool(true))
	m := fn.AddEventSourceMapping(jsii.String("DigestStream"), &awslambda.EventSourceMappingOptions{
		EventSourceArn:        st.ledger.TableStreamArn(),
		StartingPosition:      awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:             jsii.Number(digestBatchSize),
		MaxBatchingWindow:     seconds(p.Functions.DigestInterval),
		ParallelizationFactor: jsii.Number(1),
		BisectBatchOnError:    jsii.Bool(false),
		OnFailure:             &sendOnlyDLQ{queue: dlq},
	})
	// -1 is "no limit" (CloudFormation's default too); the L2 accepts only finite values. Written
	// out so the template says it.
	cfn := m.Node().DefaultChild().(awslambda.CfnEventSourceMapping)
	cfn.AddPropertyOverride(jsii.String("MaximumRetryAttempts"), -1)
	cfn.AddPropertyOverride(jsii.String("MaximumRecordAgeInSeconds"), -1)
	return cfn
}

// digestTickRate is the digest schedule's rate: digest.TickPeriod of DIGEST_INTERVAL, the interval
// in whole minutes, rounded up, at least a minute (EventBridge's shortest rate). The tick writes
// when the newest digest is older than half of it (digeststream.HeartbeatAge), and a verifier
// calls the newest stale past two of it and five minutes (digest.StaleAfter): one period, shared.
// With an interval of whole minutes (the default 5m) a digest is written every interval; a
// shorter one (the local stage's 5s) ticks every minute.
func (p *LedgerStackProps) digestTickRate() time.Duration {
	return digest.TickPeriod(p.Functions.DigestInterval)
}

// validateDigest checks the digest interval against what a batching window may be.
func (p *LedgerStackProps) validateDigest(bad func(string, ...any)) {
	if i := p.Functions.DigestInterval; i > 0 && i%time.Second != 0 {
		bad("%s %v: want whole seconds (a batching window)", varName(settings.DigestInterval), i)
	}
}

// digestHeartbeatPeriod is the DigestHeartbeat alarm's period: three digest intervals, in whole
// minutes (CloudWatch periods of a minute or more are multiples of 60 s), at least five minutes.
func (p *LedgerStackProps) digestHeartbeatPeriod() time.Duration {
	d := max(3*p.Functions.DigestInterval, alarmPeriod)
	return time.Duration(math.Ceil(d.Minutes())) * time.Minute
}

// digestPeriodText words the heartbeat's period for its description.
func (p *LedgerStackProps) digestPeriodText() string {
	return fmt.Sprintf("%v (three digest intervals of %v, at least 5m)", p.digestHeartbeatPeriod(), p.Functions.DigestInterval)
}
