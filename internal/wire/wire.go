// Package wire builds what a function needs from its settings: the logger,
// the metrics emitter, the SDK clients (from one aws.Config, loaded once per
// process) and the ledger service with its adapters.
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/pinpointsmsvoicev2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/dynamostore"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/sestransport"
	"github.com/resetledger/resetledger/pkg/smstransport"
	"github.com/resetledger/resetledger/pkg/webhook"
)

// Function is everything a function's main needs.
type Function struct {
	Settings settings.Settings
	Log      *slog.Logger
	Metrics  *metrics.Emitter
	Service  *ledger.Service
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
	cfg, err := config.LoadDefaultConfig(ctx)
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
	return Function{Settings: s, Log: log, Metrics: em, Service: svc}
}

// Service builds the ledger service for role from cfg and s. Every state
// change it stores is counted on em as the Transitions metric (by state and
// channel), whichever use case made it.
func Service(cfg aws.Config, s settings.Settings, role settings.Role, em *metrics.Emitter) (*ledger.Service, error) {
	db := dynamodb.NewFromConfig(cfg)
	svc := &ledger.Service{
		Store:   dynamostore.New(db, s.LedgerTable, dynamostore.DefaultShards),
		Content: dynamostore.NewContent(db, s.ContentTable),
		Clock:   time.Now,
		Policy:  s.Policy,
		OnTransition: func(e ledger.Entry) {
			_ = em.Count(metrics.Transitions, map[string]string{"State": string(e.State), "Channel": string(e.Identity.Channel)}, 1)
		},
	}
	if role != settings.Dispatch && role != settings.Reconcile {
		return svc, nil
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

// transport builds one channel's transport. The transports turn SDK retries
// off on every send and bound each webhook request with its own timeout, so
// every attempt is one the ledger records.
func transport(cfg aws.Config, s settings.Settings, kind string) (ledger.Transport, error) {
	switch kind {
	case "ses":
		client := sesv2.NewFromConfig(cfg)
		return sestransport.New(client, sestransport.Config{FromEmailAddress: s.SESFrom, ConfigurationSetName: s.SESConfigurationSet})
	case "sms":
		client := pinpointsmsvoicev2.NewFromConfig(cfg)
		return smstransport.New(client, smstransport.Config{OriginationIdentity: s.SMSOrigination})
	case "webhook":
		return webhook.New(&http.Client{}, webhook.Config{URL: s.WebhookURL, Timeout: s.WebhookTimeout, KeyWindow: s.WebhookKeyWindow, Lookup: s.WebhookLookup})
	}
	return nil, fmt.Errorf("unknown transport %q", kind)
}
