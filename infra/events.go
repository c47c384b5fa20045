package main

import (
	"regexp"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsses"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssmsvoice"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The providers' delivery events reach the events function on one route:
//
//	SES configuration set ─┐
//	                        ├─► ProviderEventsTopic (SNS, KMS) ─► ProviderEventsQueue (SQS, KMS) ─► events
//	SMS configuration set ─┘                                          └─► ProviderEventsDlq (KMS)
//
// SES event publishing and End User Messaging SMS both publish to SNS (neither publishes to SQS
// directly), and a queue in front of the function gives the events a redrive DLQ, batching and a
// concurrency cap. The subscription delivers raw messages: the queue holds the provider's own
// event JSON (the handler also accepts the SNS envelope). The local emulator drives the same
// route: tests publish events in the providers' format to the topic.

// providerEventsVisibility is the provider events queue's visibility timeout: six times the events
// timeout, as AWS recommends for an SQS event source.
var providerEventsVisibility = 6 * functionTimeouts[settings.Events]

// providerEventsRetention outlasts a long outage of the events function: SMS carriers may report
// up to 72 hours after a send, so a day-long outage must not drop events.
const providerEventsRetention = 4 * 24 * time.Hour

// providerEventsDLQRetention is as short as operations allow, because what the DLQ keeps is
// personal data (recipient addresses, phone numbers, headers, diagnostic codes). SQS keeps a
// standard queue message's original enqueue timestamp when it moves to the DLQ, so the DLQ's
// retention counts from the event's arrival on ProviderEventsQueue and must outlast that queue's
// retention, or an event dead-lettered late in its four days would expire almost at once. One day
// more keeps even that event, and the ProviderEventsDlqDepth alarm it raises, for a day: long
// enough for the on-call to see the count and match it to the events function's error log
// (which is where the failure is explained). Most events are dead-lettered minutes after arrival
// (maxReceiveCount receives) and stay about five days. Nothing longer would serve anyone: only the
// events role can decrypt them and only the topic may send to the queue (OnlyTopicDelivers), so
// no operator reads or redrives them; the rows they name are settled as rows no event reached.
const providerEventsDLQRetention = providerEventsRetention + 24*time.Hour

// The events each configuration set publishes to the topic. SES: every outcome of a send that
// says something about the message (opens, clicks and subscriptions do not). SMS: every text event.
var (
	sesEventTypes = []awsses.EmailSendingEvent{
		awsses.EmailSendingEvent_SEND, awsses.EmailSendingEvent_REJECT, awsses.EmailSendingEvent_BOUNCE,
		awsses.EmailSendingEvent_COMPLAINT, awsses.EmailSendingEvent_DELIVERY, awsses.EmailSendingEvent_DELIVERY_DELAY,
		awsses.EmailSendingEvent_RENDERING_FAILURE,
	}
	smsEventTypes = []string{"TEXT_ALL"}
)

// configurationSetName is what SES and End User Messaging SMS accept as a configuration set's name.
var configurationSetName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// providerEvents is the route of the providers' events into the events function.
type providerEvents struct {
	key awskms.Key
	// queueKey encrypts the queue and its DLQ: they hold the providers' event JSON, with recipient
	// addresses and phone numbers. Only SNS delivering for the topic and the events role may use it.
	queueKey awskms.Key
	// proofKey is the KMS HMAC key of the attempt proofs: dispatch MACs every send it makes
	// through SES or End User Messaging SMS (the proof rides in the message tags or the SMS
	// Context, and comes back in the provider's events), and events verifies the proof before an
	// event may resolve or release a row. Only dispatch may generate a MAC (permissions.go).
	proofKey   awskms.Key
	topic      awssns.Topic
	queue, dlq awssqs.Queue
	// sesSet and smsSet are the configuration sets' names the senders pass ("" when the channel
	// does not go through SES or End User Messaging SMS); each publishes to topic, unless smsSet
	// was named from context (the operator adds its destination).
	sesSet, smsSet string
	// smsProtect is the protect configuration every SMS names, "" for none: the stack's own,
	// created from the SMS country allow-list, or the one context names (countries.go).
	smsProtect string
}

// providerEvents defines the topic with its key, the queue with its DLQ and the subscription, and
// the configuration sets: the stack's own, or the ones context names, each with an event
// destination to the topic (for an SMS set named from context, the operator adds it).
func (p *LedgerStackProps) providerEvents(stack awscdk.Stack) providerEvents {
	ev := providerEvents{proofKey: p.attemptProofKey(stack)}
	account := map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": stack.Account()}}
	ev.key = awskms.NewKey(stack, jsii.String("ProviderEventsKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " provider events topic at rest (SES and End User Messaging SMS publish)"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
	})
	// A service publishing to an encrypted topic needs the topic's key: SNS asks KMS for a data
	// key on the publisher's behalf.
	ev.key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("ProvidersPublishEncrypted"),
		Principals: &[]awsiam.IPrincipal{sesService(), smsService()},
		Actions:    jsii.Strings("kms:GenerateDataKey*", "kms:Decrypt"),
		Resources:  jsii.Strings("*"),
		Conditions: &account,
	}), jsii.Bool(false))
	ev.topic = awssns.NewTopic(stack, jsii.String("ProviderEventsTopic"), &awssns.TopicProps{
		DisplayName: jsii.String(p.Prefix + " provider events"),
		MasterKey:   ev.key,
		EnforceSSL:  jsii.Bool(true),
	})
	ev.queueKey = awskms.NewKey(stack, jsii.String("ProviderEventsQueueKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " provider events queue and DLQ at rest (providers' event JSON: personal data)"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     p.removalPolicy(),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
	})
	ev.dlq = p.deadLetterQueue(stack, "ProviderEventsDlq", providerEventsDLQRetention, ev.queueKey)
	ev.queue = p.workQueue(stack, "ProviderEventsQueue", providerEventsRetention, providerEventsVisibility, ev.dlq, p.MaxReceiveCount, ev.queueKey)
	// The binding adds the queue policies that let this topic (aws:SourceArn) send to the queue,
	// and to the DLQ: an event SNS cannot deliver to the queue (a queue policy or the queue
	// broken) lands in the same DLQ as the ones the function kept failing on, not nowhere. For the
	// queues' key it adds the statement SNS needs to deliver to them (kms:GenerateDataKey and
	// kms:Decrypt for sns.amazonaws.com; Amazon SQS Developer Guide, "Key management": an AWS
	// service that sends to an encrypted queue needs both in the key policy), limited to this topic
	// by aws:SourceArn (cdk.json's @aws-cdk/aws-sns-subscriptions:restrictSqsDescryption). Who
	// else may use the key: grantEventsQueueKey (permissions.go).
	ev.topic.AddSubscription(awssnssubscriptions.NewSqsSubscription(ev.queue, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    ev.dlq,
	}))
	if p.Functions.Transports[ledger.Email] == settings.TransportSES {
		ev.sesSet = p.sesEvents(stack, ev.topic)
	}
	if p.Functions.Transports[ledger.SMS] == settings.TransportSMS {
		ev.smsSet = p.smsEvents(stack, ev.topic)
		ev.smsProtect = p.smsProtection(stack)
	}
	ev.onlyOurs(stack)
	return ev
}

// onlyOurs makes the route accept only what this stage's providers say. An event on the queue
// resolves or releases the row it names, so whoever could put one there could turn a message that
// was never sent into accepted. Explicit Denies, which no IAM policy in the account can outweigh:
//   - the queue and its DLQ refuse sqs:SendMessage from anything but this topic's delivery
//     (aws:SourceArn, which AWS sets for the SNS service and no caller can);
//   - the topic refuses sns:Publish unless SES publishes for this stage's configuration set or End
//     User Messaging SMS for its set (aws:SourceArn: the set's ARN); with neither (both channels
//     on the webhook) nothing may publish. A direct publish, from any principal, carries no
//     aws:SourceArn and is denied.
//
// What leaves the route is closed as well (onlyOurSubscription, noPurgeOfEvidence).
//
// The local emulator enforces no IAM: tests that publish provider events to the topic still run.
func (ev providerEvents) onlyOurs(stack awscdk.Stack) {
	ev.onlyOurSubscription()
	ev.noPurgeOfEvidence()
	for _, q := range []awssqs.Queue{ev.queue, ev.dlq} {
		q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyTopicDelivers"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  jsii.Strings(*q.QueueArn()),
			Conditions: &map[string]any{"ArnNotEquals": map[string]any{"aws:SourceArn": ev.topic.TopicArn()}},
		}))
	}
	var publishers []*string
	if ev.sesSet != "" {
		publishers = append(publishers, configurationSetArn(stack, "ses", ev.sesSet))
	}
	if ev.smsSet != "" {
		publishers = append(publishers, configurationSetArn(stack, "sms-voice", ev.smsSet))
	}
	deny := &awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyProvidersPublish"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*ev.topic.TopicArn()),
	}
	if len(publishers) > 0 {
		deny.Conditions = &map[string]any{"ArnNotEquals": map[string]any{"aws:SourceArn": publishers}}
	}
	ev.topic.AddToResourcePolicy(awsiam.NewPolicyStatement(deny))
}

// onlyOurSubscription keeps the topic's events on the route. The queue's key keeps the events from
// every reader but the events role (OnlyEventsReads), but SNS decrypts a topic's messages itself
// to deliver them: whoever could subscribe an endpoint of their own (a queue, an HTTPS URL, an
// e-mail address) would receive every provider event, recipient addresses and phone numbers
// included, past that key. So the topic denies sns:Subscribe to every principal unless the
// subscription is the stack's own: SQS, to ProviderEventsQueue.
//
// SNS's condition keys for Subscribe are sns:Endpoint (the URL, e-mail address or ARN the request
// subscribes) and sns:Protocol, both strings (Amazon SNS Developer Guide, "Amazon SNS API
// permissions: Actions and resources reference", service-specific keys: "Use with string
// conditions"). They are two statements, not one: the conditions of one statement must all hold
// for it to apply, so a single Deny on "endpoint is not the queue AND protocol is not sqs" would
// let any sqs subscription to another queue through. OnlyOurSubscription compares the endpoint
// case-sensitively (StringNotEquals), as a queue's name is case-sensitive: another case names
// another queue. OnlySqsSubscription refuses the queue's ARN over any other protocol; SNS itself
// refuses an SQS ARN as another protocol's endpoint, and the statement makes the policy say so
// instead of resting on that validation.
//
// CloudFormation creates the stack's own subscription as the deploying principal, with the
// queue's ARN and sqs: neither Deny applies. sns:Unsubscribe and sns:SetSubscriptionAttributes
// cannot be named in a topic policy (they are not topic actions); the ProviderEventsTopicChanged
// rule (audit.go) tells on-call when they are called on this topic's subscriptions.
func (ev providerEvents) onlyOurSubscription() {
	for _, s := range []struct {
		sid, key string
		ours     *string
	}{
		{"OnlyOurSubscription", "sns:Endpoint", ev.queue.QueueArn()},
		{"OnlySqsSubscription", "sns:Protocol", jsii.String("sqs")},
	} {
		ev.topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String(s.sid),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("sns:Subscribe"),
			Resources:  jsii.Strings(*ev.topic.TopicArn()),
			Conditions: &map[string]any{"StringNotEquals": map[string]any{s.key: s.ours}},
		}))
	}
}

// noPurgeOfEvidence denies sqs:PurgeQueue on ProviderEventsQueue to every principal (Sid
// NoPurgeOfEvidence). The queue holds evidence in flight: a purge would drop every event not yet
// recorded, and the rows they name would end as rows no event reached. No one needs it: events
// are idempotent, a bad one is refused and acknowledged, and the events function drains the queue.
// Short of changing or deleting the queue itself (sqs:SetQueueAttributes, sqs:DeleteQueue: the
// QueueChanged rule, audit.go), a purge is the one way left to destroy them in place: receiving
// them to delete one by one needs kms:Decrypt on the queue's key, which OnlyEventsReads denies to
// all but the events role.
//
// The intent queue denies every purge too (NoPurgeOfIntents, queuepolicies.go): only the claim
// role may receive, delete or hide its intents (OnlyClaimReceivesIntents), so a purge was the one
// way left to drop resets not yet claimed. The DLQs are not given this Deny, deliberately: the
// runbook purges the stream-failure, dispatch-queue and provider-events DLQs once a failure is
// understood (README, Alarms and what to do; poison intents are fixed at the producer), and what
// a DLQ keeps is not what the ledger's evidence rests on: re-drives and sweeps settle the rows
// without it, the functions' logs name each failure, and ProviderEventsDlq can be neither read
// (OnlyEventsReads) nor redriven (OnlyTopicDelivers); purging it is also how its personal data
// goes before its retention ends.
//
// Every purge of any of the stack's queues, and every attempt, reaches on-call through the
// QueueChanged rule (audit.go).
func (ev providerEvents) noPurgeOfEvidence() {
	ev.queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("NoPurgeOfEvidence"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:PurgeQueue"),
		Resources:  jsii.Strings(*ev.queue.QueueArn()),
	}))
}

// attemptProofKey defines the HMAC_256 key of the attempt proofs. KMS rotates no HMAC key
// (EnableKeyRotation supports symmetric encryption keys only), so rotation is off; the 30-day
// deletion window is KMS's longest, because scheduling its deletion would make every later event
// of an earlier send unprovable.
func (p *LedgerStackProps) attemptProofKey(stack awscdk.Stack) awskms.Key {
	return awskms.NewKey(stack, jsii.String("AttemptProofKey"), &awskms.KeyProps{
		Description:       jsii.String(p.Prefix + " attempt proofs (dispatch MACs each send, events verifies provider events)"),
		KeySpec:           awskms.KeySpec_HMAC_256,
		KeyUsage:          awskms.KeyUsage_GENERATE_VERIFY_MAC,
		EnableKeyRotation: jsii.Bool(false),
		PendingWindow:     awscdk.Duration_Days(jsii.Number(keyDeletionWindowDays)),
		RemovalPolicy:     p.removalPolicy(),
	})
}

// sesService and smsService are the service principals that publish provider events.
func sesService() awsiam.IPrincipal {
	return awsiam.NewServicePrincipal(jsii.String("ses.amazonaws.com"), nil)
}
func smsService() awsiam.IPrincipal {
	return awsiam.NewServicePrincipal(jsii.String("sms-voice.amazonaws.com"), nil)
}

// sesEvents adds an event destination to the topic to the SES configuration set, which the stack
// creates unless sesConfigurationSet names one, and returns the set's name. The topic policy lets
// SES publish for this set only (aws:SourceArn) and from this account.
func (p *LedgerStackProps) sesEvents(stack awscdk.Stack, topic awssns.Topic) string {
	var set awsses.IConfigurationSet
	name := p.sesConfigurationSet()
	if p.Functions.SESConfigurationSet != "" {
		set = awsses.ConfigurationSet_FromConfigurationSetName(stack, jsii.String("SesConfigurationSet"), jsii.String(name))
	} else {
		// Reputation metrics per set; the account-level suppression list applies (the set does
		// not override it), so SES itself refuses addresses that hard-bounced or complained.
		set = awsses.NewConfigurationSet(stack, jsii.String("SesConfigurationSet"), &awsses.ConfigurationSetProps{
			ConfigurationSetName: jsii.String(name),
			ReputationMetrics:    jsii.Bool(true),
			SendingEnabled:       jsii.Bool(true),
		})
	}
	awsses.NewConfigurationSetEventDestination(stack, jsii.String("SesEventDestination"), &awsses.ConfigurationSetEventDestinationProps{
		ConfigurationSet:                     set,
		ConfigurationSetEventDestinationName: jsii.String("provider-events"),
		Destination:                          awsses.EventDestination_SnsTopic(topic),
		Events:                               &sesEventTypes,
		Enabled:                              jsii.Bool(true),
	})
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("SesPublishes"),
		Principals: &[]awsiam.IPrincipal{sesService()},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*topic.TopicArn()),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"aws:SourceAccount": stack.Account(),
			"aws:SourceArn":     configurationSetArn(stack, "ses", name),
		}},
	}))
	return name
}

// sesConfigurationSet is the SES configuration set's name: the one context names, or the stack's own.
func (p *LedgerStackProps) sesConfigurationSet() string {
	if p.Functions.SESConfigurationSet != "" {
		return p.Functions.SESConfigurationSet
	}
	return p.Prefix + "-events"
}

// smsEvents creates the End User Messaging SMS configuration set with an event destination to
// the topic for every text event, unless smsConfigurationSet names an existing set: then the
// stack creates nothing for SMS events (CloudFormation has no separate event-destination resource
// for SMS; the operator adds one to the topic, see the README) and the topic only lets
// End User Messaging publish for that set. Returns the set's name.
func (p *LedgerStackProps) smsEvents(stack awscdk.Stack, topic awssns.Topic) string {
	name := p.Functions.SMSConfigurationSet
	if name == "" {
		name = p.Prefix + "-events"
		awssmsvoice.NewCfnConfigurationSet(stack, jsii.String("SmsConfigurationSet"), &awssmsvoice.CfnConfigurationSetProps{
			ConfigurationSetName: jsii.String(name),
			EventDestinations: &[]any{&awssmsvoice.CfnConfigurationSet_EventDestinationProperty{
				EventDestinationName: jsii.String("provider-events"),
				Enabled:              jsii.Bool(true),
				MatchingEventTypes:   jsii.Strings(smsEventTypes...),
				SnsDestination:       &awssmsvoice.CfnConfigurationSet_SnsDestinationProperty{TopicArn: topic.TopicArn()},
			}},
		})
	}
	// End User Messaging SMS publishes an event with aws:SourceArn set to the configuration set's ARN,
	// arn:<partition>:sms-voice:<region>:<account>:configuration-set/<name>: the topic access policy
	// its user guide gives ("Amazon SNS access policy", sms-voice/latest/userguide/
	// configuration-sets-sns-creating-role.html) conditions sns:Publish on exactly that ARN.
	topic.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("SmsPublishes"),
		Principals: &[]awsiam.IPrincipal{smsService()},
		Actions:    jsii.Strings("sns:Publish"),
		Resources:  jsii.Strings(*topic.TopicArn()),
		Conditions: &map[string]any{"StringEquals": map[string]any{
			"aws:SourceAccount": stack.Account(),
			"aws:SourceArn":     configurationSetArn(stack, "sms-voice", name),
		}},
	}))
	return name
}

// configurationSetArn is the ARN of the configuration set name of service ("ses" or "sms-voice")
// in this stack's account and region.
func configurationSetArn(stack awscdk.Stack, service, name string) *string {
	return awscdk.Arn_Format(&awscdk.ArnComponents{
		Service: jsii.String(service), Resource: jsii.String("configuration-set"),
		ResourceName: jsii.String(name), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	}, stack)
}

// eventsTrigger makes the provider events queue the events function's event source.
func (p *LedgerStackProps) eventsTrigger(stack awscdk.Stack, events awslambda.Function, ev providerEvents) {
	queueTrigger(stack, "ProviderEventsSource", events, ev.queue, p.EventsMaxConcurrency)
}

// validateEvents checks what the provider events route needs of the props.
func (p *LedgerStackProps) validateEvents(bad func(string, ...any)) {
	if n := p.EventsMaxConcurrency; n < 2 || n > 1000 {
		bad("EventsMaxConcurrency %d: want 2..1000", n)
	}
	for _, v := range []*settings.Var{settings.SESConfigurationSet, settings.SMSConfigurationSet} {
		if name := v.Text(p.Functions); name != "" && !configurationSetName.MatchString(name) {
			bad("%s %q: want 1..64 letters, digits, dashes and underscores", varName(v), name)
		}
	}
}
