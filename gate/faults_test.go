package gate

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/resetledger/resetledger/internal/sestransport"
)

// fault is what the transport does with one identity's first send.
type fault string

const (
	faultNone    fault = ""
	faultReject  fault = "provider rejects"
	faultAckLost fault = "accepted, ack lost"
	faultSlow    fault = "accepted, answer slower than the timeout"
	faultKill    fault = "killed between acceptance and outcome write"
)

// injector holds every injected fault and counts what it did. The functions'
// SDK clients carry its middleware; the harness's own clients do not.
type injector struct {
	now       func() time.Time // the functions' clock
	ddbRate   float64
	slowFor   time.Duration
	mu        sync.Mutex
	rng       *rand.Rand
	transport map[string]fault // dedupe key -> fault of its first send
	killed    map[string]bool  // kill already applied
	sends     map[string][]time.Time
	counts    map[string]int
}

func newInjector(seed uint64, ddbRate float64, slowFor time.Duration) *injector {
	return &injector{
		ddbRate: ddbRate, slowFor: slowFor, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		transport: map[string]fault{}, killed: map[string]bool{}, sends: map[string][]time.Time{}, counts: map[string]int{},
	}
}

func (f *injector) count(what string) {
	f.mu.Lock()
	f.counts[what]++
	f.mu.Unlock()
}

func (f *injector) roll() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64()
}

func (f *injector) faultOf(key string) fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.transport[key]
}

func (f *injector) noteSend(key string) {
	f.mu.Lock()
	f.sends[key] = append(f.sends[key], f.now())
	f.mu.Unlock()
}

// sendTimes returns the functions' clock at every send that reached a
// provider, by dedupe key.
func (f *injector) sendTimes() map[string][]time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]time.Time, len(f.sends))
	for k, v := range f.sends {
		out[k] = append([]time.Time(nil), v...)
	}
	return out
}

func (f *injector) summary() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k := range f.counts {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// apiOptions returns the middleware added to the functions' SDK clients.
func (f *injector) apiOptions() []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{
		func(s *middleware.Stack) error {
			// Deserialize step: inside the SDK's retry loop, so these look to
			// the retryer like the service's own answers.
			return s.Deserialize.Add(middleware.DeserializeMiddlewareFunc("gate-ddb-service-faults", f.ddbServiceFaults), middleware.After)
		},
		func(s *middleware.Stack) error {
			// Initialize step: outside the retry loop, so the function sees
			// the error (retries exhausted, or a crash).
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("gate-function-faults", f.functionFaults), middleware.Before)
		},
	}
}

func serverError(status int, code string) error {
	return &awshttp.ResponseError{
		RequestID: "gate-injected",
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status, Header: http.Header{}}},
			Err:      &smithy.GenericAPIError{Code: code, Message: "injected by the release gate"},
		},
	}
}

// ddbServiceFaults makes a fraction of DynamoDB requests answer as a
// throttled or failing service would; the SDK retries them.
func (f *injector) ddbServiceFaults(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	if awsmiddleware.GetServiceID(ctx) != "DynamoDB" {
		return next.HandleDeserialize(ctx, in)
	}
	r := f.roll()
	switch {
	case r < f.ddbRate*0.4:
		f.count("ddb: throttled (ProvisionedThroughputExceeded), SDK retried")
		return middleware.DeserializeOutput{}, middleware.Metadata{}, serverError(400, "ProvisionedThroughputExceededException")
	case r < f.ddbRate*0.6:
		f.count("ddb: 500 before the write, SDK retried")
		return middleware.DeserializeOutput{}, middleware.Metadata{}, serverError(500, "InternalServerError")
	case r < f.ddbRate*0.8:
		out, md, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		f.count("ddb: 500 after the write landed, SDK retried")
		return middleware.DeserializeOutput{}, md, serverError(500, "InternalServerError")
	}
	return next.HandleDeserialize(ctx, in)
}

// functionFaults injects the faults the function itself sees: DynamoDB
// errors after the SDK gave up (some after the write landed), the crash
// between a provider's acceptance and the outcome write, and the SES
// refusals and lost acknowledgements.
func (f *injector) functionFaults(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	switch p := in.Parameters.(type) {
	case *dynamodb.UpdateItemInput:
		if from, ok := p.ExpressionAttributeValues[":from"].(*ddbtypes.AttributeValueMemberS); ok && from.Value == "dispatching" {
			key := p.Key["pk"].(*ddbtypes.AttributeValueMemberS).Value
			f.mu.Lock()
			kill := f.transport[key] == faultKill && !f.killed[key]
			if kill {
				f.killed[key] = true
			}
			f.mu.Unlock()
			if kill {
				f.count("kill: outcome write never made")
				return middleware.InitializeOutput{}, middleware.Metadata{}, errors.New("gate: function killed after the provider accepted, before the outcome write")
			}
		}
	case *sesv2.SendEmailInput:
		return f.ses(ctx, p, in, next)
	}
	if awsmiddleware.GetServiceID(ctx) != "DynamoDB" {
		return next.HandleInitialize(ctx, in)
	}
	r := f.roll()
	switch {
	case r < f.ddbRate*0.1:
		f.count("ddb: error returned to the function, nothing written")
		return middleware.InitializeOutput{}, middleware.Metadata{}, serverError(503, "ServiceUnavailable")
	case r < f.ddbRate*0.2:
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		f.count("ddb: error returned to the function after the write landed")
		return middleware.InitializeOutput{}, md, serverError(500, "InternalServerError")
	}
	return next.HandleInitialize(ctx, in)
}

func (f *injector) ses(ctx context.Context, p *sesv2.SendEmailInput, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	var key string
	for _, t := range p.EmailTags {
		if t.Name != nil && *t.Name == sestransport.TagIdempotencyKey && t.Value != nil {
			key = *t.Value
		}
	}
	switch f.faultOf(key) {
	case faultReject:
		f.count("ses: MessageRejected, nothing sent")
		return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{Code: "MessageRejected", Message: "injected: address is on the suppression list"}
	case faultAckLost, faultSlow:
		out, md, err := next.HandleInitialize(ctx, in)
		if err != nil {
			return out, md, err
		}
		f.noteSend(key)
		f.count("ses: sent, response dropped")
		return middleware.InitializeOutput{}, md, errors.New("gate: connection reset after SES accepted the message")
	}
	out, md, err := next.HandleInitialize(ctx, in)
	if err == nil {
		f.noteSend(key)
	}
	return out, md, err
}

// provider wraps the webhook provider: per idempotency key it refuses,
// drops the answer after recording, or holds the answer past the timeout.
func (f *injector) provider(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		switch f.faultOf(key) {
		case faultReject:
			f.count("webhook: 400 rejected, nothing recorded")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"injected: number unreachable"}`))
			return
		case faultAckLost:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				f.noteSend(key)
			}
			f.count("webhook: recorded, connection dropped")
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
					return
				}
			}
			w.WriteHeader(http.StatusBadGateway)
			return
		case faultSlow:
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if rec.Code == http.StatusOK {
				f.noteSend(key)
			}
			f.count("webhook: recorded, answer held past the timeout")
			select {
			case <-time.After(f.slowFor):
			case <-r.Context().Done():
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		if rec.Code == http.StatusOK {
			f.noteSend(key)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

func fmtCounts(f *injector) string {
	var sb strings.Builder
	for _, k := range f.summary() {
		f.mu.Lock()
		n := f.counts[k]
		f.mu.Unlock()
		sb.WriteString("  " + k + ": " + itoa(n) + "\n")
	}
	return sb.String()
}
