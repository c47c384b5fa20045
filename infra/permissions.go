package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Each function holds exactly the permissions its real calls need (no managed policies): what
// its event sources need (dispatch's stream read and on-failure queue, dispatch.go), and what
// grant adds. TestLeastPrivilege pins every grant; TestIAMCoverage (iam_test.go) checks
// them against the calls recorded runs made.

// grant gives the functions their permissions beyond their event sources', producers theirs, and
// makes decrypting content exclusive to the senders.
func (p *LedgerStackProps) grant(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, st storage, in intake, q dispatchQueues, ev providerEvents) {
	// DynamoDB calls KMS on the caller's behalf for tables under a customer-managed key.
	for _, name := range settings.Functions {
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"),
			Resources: jsii.Strings(*st.ledgerKey.KeyArn()),
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{
					"kms:ViaService": awscdk.Fn_Sub(jsii.String("dynamodb.${AWS::Region}.${AWS::URLSuffix}"), nil),
				},
			},
		}))
	}
	p.grantCalls(fns, st, in, q, ev)
	p.grantReclaim(fns[settings.Dispatch], st)
	p.grantSenders(stack, fns, st.contentKey, in, ev)
	grantProofs(fns, ev.proofKey)
	grantFingerprints(fns, st.fingerprintKey)
	p.grantIntents(fns, st.intentKey)
	grantEventsQueueKey(fns[settings.Events], ev.queueKey)
	p.suppressWildcards(fns[settings.Dispatch])
}

// grantCalls allows each function the DynamoDB and SQS calls it makes.
func (p *LedgerStackProps) grantCalls(fns map[settings.Role]awslambda.Function, st storage, in intake, q dispatchQueues, ev providerEvents) {
	ledgerArn, contentArn := st.ledger.TableArn(), st.content.TableArn()
	openIndexArn := st.ledgerIndexArn(dynamostore.IndexName)
	allow := func(name settings.Role, resources []*string, actions ...string) {
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(actions...),
			Resources: &resources,
		}))
	}
	// Claim's mapping is declared without CDK's binding: its poller's three calls are granted here.
	allow(settings.Claim, []*string{in.queue.QueueArn()}, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
	allow(settings.Claim, []*string{ledgerArn}, "dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	// DeleteItem: a claim that stored content and then lost the race to a concurrent claim of the
	// same identity with other content (or one that already ended) purges the blob no row will read.
	allow(settings.Claim, []*string{contentArn}, "dynamodb:PutItem", "dynamodb:DeleteItem")

	// BatchGetItem: a stream record's row, its content and (with supersession) its subject's
	// newest challenge, read in one request (ledger.FirstReads).
	allow(settings.Dispatch, []*string{ledgerArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(settings.Dispatch, []*string{contentArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:DeleteItem")
	allow(settings.Dispatch, []*string{st.budget.TableArn()}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	// Send limits: claim notes each subject's newest challenge (UpdateItem); dispatch reads it
	// (GetItem), counts a message in one TransactWriteItems of its counters' UpdateItems and its
	// admission marker's PutItem, and releases a count it no longer needs by reading the marker
	// (GetItem) and, in one TransactWriteItems, deleting it (DeleteItem) and taking one from each
	// counter it names (UpdateItem).
	allow(settings.Claim, []*string{st.limits.TableArn()}, "dynamodb:UpdateItem")
	allow(settings.Dispatch, []*string{st.limits.TableArn()}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:DeleteItem")
	// The mapping's poller, and dispatch re-scheduling a row (a deferred row's wake-up).
	allow(settings.Dispatch, []*string{q.queue.QueueArn()}, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes",
		"sqs:SendMessage")

	allow(settings.Reconcile, []*string{openIndexArn}, "dynamodb:Query")
	// Sweeps list the open index's keys, then read the rows in batches (Store.ListOpen).
	allow(settings.Reconcile, []*string{ledgerArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	// Reconcile purges the content of the rows it ends; it reads content only for a same-key
	// retry, which only the webhook allows (settings.OpensContent).
	allow(settings.Reconcile, []*string{contentArn}, "dynamodb:DeleteItem")
	if p.Functions.OpensContent(settings.Reconcile) {
		allow(settings.Reconcile, []*string{contentArn}, "dynamodb:GetItem")
	}
	// Re-drives: due rows no dispatch picked up within RedriveAfter go back to dispatch.
	allow(settings.Reconcile, []*string{q.queue.QueueArn()}, "sqs:SendMessage")
	// The dispatch marks (how far dispatch has read the stream and the queue) live in the budget
	// table: reconcile reads them before a re-drive pass and records the pass's hand-backs.
	allow(settings.Reconcile, []*string{st.budget.TableArn()}, "dynamodb:GetItem", "dynamodb:UpdateItem")

	allow(settings.Expire, []*string{openIndexArn}, "dynamodb:Query")
	allow(settings.Expire, []*string{ledgerArn}, "dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(settings.Expire, []*string{contentArn}, "dynamodb:DeleteItem")

	// The provider events queue's poller; events reads a row and appends the event to it (or
	// resolves it), and purges the sealed content of an unknown row an event resolves.
	allow(settings.Events, []*string{ev.queue.QueueArn()}, "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
	allow(settings.Events, []*string{ledgerArn}, "dynamodb:GetItem", "dynamodb:UpdateItem")
	allow(settings.Events, []*string{contentArn}, "dynamodb:DeleteItem")
}

// grantReclaim lets dispatch list a subject's newest rows (Store.ListByRef: the subject index's
// keys, then the rows) when an admission is refused, to supersede the older challenges that still
// hold counts (SUBJECT_INDEX). Without the subject index there is nothing to read.
func (p *LedgerStackProps) grantReclaim(dispatch awslambda.Function, st storage) {
	if p.SkipSubjectIndex {
		return
	}
	dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("dynamodb:Query"), Resources: &[]*string{st.ledgerIndexArn(dynamostore.SubjectIndex)},
	}))
	dispatch.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions: jsii.Strings("dynamodb:BatchGetItem"), Resources: &[]*string{st.ledger.TableArn()},
	}))
}

// grantSenders lets the senders that open content decrypt it, and dispatch send through the
// configured transports; a key-policy deny makes decrypting exclusive to them within the account.
// Only dispatch sends through SES and SMS: reconcile retries only through a transport that honors
// an idempotency key (the webhook), which needs no AWS permission, and opens content only then
// (settings.OpensContent): without a webhook it may not decrypt. Producers may seal content and
// send intents (grantProducers).
func (p *LedgerStackProps) grantSenders(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, contentKey awskms.Key, in intake, ev providerEvents) {
	senderRoles := []*string{}
	for _, name := range settings.Senders {
		if !p.Functions.OpensContent(name) {
			continue
		}
		contentKey.GrantDecrypt(fns[name])
		senderRoles = append(senderRoles, fns[name].Role().RoleArn())
	}
	p.grantSend(stack, fns[settings.Dispatch], ev)
	// Not only Decrypt: a principal allowed kms:ReEncrypt* could re-encrypt an envelope's data key
	// from this key to one of its own and decrypt it there, and one allowed kms:CreateGrant could
	// grant itself Decrypt. The Deny covers all three for every principal but the senders' roles,
	// the account root and every IAM policy included; the senders are granted Decrypt only.
	contentKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlySendersDecrypt"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:Decrypt", "kms:ReEncrypt*", "kms:CreateGrant"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": senderRoles},
		},
	}), jsii.Bool(false))
	p.grantProducers(stack, contentKey, in)
}

// grantProducers lets the producers (producerArns) seal content and send intents, and denies both
// to everyone else: an intent the claim function accepts is sent from the verified reset sender,
// so whoever can seal and send one can phish from the game's most trusted address.
//   - The content key allows each producer kms:GenerateDataKey (both producers, Go and Node.js,
//     seal with a data key from it and never call Encrypt) only under the envelope's encryption
//     context (kms:EncryptionContext:purpose, envelope.Purpose), and denies kms:GenerateDataKey*
//     and kms:Encrypt to every other principal. Nothing else in the stack seals with this key (the
//     tables use the ledger key), and ledgerctl send seals as its caller: with producerArns set, an
//     operator must be one of them to use it.
//   - The intent queue allows each producer sqs:SendMessage, the one call a producer makes (not
//     GrantSendMessages, which adds GetQueueAttributes and GetQueueUrl), and denies it to every
//     other principal.
//
// Without producerArns (only the local stage may leave it unset: Validate) nothing is denied, and
// the synth says what that leaves open.
func (p *LedgerStackProps) grantProducers(stack awscdk.Stack, contentKey awskms.Key, in intake) {
	if len(p.ProducerPrincipalArns) == 0 {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("resetledger:producerArnsUnset"), jsii.String(
			"producerArns is not set, so nothing limits who may publish intents: any principal in this account "+
				"whose IAM policies allow sqs:SendMessage on the intent queue and kms:GenerateDataKey on the content key "+
				"can seal and send an intent (any address, subject and body) that this stack sends from the verified "+
				"sender. Deploy with -c producerArns=<the account service's role ARNs> to deny everyone else."), nil)
		return
	}
	var producers []awsiam.IPrincipal
	var arns []*string
	for _, arn := range p.ProducerPrincipalArns {
		producers = append(producers, awsiam.NewArnPrincipal(jsii.String(arn)))
		arns = append(arns, jsii.String(arn))
	}
	notProducer := map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": arns}}
	contentKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("ProducersSeal"),
		Principals: &producers,
		Actions:    jsii.Strings("kms:GenerateDataKey"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]any{"StringEquals": map[string]any{"kms:EncryptionContext:purpose": envelope.Purpose}},
	}), jsii.Bool(false))
	contentKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyProducersSeal"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:GenerateDataKey*", "kms:Encrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &notProducer,
	}), jsii.Bool(false))
	in.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("ProducersSendIntents"),
		Principals: &producers,
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  jsii.Strings(*in.queue.QueueArn()),
	}))
	in.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyProducersSendIntents"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  jsii.Strings(*in.queue.QueueArn()),
		Conditions: &notProducer,
	}))
}

// grantProofs lets dispatch sign attempts (kms:GenerateMac: it MACs the tags or Context of every
// send through SES or SMS) and events verify them (kms:VerifyMac). Reconcile reads the key's ARN
// but never sends through SES or SMS, so it holds neither. The key policy denies GenerateMac to
// every principal but dispatch's role, the account root included, so no IAM policy can let
// anyone else make a proof that an event would carry as ours; and VerifyMac to every principal
// but the events role: nothing else checks a proof, and destination fingerprints made under this
// key before the fingerprint key existed (macs.go) stay in the limits table until their windows
// end, which a VerifyMac would let anyone test guessed addresses against.
func grantProofs(fns map[settings.Role]awslambda.Function, proofKey awskms.Key) {
	allow := func(name settings.Role, action string) {
		fns[name].AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings(action),
			Resources: jsii.Strings(*proofKey.KeyArn()),
		}))
	}
	allow(settings.Dispatch, "kms:GenerateMac")
	allow(settings.Events, "kms:VerifyMac")
	proofKey.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlySendersSign"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:GenerateMac"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": fns[settings.Dispatch].Role().RoleArn()},
		},
	}), jsii.Bool(false))
	onlyMac(proofKey, "OnlyEventsVerify", "kms:VerifyMac", []*string{fns[settings.Events].Role().RoleArn()})
}

// grantEventsQueueKey lets the events role decrypt the provider events queue (the SQS event
// source's poller receives with the function's role, and SQS decrypts with it: kms:ViaService is
// SQS), and denies kms:Decrypt on the queues' key to every other principal, so no identity of
// the account reads the events' addresses with sqs:ReceiveMessage alone. The Deny applies when
// both conditions hold:
//   - ArnNotEquals aws:PrincipalArn = the events role: false for the events role, true for any
//     other IAM principal (and for a service principal, which has no aws:PrincipalArn);
//   - BoolIfExists aws:PrincipalIsAWSService = false: false for SNS delivering to the queue (a
//     service principal, where the key is "true"), true for every IAM role and user (the key is
//     "false") and for a request without the key.
//
// So SNS is not denied (its own Allow, from the subscription, limits it to this topic), the events
// role is not denied, and every other role or user is, whatever its IAM policies allow.
func grantEventsQueueKey(events awslambda.Function, key awskms.Key) {
	events.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings("kms:Decrypt"),
		Resources: jsii.Strings(*key.KeyArn()),
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{
				"kms:ViaService": awscdk.Fn_Sub(jsii.String("sqs.${AWS::Region}.${AWS::URLSuffix}"), nil),
			},
		},
	}))
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyEventsReads"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"ArnNotEquals": map[string]interface{}{"aws:PrincipalArn": events.Role().RoleArn()},
			"BoolIfExists": map[string]interface{}{"aws:PrincipalIsAWSService": "false"},
		},
	}), jsii.Bool(false))
}

// grantSend lets fn call the configured transports: SES v2 SendEmail scoped to the sending
// identity and configuration set and from address, and End User Messaging SendTextMessage scoped
// to the origination identity. The Service Authorization Reference lists configuration-set among
// the resources ses:SendEmail is authorized on (a send naming a set is denied without it). For
// sms-voice:SendTextMessage it listed only phone-number, pool and sender-id in earlier versions;
// the IAM data cfn-lint 1.58 bundles (its Policies.json) lists configuration-set and
// protect-configuration too, so with an origination-identity ARN the grant also names the
// configuration set and the protect configuration every send names. Without one, the
// account-wide sms-voice resource pattern covers both.
func (p *LedgerStackProps) grantSend(stack awscdk.Stack, fn awslambda.Function, ev providerEvents) {
	if p.Functions.Transports[ledger.Email] == settings.TransportSES {
		resources := []*string{awscdk.Arn_Format(&awscdk.ArnComponents{
			Service: jsii.String("ses"), Resource: jsii.String("identity"),
			ResourceName: jsii.String(p.sesIdentity()), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
		}, stack)}
		if ev.sesSet != "" {
			resources = append(resources, configurationSetArn(stack, "ses", ev.sesSet))
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("ses:SendEmail"),
			Resources: &resources,
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"ses:FromAddress": p.Functions.SESFrom},
			},
		}))
		if p.readsSESSendRate() {
			// SES v2 GetAccount has no resource ARN: it is allowed on * or not at all.
			fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
				Actions:   jsii.Strings("ses:GetAccount"),
				Resources: jsii.Strings("*"),
			}))
		}
	}
	if p.Functions.Transports[ledger.SMS] == settings.TransportSMS {
		resource := p.Functions.SMSOrigination
		if !strings.HasPrefix(resource, "arn:") {
			resource = *awscdk.Arn_Format(&awscdk.ArnComponents{
				Service: jsii.String("sms-voice"), Resource: jsii.String("*"),
				ArnFormat: awscdk.ArnFormat_NO_RESOURCE_NAME,
			}, stack)
			cdknag.NagSuppressions_AddResourceSuppressions(fn.Role(), &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"),
				Reason: jsii.String("No origination-identity ARN is configured for this stage, so End User Messaging " +
					"picks the sender and sms-voice:SendTextMessage is scoped to this account and region only. " +
					"Pass smsOriginationIdentity=<phone-number/pool ARN> to scope it to one identity."),
				AppliesTo: &[]interface{}{"Resource::arn:<AWS::Partition>:sms-voice:<AWS::Region>:<AWS::AccountId>:*"},
			}}, jsii.Bool(true))
		}
		resources := []*string{jsii.String(resource)}
		if strings.HasPrefix(p.Functions.SMSOrigination, "arn:") {
			if ev.smsSet != "" {
				resources = append(resources, configurationSetArn(stack, "sms-voice", ev.smsSet))
			}
			if ev.smsProtect != "" {
				resources = append(resources, protectConfigurationArn(stack, ev.smsProtect))
			}
		}
		fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("sms-voice:SendTextMessage"),
			Resources: &resources,
		}))
	}
}

// sesIdentity is the SES identity that authorises the sender: SESIdentity, or the from
// address's domain.
func (p *LedgerStackProps) sesIdentity() string {
	if p.SESIdentity != "" {
		return p.SESIdentity
	}
	_, domain, _ := strings.Cut(p.Functions.SESFrom, "@")
	return domain
}

// readsSESSendRate reports whether dispatch reads the email budget from the SES account
// (ses:GetAccount's MaxSendRate): email goes through SES and no sendRateEmail is configured.
func (p *LedgerStackProps) readsSESSendRate() bool {
	return p.Functions.Transports[ledger.Email] == settings.TransportSES && p.Functions.SendRates[ledger.Email] == 0
}

// suppressWildcards records why dispatch holds actions without resource-level permissions, granted on *.
func (p *LedgerStackProps) suppressWildcards(dispatch awslambda.Function) {
	wildcard := "dynamodb:ListStreams supports no resource-level permission, so the stream mapping's " +
		"grant (dispatchTriggers) gives it on *; every other stream action is scoped to this table's stream ARN."
	if p.readsSESSendRate() {
		wildcard += " ses:GetAccount (SES v2) has no resource ARN either: dispatch reads the account's MaxSendRate " +
			"as the email send-rate budget at cold start, because no sendRateEmail is configured."
	}
	cdknag.NagSuppressions_AddResourceSuppressions(dispatch.Role(), &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String(wildcard), AppliesTo: &[]interface{}{"Resource::*"},
	}}, jsii.Bool(true))
}

// A granted permission that no recorded run exercises fails TestIAMCoverage
// (iam_test.go) unless it is listed here with the reason it is granted
// anyway. The recorded runs are the pipeline tests and the release gate
// (every call the functions' SDK clients make), the deployed end-to-end run
// (every call the deployed functions logged), and the calls AWS makes with a
// function's role on its behalf (logs, event source polling, DynamoDB's use
// of the table key), which the test derives from the template.
var unexercisedGrants = []struct {
	Function string // construct name prefix of the role: Claim, Dispatch, Reconcile, Expire
	Action   string // the granted action, as written in the policy
	// Resource, if set, limits the entry to grants whose resource names this construct
	// (e.g. BudgetTable), so it excuses nothing else the function holds with that action.
	Resource string
	Why      string
}{
	{"Claim", "dynamodb:DeleteItem", "ContentTable",
		"The purge of content a claim stored for an identity whose concurrent claim won with other content or had " +
			"already ended (claim.Claimer.Claim). Only two claims of one identity racing reach it; the release gate's " +
			"redeliveries do at random, and pkg/ledger's race tests pin the behaviour."},
	{"Dispatch", "sms-voice:SendTextMessage", "",
		"The emulator has no End User Messaging SMS service, so no run sends through it; the SMS adapter's own tests " +
			"drive the real SDK against a local HTTP server. Granted on the configured origination identity, or on " +
			"this account's sms-voice resources when none is configured."},
	{"Reconcile", "dynamodb:GetItem", "",
		"Read-back after a conditional write failed or lost its response (the ledger's write path (pkg/ledger/write.go) recognizes its own " +
			"landed write) and the lookup of a held fallback channel when a row ends (settleSuccessor). Both run only " +
			"under faults or in fallback workflows that end during a sweep; the full-size release gate (make gate) reaches them."},
	{"Digest", "s3:ListBucket", "",
		"Never called: the writer finds the newest digest with HeadObject probes (authorized as s3:GetObject), and S3 " +
			"answers a HeadObject of a missing key with 403 instead of 404 to a caller without s3:ListBucket on the bucket " +
			"(pkg/s3digest), so the probe could not tell a missing digest from a refused one."},
	{"Expire", "dynamodb:GetItem", "",
		"Read-back after a conditional write failed or lost its response (the ledger's write path (pkg/ledger/write.go)) and the lookup of a " +
			"held fallback channel when an expired row ends (settleSuccessor); reached under faults and by the full-size gate."},
}
