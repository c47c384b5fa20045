package pipelinetest

import (
	"context"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/providerevent/providereventtest"
	"github.com/resetledger/resetledger/internal/sestransport"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// carriedTags keeps the message tags of every SendEmail the functions made,
// whatever its outcome: what SES would copy into its events about the
// message. The emulator's SES keeps no tags, so the pipeline reads them off
// the request, as SES would receive it.
type carriedTags struct {
	mu   sync.Mutex
	sent map[string]providereventtest.Carried // dedupe key -> the newest send's tags
}

// option records the tags of each SendEmail before it is sent.
func (c *carriedTags) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("pipeline-carried-tags", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		if send, ok := in.Parameters.(*sesv2.SendEmailInput); ok {
			var got providereventtest.Carried
			for _, tag := range send.EmailTags {
				switch v := aws.ToString(tag.Value); aws.ToString(tag.Name) {
				case sestransport.TagIdempotencyKey:
					got.Key = v
				case sestransport.TagAttempt:
					got.Attempt, _ = strconv.Atoi(v)
				case sestransport.TagAttemptProof:
					got.Proof = v
				}
			}
			c.mu.Lock()
			c.sent[got.Key] = got
			c.mu.Unlock()
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.Before)
}

// Sign returns what a send of attempt of the row with dedupe key key on ch
// would have carried, proof included, signed with the pipeline's
// attempt-proof key as dispatch signs: for events about sends the test did
// not make through SES (a row that is gone, another channel).
func (p *Pipeline) Sign(key string, ch ledger.Channel, attempt int) providereventtest.Carried {
	p.t.Helper()
	proof, err := p.proofs.Sign(p.Ctx, ledger.AttemptRef{Key: key, Channel: ch, Attempt: attempt})
	if err != nil {
		p.t.Fatal(err)
	}
	return providereventtest.Carried{Key: key, Attempt: attempt, Proof: proof}
}

// Carried returns what the newest SES send for the row with dedupe key key
// carried (its key, attempt and attempt proof), for building the events SES
// would publish about it. It fails the test if no send was made for key.
func (p *Pipeline) Carried(key string) providereventtest.Carried {
	p.t.Helper()
	p.carried.mu.Lock()
	defer p.carried.mu.Unlock()
	c, ok := p.carried.sent[key]
	if !ok {
		p.t.Fatalf("no SES send carried the key %s", key)
	}
	return c
}
