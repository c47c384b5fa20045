// Package pipelinetest runs the real Lambda handlers against the emulator the way
// their event sources would, for tests: SQS batches into claim (partial batch
// responses honored, redrive to a DLQ), ledger stream records read back from
// the table's stream and filtered like the dispatch event source, scheduled
// reconcile and expire runs, SES captured by the emulator and SMS through the
// webhook transport to a local provider. Every pipeline has its own tables,
// key and queues, and a clock tests can advance.
package pipelinetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/dictionaries"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/dispatchports"
	"github.com/resetledger/resetledger/internal/wire/eventsports"
	"github.com/resetledger/resetledger/internal/wire/reconcileports"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

// Buffer collects log lines and EMF records from every handler.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Pipeline runs the real handlers against the emulator the way the event
// sources would: SQS batches into claim, stream records (read back from the
// table's stream, filtered like the event source) into dispatch.
type Pipeline struct {
	t       *testing.T
	carried *carriedTags
	// proofs signs as the stack's senders do, with the pipeline's attempt-proof key.
	proofs           *attemptproof.KMS
	Ctx              context.Context
	Endpoint         string
	DB               *dynamodb.Client
	streams          *dynamodbstreams.Client
	SQS              *sqs.Client
	QueueURL, DLQURL string
	// DispatchQueueURL is the queue that hands deferred and re-driven rows
	// back to dispatch.
	DispatchQueueURL          string
	LedgerTable, ContentTable string
	BudgetTable               string
	// LimitsTable holds the send-limit counters and each subject's newest
	// challenge when Options.Limits is set; empty otherwise.
	LimitsTable   string
	dropStream    func(events.DynamoDBEventRecord) bool
	skipStreamRaw bool
	// Dropped counts the stream records DropStream made the pipeline lose.
	Dropped   int
	streamARN string
	iterators map[string]*string
	Out       *Buffer
	StreamRaw []string
	Claim     *handler.Claim
	Dispatch  *handler.Dispatch
	Reconcile *handler.Reconcile
	Expire    *handler.Expire
	Events    *handler.Events
	// EventsTopicARN, EventsQueueURL and EventsDLQURL are the provider-events
	// route (Options.ProviderEvents); ConfigurationSet the SES set.
	EventsTopicARN, EventsQueueURL, EventsDLQURL string
	ConfigurationSet                             string
	sns                                          *sns.Client
	Producer                                     *producer.Producer
	// Seals seals intents under IntentKeyARN, as the producer does: for
	// tests that build intent bodies of their own.
	Seals        *kmsseal.KMS
	IntentKeyARN string
	// FingerprintKeyARN is the destination-fingerprint key (dispatch).
	FingerprintKeyARN string
	sender            string
	base              int
	Provider          *webhooktest.Provider
	// WebhookSecret is the value of the signing secret the senders read
	// from Secrets Manager and the provider checks requests with.
	WebhookSecret []byte
	skewMu        sync.Mutex
	skew          time.Duration
	// Calls records the AWS calls the four functions make (internal/awscall),
	// written for infra's IAM coverage test when LEDGER_AWSCALL_DIR is set.
	Calls *awscall.Recorder
}

// Now is the functions' clock: real time plus the skew advance adds, so
// tests move past expiries and leases without sleeping.
func (p *Pipeline) Now() time.Time {
	p.skewMu.Lock()
	defer p.skewMu.Unlock()
	return time.Now().Add(p.skew)
}

// Advance moves the functions' clock forward by d.
func (p *Pipeline) Advance(d time.Duration) {
	p.skewMu.Lock()
	defer p.skewMu.Unlock()
	p.skew += d
}

// MaxReceives is the intents queue's maxReceiveCount unless
// Options.MaxReceives says otherwise.
const MaxReceives = 2

// Options configures a pipeline built by NewWithOptions. The zero value is
// what New builds.
type Options struct {
	// Env overrides function settings.
	Env map[string]string
	// Provider configures the local webhook provider.
	Provider webhooktest.ProviderConfig
	// FunctionAPIOptions are added to the SDK configuration of the four
	// functions only (never to the harness's own clients), e.g. middleware
	// that injects DynamoDB throttling or drops a transport's response.
	FunctionAPIOptions []func(*middleware.Stack) error
	// FunctionConfig, if set, edits the functions' SDK configuration (after
	// FunctionAPIOptions are added), e.g. to shorten the retry backoff.
	FunctionConfig func(*aws.Config)
	// WrapProvider, if set, wraps the webhook provider's HTTP handler, e.g.
	// to decide per idempotency key what the provider does.
	WrapProvider func(http.Handler) http.Handler
	// MaxReceives is the queue's maxReceiveCount; MaxReceives if zero.
	MaxReceives int
	// SweepLimit bounds the rows one reconcile or expire run handles per
	// state; 100 if zero.
	SweepLimit int
	// DropStream, if set, loses every dispatch-bound stream record it
	// returns true for, as a given-up or lost trigger would: the record is
	// read from the stream and never delivered.
	DropStream func(events.DynamoDBEventRecord) bool
	// SkipStreamRaw keeps no raw stream records in StreamRaw (so
	// AssertNoSecrets cannot sweep the stream): a long run would otherwise
	// hold every image of every row in memory.
	SkipStreamRaw bool
	// OutputTail, if positive, is how much of the functions' output (its
	// last bytes) a failed test logs; all of it if zero.
	OutputTail int
	// Limits builds the limits table and gives claim and dispatch its
	// LIMITS_TABLE, as the stack does: the send limits and supersession are
	// on, at their defaults unless Env sets them. Without it no limit
	// applies, as before the limits existed.
	Limits bool
	// ProviderEvents builds the provider-events route as the stack does:
	// an SES configuration set that the senders send with, an SNS topic, and
	// the events queue (raw message delivery, a DLQ after MaxReceives)
	// that PumpEvents delivers to the events handler. With it, SES declares
	// Capabilities.Events, so reconcile waits the settle period for events.
	ProviderEvents bool
}

// New builds the tables, key, queues and handlers of one isolated
// pipeline. SMS goes through the webhook transport to a local provider
// configured by prov; extraEnv overrides function settings.
func New(t *testing.T, extraEnv map[string]string, prov ...webhooktest.ProviderConfig) *Pipeline {
	t.Helper()
	o := Options{Env: extraEnv}
	if len(prov) > 0 {
		o.Provider = prov[0]
	}
	return NewWithOptions(t, o)
}

// NewWithOptions is New with the options of o.
func NewWithOptions(t *testing.T, o Options) *Pipeline {
	t.Helper()
	if o.MaxReceives == 0 {
		o.MaxReceives = MaxReceives
	}
	if o.SweepLimit == 0 {
		o.SweepLimit = 100
	}
	cfg := emulator.Config(t)
	p := &Pipeline{
		t: t, Ctx: context.Background(), Endpoint: *cfg.BaseEndpoint, DB: dynamodb.NewFromConfig(cfg),
		streams: dynamodbstreams.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg),
		LedgerTable: emulator.UniqueName(t, "ledger"), ContentTable: emulator.UniqueName(t, "content"),
		BudgetTable: emulator.UniqueName(t, "budget"), dropStream: o.DropStream, skipStreamRaw: o.SkipStreamRaw,
		iterators: map[string]*string{}, Out: &Buffer{}, base: rand.IntN(1_000_000) * 10, Calls: &awscall.Recorder{},
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out := p.Out.String()
		if o.OutputTail > 0 && len(out) > o.OutputTail {
			out = fmt.Sprintf("[first %d bytes cut]\n%s", len(out)-o.OutputTail, out[len(out)-o.OutputTail:])
		}
		t.Logf("function output:\n%s", out)
	})
	p.sender = "no-reply@" + emulator.UniqueName(t, "ledger") + ".example.test"
	if o.Limits {
		p.LimitsTable = emulator.UniqueName(t, "limits")
	}
	p.createTables()
	key := p.createKeyAndSender(cfg)
	proofKey := p.createMACKey(cfg, "attempt-proof")
	p.proofs = &attemptproof.KMS{Client: kms.NewFromConfig(cfg), KeyARN: *proofKey.Arn}
	fingerprintKey := p.createMACKey(cfg, "fingerprint")
	p.FingerprintKeyARN = *fingerprintKey.Arn
	intentKey := p.createMACKey(cfg, "intent")
	p.IntentKeyARN = *intentKey.Arn
	p.Seals = &kmsseal.KMS{Client: kms.NewFromConfig(cfg), KeyARN: p.IntentKeyARN}
	p.createQueues(o.MaxReceives)
	if o.ProviderEvents {
		p.createEventsRoute(cfg, o.MaxReceives)
	}
	// The webhook signing secret, in Secrets Manager as the stack keeps it:
	// the senders read it at start, the provider checks every request with it.
	secretARN, secret := emulator.Secret(t, secretsmanager.NewFromConfig(cfg), "webhook-secret")
	p.WebhookSecret = []byte(secret)
	if o.Provider.Secrets == nil {
		o.Provider.Secrets = webhooktest.Static(p.WebhookSecret)
	}
	p.Provider = webhooktest.NewProvider(o.Provider)
	var h http.Handler = p.Provider
	if o.WrapProvider != nil {
		h = o.WrapProvider(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	fnCfg := cfg.Copy()
	p.carried = &carriedTags{sent: map[string]providereventtest.Carried{}}
	fnCfg.APIOptions = append(append(append([]func(*middleware.Stack) error(nil), fnCfg.APIOptions...), p.carried.option), o.FunctionAPIOptions...)
	if o.FunctionConfig != nil {
		o.FunctionConfig(&fnCfg)
	}
	p.recordCalls(cfg.Region, *key.KeyId, map[string]string{
		*proofKey.KeyId: awscall.AttemptProofKey, *intentKey.KeyId: awscall.IntentKey, *fingerprintKey.KeyId: awscall.FingerprintKey,
	}, secretARN)
	p.startFunctions(fnCfg, o, *key.Arn, *proofKey.Arn, srv.URL+"/send", secretARN)
	p.Producer = &producer.Producer{
		Queue: p.SQS, QueueURL: p.QueueURL,
		// Sealed against the sample templates' dictionary, which the
		// stack holds (internal/dictionaries): envelope version 3.
		Sealer: &envelope.Sealer{KMS: kms.NewFromConfig(cfg), KeyID: *key.Arn, Dictionary: shapes.Dictionary()},
		Seals:  p.Seals,
	}
	return p
}

// createTables creates the ledger, content and budget tables and notes the ledger's stream.
func (p *Pipeline) createTables() {
	p.t.Helper()
	if err := dynamostore.CreateTables(p.Ctx, p.DB, p.LedgerTable, p.ContentTable); err != nil {
		p.t.Fatal(err)
	}
	if err := dynamostore.CreateBudgetTable(p.Ctx, p.DB, p.BudgetTable); err != nil {
		p.t.Fatal(err)
	}
	if p.LimitsTable != "" {
		if err := dynamostore.CreateLimitsTable(p.Ctx, p.DB, p.LimitsTable); err != nil {
			p.t.Fatal(err)
		}
	}
	desc, err := p.DB.DescribeTable(p.Ctx, &dynamodb.DescribeTableInput{TableName: &p.LedgerTable})
	if err != nil {
		p.t.Fatal(err)
	}
	p.streamARN = *desc.Table.LatestStreamArn
}

// createKeyAndSender creates the content key and the SES sender identity.
func (p *Pipeline) createKeyAndSender(cfg aws.Config) *kmstypes.KeyMetadata {
	p.t.Helper()
	key, err := kms.NewFromConfig(cfg).CreateKey(p.Ctx, &kms.CreateKeyInput{Description: aws.String("pipeline test content key")})
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := sesv2.NewFromConfig(cfg).CreateEmailIdentity(p.Ctx, &sesv2.CreateEmailIdentityInput{EmailIdentity: &p.sender}); err != nil {
		p.t.Fatal(err)
	}
	return key.KeyMetadata
}

// createMACKey creates an HMAC_256 key, as the stack's AttemptProofKey
// and IntentKey.
func (p *Pipeline) createMACKey(cfg aws.Config, what string) *kmstypes.KeyMetadata {
	p.t.Helper()
	key, err := kms.NewFromConfig(cfg).CreateKey(p.Ctx, &kms.CreateKeyInput{
		Description: aws.String("pipeline test " + what + " key"),
		KeySpec:     kmstypes.KeySpecHmac256, KeyUsage: kmstypes.KeyUsageTypeGenerateVerifyMac,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return key.KeyMetadata
}

// createQueues creates the intent queue, whose DLQ takes a message after maxReceives
// receives, and the dispatch queue.
func (p *Pipeline) createQueues(maxReceives int) {
	p.t.Helper()
	p.QueueURL, p.DLQURL = p.queueWithDLQ("intents", maxReceives)
	p.DispatchQueueURL = p.createQueue("dispatch", nil)
}

func (p *Pipeline) createQueue(name string, attrs map[string]string) string {
	p.t.Helper()
	q, err := p.SQS.CreateQueue(p.Ctx, &sqs.CreateQueueInput{QueueName: aws.String(emulator.UniqueName(p.t, name)), Attributes: attrs})
	if err != nil {
		p.t.Fatal(err)
	}
	return *q.QueueUrl
}

func (p *Pipeline) queueARN(url string) string {
	p.t.Helper()
	out, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		p.t.Fatal(err)
	}
	return out.Attributes["QueueArn"]
}

// queueWithDLQ creates the queue name and its DLQ, which takes a message after maxReceives receives.
func (p *Pipeline) queueWithDLQ(name string, maxReceives int) (queue, dlq string) {
	p.t.Helper()
	dlq = p.createQueue(name+"-dlq", nil)
	queue = p.createQueue(name, map[string]string{
		"RedrivePolicy": fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, p.queueARN(dlq), maxReceives),
	})
	return queue, dlq
}

// createEventsRoute creates the SES configuration set, the provider-events topic, and the
// events queue subscribed to it with raw message delivery, as the stack does.
func (p *Pipeline) createEventsRoute(cfg aws.Config, maxReceives int) {
	p.t.Helper()
	p.ConfigurationSet = emulator.UniqueName(p.t, "events")
	if _, err := sesv2.NewFromConfig(cfg).CreateConfigurationSet(p.Ctx, &sesv2.CreateConfigurationSetInput{ConfigurationSetName: &p.ConfigurationSet}); err != nil {
		p.t.Fatal(err)
	}
	p.sns = sns.NewFromConfig(cfg)
	topic, err := p.sns.CreateTopic(p.Ctx, &sns.CreateTopicInput{Name: aws.String(emulator.UniqueName(p.t, "provider-events"))})
	if err != nil {
		p.t.Fatal(err)
	}
	p.EventsTopicARN = *topic.TopicArn
	p.EventsQueueURL, p.EventsDLQURL = p.queueWithDLQ("provider-events", maxReceives)
	if _, err := p.sns.Subscribe(p.Ctx, &sns.SubscribeInput{
		TopicArn: topic.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String(p.queueARN(p.EventsQueueURL)),
		Attributes: map[string]string{"RawMessageDelivery": "true"},
	}); err != nil {
		p.t.Fatal(err)
	}
}

// PublishProviderEvent publishes one provider event record to the
// provider-events topic, as SES or End User Messaging SMS would.
func (p *Pipeline) PublishProviderEvent(record []byte) {
	p.t.Helper()
	if p.sns == nil {
		p.t.Fatal("PublishProviderEvent needs Options.ProviderEvents")
	}
	if _, err := p.sns.Publish(p.Ctx, &sns.PublishInput{TopicArn: &p.EventsTopicARN, Message: aws.String(string(record))}); err != nil {
		p.t.Fatal(err)
	}
}

// PumpEvents delivers the events queue to the events handler until it is
// empty, as the SQS event source would (see PumpQueue).
func (p *Pipeline) PumpEvents() (failed int) {
	return p.pumpQueue(p.EventsQueueURL, p.Events.Handle, 50)
}

// startFunctions builds the four handlers as their mains would, each with the environment the
// local stack deploys it with (Settings.Environ) and o.Env on top: email through SES, SMS
// through the webhook at webhookURL, which honors no Idempotency-Key. Their AWS calls are
// recorded and their clock is the pipeline's.
func (p *Pipeline) startFunctions(fnCfg aws.Config, o Options, keyARN, proofKeyARN, webhookURL, webhookSecretARN string) {
	p.t.Helper()
	fs := settings.Defaults()
	fs.LedgerTable, fs.ContentTable, fs.ContentKeyARN = p.LedgerTable, p.ContentTable, keyARN
	fs.AttemptProofKeyARN, fs.IntentKeyARN, fs.FingerprintKeyARN = proofKeyARN, p.IntentKeyARN, p.FingerprintKeyARN
	fs.BudgetTable, fs.DispatchQueueURL = p.BudgetTable, p.DispatchQueueURL
	fs.LimitsTable = p.LimitsTable
	fs.SubjectIndex = true // the ledger table is made with the stack's indexes (dynamostore.CreateTables)
	fs.Transports[ledger.SMS], fs.SESFrom = settings.TransportWebhook, p.sender
	fs.WebhookURL, fs.WebhookKeyWindow, fs.WebhookTimeout = webhookURL, 0, 2*time.Second
	fs.WebhookSecretARN = webhookSecretARN
	fs.SESConfigurationSet = p.ConfigurationSet
	if p.ConfigurationSet == "" {
		// No provider-events route: nothing can report a bounce, so a held
		// fallback channel is settled when the earlier one is accepted.
		fs.Policy.FallbackWait = 0
	}
	logger := slogJSON(p.Out)
	em := &metrics.Emitter{W: p.Out}
	cfgs := map[settings.Role]aws.Config{}
	// ports builds a function's ports as its main does, on this pipeline's
	// clock.
	ports := func(role settings.Role) assemble.Ports {
		env := fs.Environ(role)
		maps.Copy(env, o.Env)
		s, err := settings.Load(role, func(k string) string { return env[k] })
		if err != nil {
			p.t.Fatal(err)
		}
		roleCfg := fnCfg.Copy()
		roleCfg.APIOptions = append(slices.Clone(roleCfg.APIOptions), awscall.Middleware(string(role), emulator.Account, p.Calls.Sink()))
		ports, err := wire.Build(p.Ctx, roleCfg, s, logger, em, rolePorts[role])
		if err != nil {
			p.t.Fatal(err)
		}
		ports.Clock = p.Now
		cfgs[role] = roleCfg
		return *ports
	}
	deps := handler.Deps{Log: logger, Metrics: em}
	claimPorts := ports(settings.Claim)
	claimSettings, err := settings.Load(settings.Claim, func(k string) string {
		env := fs.Environ(settings.Claim)
		maps.Copy(env, o.Env)
		return env[k]
	})
	if err != nil {
		p.t.Fatal(err)
	}
	claimer, err := assemble.Claimer(claimPorts)
	p.wired(err)
	dispatcher, err := assemble.Dispatcher(ports(settings.Dispatch))
	p.wired(err)
	reconciler, err := assemble.Reconciler(ports(settings.Reconcile))
	p.wired(err)
	expirer, err := assemble.Expirer(ports(settings.Expire))
	p.wired(err)
	recorder, err := assemble.EventRecorder(ports(settings.Events))
	p.wired(err)
	dicts, err := dictionaries.Stack()
	if err != nil {
		p.t.Fatal(err)
	}
	p.Claim = &handler.Claim{Deps: deps, UseCase: claimer, Dictionaries: dicts,
		AcceptV1: claimSettings.AcceptIntentV1, AcceptV2: claimSettings.AcceptIntentV2,
		Seals: &kmsseal.KMS{Client: kms.NewFromConfig(cfgs[settings.Claim]), KeyARN: claimSettings.IntentKeyARN}}
	p.Dispatch = handler.NewDispatch(deps, dispatcher, dynamostore.Records{})
	p.Reconcile = &handler.Reconcile{Deps: deps, UseCase: reconciler, Limit: o.SweepLimit}
	p.Expire = &handler.Expire{Deps: deps, UseCase: expirer, Limit: o.SweepLimit}
	p.Events = &handler.Events{Deps: deps, UseCase: recorder}
}

// wired fails the test on a use case its constructor refused (a missing
// port, named).
func (p *Pipeline) wired(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatal(err)
	}
}

// rolePorts is each function's own ports, as its main wires them (expire
// has none).
var rolePorts = map[settings.Role]wire.Ports{
	settings.Claim: wire.ClaimPorts, settings.Dispatch: dispatchports.Ports, settings.Reconcile: reconcileports.Ports, settings.Events: eventsports.Ports,
}

// recordCalls writes the functions' AWS calls when the test ends, with the
// binding of this pipeline's tables, key and sender to the template's names.
func (p *Pipeline) recordCalls(region, keyID string, hmacKeys map[string]string, secretARN string) {
	_, domain, _ := strings.Cut(p.sender, "@")
	binding := map[string]string{
		p.LedgerTable: awscall.LedgerTable, p.ContentTable: awscall.ContentTable, keyID: awscall.ContentKey,
		p.sender: awscall.SESFromAddress, domain: awscall.SESIdentity,
		p.BudgetTable: awscall.BudgetTable, p.DispatchQueueURL[strings.LastIndex(p.DispatchQueueURL, "/")+1:]: awscall.DispatchQueue,
		secretARN[strings.LastIndex(secretARN, ":")+1:]: awscall.WebhookSecret,
	}
	maps.Copy(binding, hmacKeys)
	if p.ConfigurationSet != "" {
		binding[p.ConfigurationSet] = awscall.SESConfigurationSet
	}
	if p.LimitsTable != "" {
		binding[p.LimitsTable] = awscall.LimitsTable
	}
	name := emulator.UniqueName(p.t, strings.ReplaceAll(p.t.Name(), "/", "-"))
	p.t.Cleanup(func() {
		rec := awscall.Recording{Source: p.t.Name(), Region: region, Account: emulator.Account, Binding: binding, Calls: p.Calls.Calls()}
		if err := awscall.WriteRecording(name, rec); err != nil {
			p.t.Errorf("record AWS calls: %v", err)
		}
	})
}

// Notification returns a sample notification for challenge n of this run.
func (p *Pipeline) Notification(n int, ch ledger.Channel, ttl time.Duration) producer.Notification {
	i := p.base + n
	m := ledgertest.Message(i, ch)
	if ch == ledger.SMS {
		m.To = Phone(i)
	}
	return producer.Notification{
		ChallengeID: fmt.Sprintf("chal-%d", i), Channel: ch, Workflow: ledger.Workflow{Kind: ledger.Single},
		DestinationRef: fmt.Sprintf("acct-%d:%s", i, ch), ExpiresAt: time.Now().Add(ttl),
		TemplateID: "reset-" + string(ch), TemplateVersion: "3", PolicyVersion: "policy-1", Message: m,
	}
}

// ProductionNotification is Notification at production's lengths
// (internal/testkit/shapes): a UUID challenge id, a 64-character destination_ref,
// the 8 KB HTML email or the 160-character SMS.
func (p *Pipeline) ProductionNotification(n int, ch ledger.Channel, ttl time.Duration) producer.Notification {
	i := p.base + n
	m := shapes.Email(i)
	if ch == ledger.SMS {
		m = shapes.SMS(i, Phone(i))
	}
	in := shapes.Intent("challenge", i, ch, m, time.Now())
	return producer.Notification{
		ChallengeID: in.ChallengeID, Channel: ch, Workflow: in.Workflow,
		DestinationRef: in.DestinationRef, ExpiresAt: time.Now().Add(ttl),
		TemplateID: in.TemplateID, TemplateVersion: in.TemplateVersion, PolicyVersion: "policy-1", Message: m,
	}
}

// Phone returns a distinct US number for each i below 8,000,000 (and
// repeats after): +1 201, an exchange from 200 to 999 and a line number,
// each valid under the phone-number library dispatch places SMS with, so
// the SMS country limits (Options.Limits) let it through by default
// (ledgertest's +1 555 numbers are in no assigned range).
func Phone(i int) string {
	i %= 8_000_000
	return fmt.Sprintf("+1201%03d%04d", 200+i/10_000, i%10_000)
}

func (p *Pipeline) Publish(n producer.Notification) {
	p.t.Helper()
	if _, err := p.Producer.Publish(p.Ctx, n); err != nil {
		p.t.Fatal(err)
	}
}

func (p *Pipeline) PublishRaw(body string) {
	p.t.Helper()
	if _, err := p.SQS.SendMessage(p.Ctx, &sqs.SendMessageInput{QueueUrl: &p.QueueURL, MessageBody: &body}); err != nil {
		p.t.Fatal(err)
	}
}

// PumpQueue delivers the queue to the claim handler in batches of up to 10
// until it is empty, as the SQS event source would: successes are deleted,
// reported failures become visible again at once.
func (p *Pipeline) PumpQueue() (failed int) {
	return p.pump(50)
}

func (p *Pipeline) pump(maxRounds int) (failed int) {
	return p.pumpQueue(p.QueueURL, p.Claim.Handle, maxRounds)
}

// ReceiveVisibility is the visibility timeout of every receive, in seconds.
// It is short so that messages whose receive response the emulator dropped
// (the SDK retried the receive, so nobody holds them) come back quickly, as
// they would after a Lambda poller's visibility timeout.
const ReceiveVisibility = 10

// WaitInFlight waits, up to a little more than ReceiveVisibility, while the
// queue holds messages nobody is processing (in flight after a lost receive
// response), and reports whether any became visible again.
func (p *Pipeline) WaitInFlight() bool { return p.waitInFlight(p.QueueURL) }

func (p *Pipeline) waitInFlight(url string) bool {
	p.t.Helper()
	deadline := time.Now().Add((ReceiveVisibility + 5) * time.Second)
	for {
		out, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		}})
		if err != nil {
			p.t.Fatal(err)
		}
		if out.Attributes["ApproximateNumberOfMessages"] != "0" {
			return true
		}
		if out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0" || time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pumpQueue delivers the queue at url to handle in batches of up to 10 until it is empty:
// successes are deleted, reported failures become visible again at once.
func (p *Pipeline) pumpQueue(url string, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), maxRounds int) (failed int) {
	p.t.Helper()
	for rounds := 0; rounds < maxRounds; rounds++ {
		out, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, VisibilityTimeout: ReceiveVisibility,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			p.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			if p.waitInFlight(url) {
				continue
			}
			return failed
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, Attributes: m.Attributes})
		}
		resp, err := handle(p.Ctx, ev)
		if err != nil {
			p.t.Fatalf("handler failed the whole batch: %v", err)
		}
		failedIDs := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failedIDs[f.ItemIdentifier] = true
		}
		failed += len(failedIDs)
		for _, m := range out.Messages {
			if failedIDs[*m.MessageId] {
				_, err = p.SQS.ChangeMessageVisibility(p.Ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			} else {
				_, err = p.SQS.DeleteMessage(p.Ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
			}
			if err != nil {
				p.t.Fatal(err)
			}
		}
	}
	if maxRounds > 1 {
		p.t.Fatal("queue did not drain")
	}
	return failed
}

// ReadStream returns the new records of the ledger stream that pass the
// dispatch event source's filter, as a Lambda event, and keeps every raw
// record for the privacy sweep (unless Options.SkipStreamRaw).
func (p *Pipeline) ReadStream() events.DynamoDBEvent {
	p.t.Helper()
	ev, err := p.StreamRecords()
	if err != nil {
		p.t.Fatal(err)
	}
	return ev
}

// StreamRecords is ReadStream returning its error instead of failing the
// test, for callers outside the test's goroutine. Like ReadStream, it must
// be called from one goroutine at a time. After an error, the records read
// before it in this call are lost to the caller (as a given-up batch is).
func (p *Pipeline) StreamRecords() (events.DynamoDBEvent, error) {
	var ev events.DynamoDBEvent
	desc, err := p.streams.DescribeStream(p.Ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: &p.streamARN})
	if err != nil {
		return ev, err
	}
	for _, sh := range desc.StreamDescription.Shards {
		it, ok := p.iterators[*sh.ShardId]
		if !ok {
			got, err := p.streams.GetShardIterator(p.Ctx, &dynamodbstreams.GetShardIteratorInput{
				StreamArn: &p.streamARN, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon,
			})
			if err != nil {
				return ev, err
			}
			it = got.ShardIterator
		}
		for it != nil {
			out, err := p.streams.GetRecords(p.Ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			if err != nil {
				return ev, err
			}
			it = out.NextShardIterator
			p.iterators[*sh.ShardId] = it
			if len(out.Records) == 0 {
				break
			}
			for _, r := range out.Records {
				if !p.skipStreamRaw {
					raw, _ := json.Marshal(r)
					p.StreamRaw = append(p.StreamRaw, string(raw))
				}
				rec := events.DynamoDBEventRecord{
					EventName: string(r.EventName), EventSource: "aws:dynamodb",
					Change: events.DynamoDBStreamRecord{
						Keys: emulator.StreamImage(r.Dynamodb.Keys), NewImage: emulator.StreamImage(r.Dynamodb.NewImage), OldImage: emulator.StreamImage(r.Dynamodb.OldImage),
						SequenceNumber: *r.Dynamodb.SequenceNumber, StreamViewType: string(r.Dynamodb.StreamViewType),
					},
				}
				if !passesDispatchFilter(rec) {
					continue
				}
				if p.dropStream != nil && p.dropStream(rec) {
					p.Dropped++
					continue
				}
				ev.Records = append(ev.Records, rec)
			}
		}
	}
	return ev, nil
}

// PumpStream delivers new claims to the dispatch handler.
func (p *Pipeline) PumpStream() int {
	p.t.Helper()
	ev := p.ReadStream()
	if len(ev.Records) == 0 {
		return 0
	}
	resp, err := p.Dispatch.Handle(p.Ctx, ev)
	if err != nil || len(resp.BatchItemFailures) > 0 {
		p.t.Fatalf("dispatch: %v, failures %v", err, resp.BatchItemFailures)
	}
	return len(ev.Records)
}

// PumpDispatchQueue delivers the dispatch queue's visible messages (due
// wake-ups and re-drives; delayed ones stay hidden until their time) to
// dispatch in batches of up to 10, as its SQS event source would, until none
// is visible. It returns how many messages were handled.
func (p *Pipeline) PumpDispatchQueue() int {
	p.t.Helper()
	handled := 0
	for {
		out, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &p.DispatchQueueURL, MaxNumberOfMessages: 10, VisibilityTimeout: ReceiveVisibility,
		})
		if err != nil {
			p.t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return handled
		}
		var ev events.SQSEvent
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, EventSource: "aws:sqs"})
		}
		resp, err := p.Dispatch.HandleQueue(p.Ctx, ev)
		if err != nil || len(resp.BatchItemFailures) > 0 {
			p.t.Fatalf("dispatch (queue): %v, failures %v", err, resp.BatchItemFailures)
		}
		for _, m := range out.Messages {
			if _, err := p.SQS.DeleteMessage(p.Ctx, &sqs.DeleteMessageInput{QueueUrl: &p.DispatchQueueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				p.t.Fatal(err)
			}
		}
		handled += len(out.Messages)
	}
}

// passesDispatchFilter stands in for the dispatch event source's filter: it
// lets through the records whose change ledger.TriggersDispatch says starts
// a dispatch, the rule the filter is generated from (dynamostore.DispatchFilter).
func passesDispatchFilter(rec events.DynamoDBEventRecord) bool {
	from, to, ok := dynamostore.StreamChange(rec)
	return ok && ledger.TriggersDispatch(from, to)
}

// Row reads the ledger row of a notification.
func (p *Pipeline) Row(n producer.Notification) ledger.Entry {
	p.t.Helper()
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: n.Channel}.Key()
	e, err := dynamostore.New(p.DB, p.LedgerTable, dynamostore.DefaultShards).Get(p.Ctx, key)
	if err != nil {
		p.t.Fatal(err)
	}
	return e
}

// SESMessages counts the emails this pipeline's sender sent to address to,
// as the emulator captured them.
func (p *Pipeline) SESMessages(to string) int {
	p.t.Helper()
	msgs, err := p.SESCaptured()
	if err != nil {
		p.t.Fatal(err)
	}
	n := 0
	for _, m := range msgs {
		if slices.Contains(m.To, to) {
			n++
		}
	}
	return n
}

// SESMessage is one email the emulator captured.
type SESMessage struct {
	MessageID string   `json:"MessageId"`
	Source    string   `json:"Source"`
	To        []string `json:"To"`
	// Timestamp is the emulator's wall clock at capture, in Unix seconds.
	Timestamp float64 `json:"Timestamp"`
}

// SESCaptured returns every email the emulator captured from this
// pipeline's sender, in one request.
func (p *Pipeline) SESCaptured() ([]SESMessage, error) {
	resp, err := http.Get(p.Endpoint + "/_ministack/ses/messages")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var got struct {
		Messages map[string][]SESMessage `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return nil, fmt.Errorf("ses capture: %w", err)
	}
	var out []SESMessage
	for _, msgs := range got.Messages {
		for _, m := range msgs {
			if m.Source == p.sender {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// DLQDepth counts messages in the intent queue's dead-letter queue.
func (p *Pipeline) DLQDepth() int { return p.QueueDepth(p.DLQURL) }

// QueueDepth counts the messages visible in the queue at url (SQS's
// approximate count, exact on the emulator).
func (p *Pipeline) QueueDepth(url string) int {
	p.t.Helper()
	attr := sqstypes.QueueAttributeNameApproximateNumberOfMessages
	out, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{attr},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	n, err := strconv.Atoi(out.Attributes[string(attr)])
	if err != nil {
		p.t.Fatalf("queue depth of %s: %v", url, err)
	}
	return n
}

// ScanLedger returns every ledger item as JSON, for the privacy sweep.
func (p *Pipeline) ScanLedger() []string { return p.ScanTable(p.LedgerTable) }

// flatten writes every value of v as raw text (binary values as their raw
// bytes, not base64), so a search finds plaintext wherever it is.
func flatten(sb *strings.Builder, v ddbtypes.AttributeValue) {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		sb.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		sb.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		sb.Write(v.Value)
	case *ddbtypes.AttributeValueMemberSS:
		sb.WriteString(strings.Join(v.Value, " "))
	case *ddbtypes.AttributeValueMemberL:
		for _, x := range v.Value {
			flatten(sb, x)
		}
	case *ddbtypes.AttributeValueMemberM:
		for k, x := range v.Value {
			sb.WriteString(k + "=")
			flatten(sb, x)
		}
	}
	sb.WriteString(" ")
}

// ScanTable returns every item of table as raw text.
func (p *Pipeline) ScanTable(table string) []string {
	p.t.Helper()
	var items []string
	in := &dynamodb.ScanInput{TableName: &table}
	for {
		out, err := p.DB.Scan(p.Ctx, in)
		if err != nil {
			p.t.Fatal(err)
		}
		for _, it := range out.Items {
			var sb strings.Builder
			for k, v := range it {
				sb.WriteString(k + "=")
				flatten(&sb, v)
			}
			items = append(items, sb.String())
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// ReconcileNow runs one scheduled reconcile.
func (p *Pipeline) ReconcileNow() {
	p.t.Helper()
	if err := p.Reconcile.Handle(p.Ctx, events.CloudWatchEvent{}); err != nil {
		p.t.Fatal(err)
	}
}

// AssertNoSecrets proves that the fixtures' canary token, reset link,
// addresses and phone numbers appear in no ledger item, stream record, log
// line, metric or error string.
func (p *Pipeline) AssertNoSecrets() {
	p.t.Helper()
	var haystacks []string
	haystacks = append(haystacks, p.ScanLedger()...)
	haystacks = append(haystacks, p.StreamRaw...)
	haystacks = append(haystacks, p.Out.String())
	if len(p.StreamRaw) == 0 {
		p.t.Fatal("privacy sweep saw no stream records")
	}
	// The webhook signing secret too, under a name: printing it would leak it.
	needles := []string{ledgertest.Canary, "@example.test", "+1555", "reset?token", string(p.WebhookSecret)}
	for _, h := range haystacks {
		for i, s := range needles {
			if strings.Contains(h, s) {
				if i == len(needles)-1 {
					s = "the webhook signing secret"
				}
				p.t.Fatalf("secret %q leaked into: %.300s", s, h)
			}
		}
	}
}

// ExpireNow runs one scheduled expire sweep.
func (p *Pipeline) ExpireNow() {
	p.t.Helper()
	if err := p.Expire.Handle(p.Ctx, events.CloudWatchEvent{}); err != nil {
		p.t.Fatal(err)
	}
}
