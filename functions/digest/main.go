// Command digest is the digest Lambda function of the reset-notification
// ledger: it reads every record of the ledger table's stream and writes
// signed digests to the digest bucket. See internal/digeststream for what
// it does, docs/digests.md for the format and docs/configuration.md for its
// settings.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/awscall"
	"github.com/resetledger/resetledger/internal/digeststream"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/kmsdigest"
	"github.com/resetledger/resetledger/pkg/s3digest"
	"github.com/resetledger/resetledger/pkg/sdkhttp"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("function", string(settings.Digest))
	s, err := settings.Load(settings.Digest, os.Getenv)
	if err != nil {
		log.Error("configuration rejected", "error", err.Error())
		os.Exit(2)
	}
	log = slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: s.LogLevel})).With("function", string(settings.Digest))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg, err := sdkhttp.LoadDefaultConfig(ctx)
	if err != nil {
		log.Error("aws configuration failed", "error", err.Error())
		os.Exit(2)
	}
	if s.LogAWSCalls {
		cfg.APIOptions = append(cfg.APIOptions, awscall.Middleware(string(settings.Digest), "", awscall.LogSink(log)))
	}
	// Path-style addressing where an endpoint is configured (a local emulator).
	bucket := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
	h := &digeststream.Digest{
		Writer: &digest.Writer{
			Store: s3digest.New(bucket, s.DigestBucket), Signer: kmsdigest.New(kms.NewFromConfig(cfg), s.DigestKeyARN),
			Clock: time.Now, Retention: s.Policy.Retention,
		},
		Log: log, Metrics: &metrics.Emitter{W: os.Stdout}, Clock: time.Now,
	}
	lambda.Start(h.Handle)
}
