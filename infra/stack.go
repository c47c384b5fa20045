package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
)

// NewLedgerStack defines the whole ledger for one stage, one part of it per file: the keys and
// tables (storage.go), the intent queue and claim's trigger (intake.go), dispatch's queues and
// triggers (dispatch.go), the provider events route with its configuration sets (events.go), the five functions (functions.go), the signed digests (digest.go), the sweeps' schedules (sweeps.go),
// the least-privilege permissions (permissions.go), the alarms and the dashboard
// (observability.go), and the outputs.
func NewLedgerStack(scope constructs.Construct, id string, props *LedgerStackProps) (awscdk.Stack, error) {
	if props == nil {
		return nil, errors.New("infra: nil LedgerStackProps")
	}
	if err := props.Validate(); err != nil {
		return nil, fmt.Errorf("infra: invalid LedgerStackProps: %w", err)
	}
	p := props
	stack := awscdk.NewStack(scope, jsii.String(id), &p.StackProps)

	st := p.storage(stack)
	in := p.intake(stack)
	q := p.dispatchQueues(stack)
	ev := p.providerEvents(stack)
	whSecret := p.webhookSecret(stack) // the webhook's signing secret, with a webhook transport (webhook.go)
	fns := p.functions(stack, st, q.queue, ev, whSecret)
	p.claimTrigger(stack, fns[settings.Claim], in)
	p.dispatchTriggers(stack, fns[settings.Dispatch], st.ledger, q)
	p.eventsTrigger(stack, fns[settings.Events], ev)
	schedules := p.sweeps(stack, fns)
	p.grant(stack, fns, st, in, q, ev)
	grantWebhookSecret(fns, whSecret)
	dg := p.digests(stack, st)               // the signed digests: key, bucket, function and its trigger (digest.go)
	schedules[settings.Digest] = dg.tick     // the digest function's heartbeat tick (digest.go)
	p.invokers(stack, fns, dg.fn, schedules) // only its trigger invokes a function (invokers.go)
	queueBoundaries(fns, in, q, dg)          // who may receive from and send to the queues (queuepolicies.go)
	p.operator(stack, fns, st, dg)           // the operator role and the table's write Deny (operator.go)
	p.auditTrail(stack, st)                  // the ledger table's write data events, when a trail is named (audit.go)
	p.backup(stack, st)                      // daily backups for the retention period (backup.go)
	if !p.SkipObservability {
		if err := p.observability(stack, observed{fns: fns, intake: in, dispatch: q, events: ev, ledger: st.ledger, digests: dg, stage: p.Prefix}); err != nil {
			return nil, err
		}
	}
	stackOutputs(stack, fns, st, in, q, ev)
	if whSecret != nil {
		awscdk.NewCfnOutput(stack, jsii.String(outputs.WebhookSecretARN.Name), &awscdk.CfnOutputProps{
			Value: secretARN(whSecret), Description: jsii.String("The webhook signing secret; the receiver holds the same value"),
		})
	}
	suppressLinterFindings(stack) // cfn-lint and checkov findings that do not apply, with reasons (linters.go)
	return stack, nil
}

// Validate reports every invalid field at once: the functions' settings as the functions would
// check them at start, then what each part of the stack needs of its fields.
func (p *LedgerStackProps) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }

	if p.Prefix == "" {
		bad("Prefix is empty")
	}
	if p.Architecture == nil {
		bad("Architecture is not set")
	}
	if p.AssetDir == "" {
		bad("AssetDir is empty")
	} else {
		for _, name := range append(slices.Clone(settings.Functions), settings.Operate, settings.Digest) {
			f := filepath.Join(p.AssetDir, string(name), "bootstrap")
			if st, err := os.Stat(f); err != nil || st.IsDir() {
				bad("missing %s: build the functions first (make build)", f)
			}
		}
	}
	for _, pr := range p.Functions.Check(settings.Functions...) {
		bad("%s", contextName(pr))
	}
	p.validateIntake(bad)
	p.validateDispatch(bad)
	p.validateEvents(bad)
	p.validateCountries(bad)
	p.validateSweeps(bad)
	p.validateObservability(bad)
	p.validateAudit(bad)
	p.validateSpend(bad)
	p.validateBackup(bad)
	p.validateDigest(bad)
	return errors.Join(errs...)
}

// stackOutputs writes what producers, operators (ledgerctl) and the end-to-end test read from a
// deployed stage, under the names package outputs gives them.
func stackOutputs(stack awscdk.Stack, fns map[settings.Role]awslambda.Function, st storage, in intake, q dispatchQueues, ev providerEvents) {
	out := func(o outputs.Output, v *string, desc string) {
		awscdk.NewCfnOutput(stack, jsii.String(o.Name), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out(outputs.IntentQueueURL, in.queue.QueueUrl(), "Producers send notification intents here")
	out(outputs.IntentQueueARN, in.queue.QueueArn(), "Intent queue ARN (for producer IAM policies)")
	out(outputs.IntentDLQURL, in.dlq.QueueUrl(), "Poison and repeatedly failing intents")
	out(outputs.StreamFailureDLQURL, q.streamDLQ.QueueUrl(), "Stream batches dispatch gave up on (metadata only)")
	out(outputs.DispatchQueueURL, q.queue.QueueUrl(), "Wake-ups and re-drives of rows for dispatch")
	out(outputs.DispatchQueueDLQURL, q.dlq.QueueUrl(), "Dispatch-queue messages dispatch kept failing on")
	out(outputs.ProviderEventsTopicARN, ev.topic.TopicArn(), "SES and End User Messaging SMS publish their events here")
	out(outputs.ProviderEventsQueueURL, ev.queue.QueueUrl(), "Provider events waiting for the events function")
	out(outputs.ProviderEventsDLQURL, ev.dlq.QueueUrl(), "Provider events the events function kept failing on")
	if ev.sesSet != "" {
		out(outputs.SESConfigurationSet, jsii.String(ev.sesSet), "SES configuration set the senders name (its events reach the topic)")
	}
	if ev.smsSet != "" {
		out(outputs.SMSConfigurationSet, jsii.String(ev.smsSet), "End User Messaging SMS configuration set the senders name")
	}
	out(outputs.LedgerTable, st.ledger.TableName(), "Delivery-claim ledger")
	out(outputs.ContentTable, st.content.TableName(), "Sealed content store")
	out(outputs.BudgetTable, st.budget.TableName(), "Send-rate budget per channel")
	out(outputs.LimitsTable, st.limits.TableName(), "Send-limit counters and each subject's newest challenge")
	out(outputs.ContentKeyARN, st.contentKey.KeyArn(), "Producers encrypt notification content with this key")
	out(outputs.AttemptProofKeyARN, ev.proofKey.KeyArn(), "Dispatch signs each send's attempt with this HMAC key; the events function verifies provider events with it")
	out(outputs.IntentKeyARN, st.intentKey.KeyArn(), "Producers bind each intent's fields with this HMAC key (kms:GenerateMac); the claim function verifies them")
	out(outputs.FingerprintKeyARN, st.fingerprintKey.KeyArn(), "Dispatch MACs destinations into the limits table's keys with this HMAC key; nobody may verify with it")
	for _, name := range settings.Functions {
		out(outputs.Function(name), fns[name].FunctionName(), string(name)+" function")
	}
}
