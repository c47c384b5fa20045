// Command digest is the digest Lambda function of the reset-notification
// ledger: it reads every record of the ledger table's stream and writes
// signed digests to the digest bucket, and on its schedule's tick writes an
// empty one if the table was quiet. See internal/digeststream for what
// it does (it signs only what the stream confirms), docs/digests.md for the
// format and docs/configuration.md for its settings.
package main

import (
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/digeststream"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/wire/process"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/kmsdigest"
	"github.com/resetledger/resetledger/pkg/s3digest"
)

func main() {
	s, log, cfg := process.Start(settings.Digest)
	// Path-style addressing where an endpoint is configured (a local emulator).
	bucket := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
	h := &digeststream.Digest{
		Writer: &digest.Writer{
			Store: s3digest.New(bucket, s.DigestBucket), Signer: kmsdigest.New(kms.NewFromConfig(cfg), s.DigestKeyARN),
			Clock: time.Now, Retention: s.Policy.Retention,
		},
		// The stream is read back before a batch is signed; the table itself is never read.
		Streams: dynamodbstreams.NewFromConfig(cfg), Table: s.LedgerTable,
		Log: log, Metrics: &metrics.Emitter{W: os.Stdout}, Clock: time.Now,
		// A scheduled tick writes an empty digest when the table was quiet.
		Interval: s.DigestInterval,
	}
	lambda.Start(h.Invoke) // a stream batch, or the schedule's tick
}
