// Package handback builds the ports dispatch and reconcile share to hand
// entries back to dispatch: the dispatch queue (a deferred entry's wake-up,
// reconcile's re-drive) and the marks of how far dispatch has read the
// stream and that queue. It imports the SQS client, which both roles link.
package handback

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/resetledger/resetledger/internal/dispatchqueue/sqsqueue"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
)

// Ports sets p's Scheduler (the dispatch queue) and Progress (the marks,
// in the budget table). Delays are measured on p's clock, read at each
// call, so a test may set it afterwards.
func Ports(env wire.Env, p *assemble.Ports) {
	p.Progress = wire.Progress(env)
	p.Scheduler = sqsqueue.New(sqs.NewFromConfig(env.Config), env.Settings.DispatchQueueURL, func() time.Time { return p.Clock() })
}
