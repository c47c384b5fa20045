// Package wire builds what a function needs from its settings: the logger,
// the metrics emitter, the SDK configuration (loaded once per process), the
// ledger's ports and, from them, the function's one use case.
//
// The settings, logger and SDK configuration come from package
// wire/process, which the digest writer uses alone. Every function gets the
// ledger's tables (DynamoDB). Every other port is a role's own, built by
// that role's Ports in a package of its own: internal/wire/dispatchports,
// internal/wire/reconcileports and internal/wire/eventsports (with the hand-back ports
// both dispatch and reconcile take from internal/wire/handback), and
// ClaimPorts here; expire and the operator function (operate) need none. A
// function imports its role's package only, so
// its binary links the SDK clients of the calls its role may make and no
// other; infra's TestFunctionsLinkWhatTheirRolesMayCall compares the two.
// Keep it so: this package must not import an SDK client other than
// DynamoDB's.
package wire

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/webhooktransport"
	"github.com/resetledger/resetledger/internal/wire/process"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Function is everything a function's main needs: its settings, its use
// case U, and the logger and metrics emitter its handler works with.
type Function[U any] struct {
	Settings settings.Settings
	// Log and Metrics are the function's logger and metrics emitter, what
	// its handler's Deps hold.
	Log     *slog.Logger
	Metrics *metrics.Emitter
	UseCase U
	// Config is the process's SDK configuration.
	Config aws.Config
}

// Env is what a role's ports are built from.
type Env struct {
	// Config is the process's SDK configuration, loaded once.
	Config   aws.Config
	Settings settings.Settings
	// DynamoDB is the client of the ledger's tables, for ports on the same
	// service (the send-rate budget, the dispatch marks).
	DynamoDB *dynamodb.Client
	Log      *slog.Logger
}

// Ports adds a role's own ports to p, which holds the ledger's store and
// content store, its clock and policy, the send limits, and the transition
// counter. An error is a configuration the function must not start with.
type Ports func(ctx context.Context, env Env, p *assemble.Ports) error

// Boot loads the settings of role from the environment and the SDK
// configuration, builds the ports with ports (nil: the tables only), and
// from them the role's use case with build (its ledger constructor). It
// exits the process with a clear message on bad configuration, a missing
// port named: a function must not start half-configured.
func Boot[U any](role settings.Role, ports Ports, build func(assemble.Ports) (U, error)) Function[U] {
	s, log, cfg := process.Start(role)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	em := &metrics.Emitter{W: os.Stdout}
	var uc U
	p, err := Build(ctx, cfg, s, log, em, ports)
	if err == nil {
		uc, err = build(*p)
	}
	if err != nil {
		log.Error("wiring failed", "error", err.Error())
		os.Exit(2)
	}
	return Function[U]{Settings: s, Log: log, Metrics: em, UseCase: uc, Config: cfg}
}

// Transports builds a transport per channel the settings name, with the
// role's own build (dispatch's real transports, reconcile's stand-ins).
func Transports(s settings.Settings, build func(kind string) (ledger.Transport, error)) (map[ledger.Channel]ledger.Transport, error) {
	out := map[ledger.Channel]ledger.Transport{}
	for ch, kind := range s.Transports {
		tr, err := build(kind)
		if err != nil {
			return nil, fmt.Errorf("%s transport %s: %w", ch, kind, err)
		}
		out[ch] = tr
	}
	return out, nil
}

// Build builds the ledger's ports from cfg and s: the ledger's tables and
// the send limits, then ports (nil: none). Ports that read the clock read
// the returned Ports' Clock, so a test may set it afterwards. Every state
// change the use case stores is counted on em as the Transitions metric (by
// state and channel), whichever use case made it.
//
// With the limits table (claim and dispatch only), claim notes each
// subject's newest challenge (ClaimPorts), and dispatch counts (its ports
// add the counters) and alone gives counts back. The other functions have
// no limits table, so their limits are off and a row they end keeps its
// count ("too high, never too low", docs/design.md): their roles may not
// write the counters.
func Build(ctx context.Context, cfg aws.Config, s settings.Settings, log *slog.Logger, em *metrics.Emitter, ports Ports) (*assemble.Ports, error) {
	db := dynamodb.NewFromConfig(cfg)
	p := &assemble.Ports{
		Store:        dynamostore.New(db, s.LedgerTable, s.OpenIndexShards),
		Content:      dynamostore.NewContent(db, s.ContentTable),
		Clock:        time.Now,
		Policy:       s.Policy,
		OnTransition: func(e ledger.Entry) { countTransition(em, e) },
	}
	if s.LimitsTable != "" {
		p.Limits = s.Limits // dispatch's ports add the counters
	}
	if ports == nil {
		return p, nil
	}
	if err := ports(ctx, Env{Config: cfg, Settings: s, DynamoDB: db, Log: log}, p); err != nil {
		return nil, err
	}
	return p, nil
}

// ClaimPorts adds claim's one port of its own: with the limits table and
// supersession on, the newest challenge per subject, which claim notes.
func ClaimPorts(_ context.Context, env Env, p *assemble.Ports) error {
	if env.Settings.LimitsTable != "" && env.Settings.Limits.Supersede {
		p.Challenges = Challenges(env)
	}
	return nil
}

// Challenges is the newest challenge per subject, kept in the limits table.
func Challenges(env Env) ledger.Challenges {
	return dynamostore.NewLimits(env.DynamoDB, env.Settings.LimitsTable)
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
	if rule, ok := ledger.LimitRule(e); ok {
		_ = em.Count(metrics.LimitStops, map[string]string{metrics.DimRule: string(rule)}, 1)
	}
}

// Progress is the dispatch marks of dispatch and reconcile: how far dispatch
// has read the stream and the queue, kept in the budget table.
func Progress(env Env) ledger.Progress {
	return dynamostore.NewProgress(env.DynamoDB, env.Settings.BudgetTable)
}

// Webhook builds the webhook transport from s, signing every request with
// secret (internal/wire/webhooksecret reads it). It bounds each request with
// its own timeout, so every attempt is one the ledger records, and follows
// no redirect (webhooktransport.NoRedirects).
func Webhook(s settings.Settings, secret []byte) (ledger.Transport, error) {
	return webhooktransport.New(webhooktransport.NoRedirects(nil), webhooktransport.Config{
		URL: s.WebhookURL, Secret: secret, Timeout: s.WebhookTimeout, KeyWindow: s.WebhookKeyWindow, Lookup: s.WebhookLookup,
	})
}
