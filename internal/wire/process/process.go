// Package process sets up what every function's process needs once: its
// settings, its logger and the SDK configuration. It links no SDK client,
// so a function that must not call DynamoDB (the digest writer) can use it;
// package wire builds the ledger's ports on top of it.
package process

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/sdkhttp"
	"github.com/resetledger/resetledger/internal/settings"
)

// Start loads the settings of role from the environment, the function's
// logger at their level, and the SDK configuration, once per process. It
// exits the process with a clear message on bad configuration.
func Start(role settings.Role) (settings.Settings, *slog.Logger, aws.Config) {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(role))
	s, err := settings.Load(role, os.Getenv)
	if err != nil {
		log.Error("configuration rejected", "error", err.Error())
		os.Exit(2)
	}
	log = slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.LogLevel})).With("function", string(role))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every request with a body of its own: see internal/sdkhttp for the race it closes.
	cfg, err := sdkhttp.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("aws configuration failed", "error", err.Error())
		os.Exit(2)
	}
	if s.LogAWSCalls {
		cfg.APIOptions = append(cfg.APIOptions, awscall.Middleware(string(role), "", awscall.LogSink(log)))
	}
	return s, log, cfg
}
