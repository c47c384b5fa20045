// Package wire builds what a function needs from its settings: the logger,
// the metrics emitter, the SDK clients (from one aws.Config, loaded once per
// process) and the ledger service with its adapters.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/handler"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/attemptproof"
	"github.com/resetledger/resetledger/pkg/dispatchqueue"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/sdkhttp"
	"github.com/resetledger/resetledger/pkg/sestransport"
	"github.com/resetledger/resetledger/pkg/smstransport"
	"github.com/resetledger/resetledger/pkg/webhook"
)

// Function is everything a function's main needs: its settings, and the
// service, logger and metrics emitter its handler works with.
type Function struct {
	Settings settings.Settings
	Deps     handler.Deps
}

// Boot loads the settings of role from the environment and the SDK
// configuration, and builds the service. It exits the process with a clear
// message on bad configuration: a function must not start half-configured.
func Boot(role settings.Role) Function {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(role))
	s, err := settings.Load(role, os.Getenv)
	if err != nil {
		log.Error("configuration rejected", "error", err.Error())
		os.Exit(2)
	}
	log = slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.LogLevel})).With("function", string(role))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every request with a body of its own: see pkg/sdkhttp for the race it closes.
	cfg, err := sdkhttp.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("aws configuration failed", "error", err.Error())
		os.Exit(2)
	}
	if s.LogAWSCalls {
		cfg.APIOptions = append(cfg.APIOptions, awscall.Middleware(string(role), "", awscall.LogSink(log)))
	}
	em := &metrics.Emitter{W: os.Stdout}
	svc, err := Service(cfg, s, role, em)
	if err != nil {
		log.Error("wiring failed", "error", err.Error())
		os.Exit(2)
	}
	return Function{Settings: s, Deps: handler.Deps{Svc: svc, Log: log, Metrics: em}}
}

// Service builds the ledger service for role from cfg and s. Every state
// change it stores is counted on em as the Transitions metric (by state and
// channel), whichever use case made it.
func Service(cfg aws.Config, s settings.Settings, role settings.Role, em *metrics.Emitter) (*ledger.Service, error) {
	db := dynamodb.NewFromConfig(cfg)
	svc := &ledger.Service{
		Store:        dynamostore.New(db, s.LedgerTable, dynamostore.DefaultShards),
		Content:      dynamostore.NewContent(db, s.ContentTable),
		Clock:        time.Now,
		Policy:       s.Policy,
		OnTransition: func(e ledger.Entry) { countTransition(em, e) },
	}
	switch role {
	case settings.Dispatch, settings.Reconcile, settings.Events:
		// Dispatch signs its sends' attempts and events verifies them (each
		// as its role allows: kms:GenerateMac, kms:VerifyMac); reconcile
		// retries only through transports that report no events, so it
		// never calls KMS for a proof.
		svc.Proofs = &attemptproof.KMS{Client: kms.NewFromConfig(cfg), KeyARN: s.AttemptProofKeyARN}
	}
	if role != settings.Dispatch && role != settings.Reconcile {
		return svc, nil
	}
	// How far dispatch has read the stream and the queue: dispatch moves the
	// marks, reconcile reads them before it hands rows back.
	svc.Progress = dynamostore.NewProgress(db, s.BudgetTable)
	// Delays are measured on the service's clock (a test may set it later).
	svc.Scheduler = dispatchqueue.New(sqs.NewFromConfig(cfg), s.DispatchQueueURL, func() time.Time { return svc.Clock() })
	if role == settings.Dispatch {
		rates, err := sendRates(cfg, s)
		if err != nil {
			return nil, err
		}
		svc.Budget = dynamostore.NewBudget(db, s.BudgetTable, rates)
	}
	svc.Opener = &envelope.Opener{KMS: kms.NewFromConfig(cfg), KeyARN: s.ContentKeyARN}
	svc.Transports = map[ledger.Channel]ledger.Transport{}
	for ch, kind := range s.Transports {
		tr, err := transport(cfg, s, kind)
		if err != nil {
			return nil, fmt.Errorf("%s transport %s: %w", ch, kind, err)
		}
		svc.Transports[ch] = tr
	}
	return svc, nil
}

// countTransition counts every stored state change by state and channel,
// and the two changes operations watch most: a retry after a not-sent
// answer, and a claimed message that expired without a send.
func countTransition(em *metrics.Emitter, e ledger.Entry) {
	ch := map[string]string{metrics.DimChannel: string(e.Identity.Channel)}
	_ = em.Count(metrics.Transitions, map[string]string{metrics.DimState: string(e.State), metrics.DimChannel: string(e.Identity.Channel)}, 1)
	switch from := e.Last().From; {
	case e.State == ledger.Dispatching && e.Attempts > 1:
		// Not every move from deferred: a row deferred for the send-rate
		// budget makes its first attempt from there.
		_ = em.Count(metrics.Retries, ch, 1)
	case e.State == ledger.Expired && from != ledger.None:
		_ = em.Count(metrics.ExpiredUnsent, ch, 1)
	}
}

// sendRates returns the send-rate budget per channel: the configured rate,
// or for email through SES without one, the account's MaxSendRate.
func sendRates(cfg aws.Config, s settings.Settings) (map[ledger.Channel]float64, error) {
	rates := maps.Clone(s.SendRates)
	if rates[ledger.Email] == 0 && s.Transports[ledger.Email] == settings.TransportSES {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		acct, err := sesv2.NewFromConfig(cfg).GetAccount(ctx, &sesv2.GetAccountInput{})
		if err != nil {
			return nil, fmt.Errorf("email send rate from SES GetAccount (set SEND_RATE_EMAIL to skip it): %w", err)
		}
		if acct.SendQuota == nil || acct.SendQuota.MaxSendRate <= 0 {
			return nil, errors.New("email send rate: SES GetAccount reports no MaxSendRate (set SEND_RATE_EMAIL)")
		}
		rates[ledger.Email] = acct.SendQuota.MaxSendRate
	}
	return rates, nil
}

// transport builds one channel's transport. The transports turn SDK retries
// off on every send and bound each webhook request with its own timeout, so
// every attempt is one the ledger records.
func transport(cfg aws.Config, s settings.Settings, kind string) (ledger.Transport, error) {
	switch kind {
	case settings.TransportSES:
		client := sesv2.NewFromConfig(cfg)
		return sestransport.New(client, sestransport.Config{FromEmailAddress: s.SESFrom, ConfigurationSetName: s.SESConfigurationSet})
	case settings.TransportSMS:
		client := pinpointsmsvoicev2.NewFromConfig(cfg)
		return smstransport.New(client, smstransport.Config{
			OriginationIdentity: s.SMSOrigination, ConfigurationSetName: s.SMSConfigurationSet, MaxPrice: s.SMSMaxPrice,
		})
	case settings.TransportWebhook:
		return webhook.New(&http.Client{}, webhook.Config{URL: s.WebhookURL, Timeout: s.WebhookTimeout, KeyWindow: s.WebhookKeyWindow, Lookup: s.WebhookLookup})
	}
	return nil, fmt.Errorf("unknown transport %q", kind)
}
