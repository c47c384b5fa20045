package dispatchports

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// fakeAccount answers GetAccount with rate, or fails while failing is set.
type fakeAccount struct {
	mu      sync.Mutex
	failing bool
	rate    float64
	calls   int
}

func (f *fakeAccount) GetAccount(context.Context, *sesv2.GetAccountInput, ...func(*sesv2.Options)) (*sesv2.GetAccountOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.failing {
		return nil, errors.New("AccessDeniedException: not authorized to perform ses:GetAccount")
	}
	return &sesv2.GetAccountOutput{SendQuota: &sestypes.SendQuota{MaxSendRate: f.rate}}, nil
}

func (f *fakeAccount) set(failing bool) (calls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failing = failing
	return f.calls
}

// logLines returns a logger and the records it wrote.
func logLines(t *testing.T) (*slog.Logger, func() []map[string]any) {
	var buf bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	return slog.New(slog.NewJSONHandler(w, nil)), func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		var out []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			out = append(out, m)
		}
		return out
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// spacing books two sends on ch at now and returns the time between them:
// the interval of the rate the budget books at.
func spacing(t *testing.T, b ledger.Budget, ch ledger.Channel, now time.Time) time.Duration {
	t.Helper()
	ctx := context.Background()
	first, err := b.Reserve(ctx, ch, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Reserve(ctx, ch, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return second.Sub(first)
}

// TestAccountRateFallback: when GetAccount fails at start, email is booked
// at FallbackEmailRate with a warning; SES is asked again only on an email
// booking AskAgainAfter later, and from its answer on email is booked at the
// account's rate and SES is not asked again. Other channels keep their
// configured rate and never ask.
func TestAccountRateFallback(t *testing.T) {
	ses := &fakeAccount{failing: true, rate: 14}
	log, lines := logLines(t)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	book := func(rates map[ledger.Channel]float64) ledger.Budget { return &memstore.Budget{Rates: rates} }
	b := newAccountRate(context.Background(), ses, map[ledger.Channel]float64{ledger.SMS: 2}, book, log, start)

	if got := spacing(t, b, ledger.Email, start); got != time.Second {
		t.Fatalf("email spacing after a failed GetAccount = %s, want 1s (FallbackEmailRate)", got)
	}
	warned := false
	for _, l := range lines() {
		warned = warned || l["level"] == "WARN" && strings.Contains(l["msg"].(string), "fallback rate") && strings.Contains(l["error"].(string), "GetAccount")
	}
	if !warned {
		t.Errorf("no warning for the fallback; log: %v", lines())
	}
	if got := spacing(t, b, ledger.SMS, start.Add(2*AskAgainAfter)); got != 500*time.Millisecond {
		t.Errorf("sms spacing = %s, want 500ms (its configured rate)", got)
	}
	if calls := ses.set(false); calls != 1 {
		t.Fatalf("GetAccount called %d times before an email booking was due to ask again, want 1 (at start)", calls)
	}
	if got := spacing(t, b, ledger.Email, start.Add(AskAgainAfter/2)); got != time.Second {
		t.Errorf("email spacing before AskAgainAfter = %s, want 1s", got)
	}
	if calls := ses.set(false); calls != 1 {
		t.Fatalf("GetAccount asked again before AskAgainAfter: %d calls", calls)
	}
	if got, want := spacing(t, b, ledger.Email, start.Add(AskAgainAfter)), ledger.Interval(14); got != want {
		t.Errorf("email spacing once SES answers = %s, want %s (MaxSendRate 14)", got, want)
	}
	spacing(t, b, ledger.Email, start.Add(3*AskAgainAfter))
	if calls := ses.set(false); calls != 2 {
		t.Errorf("GetAccount called %d times, want 2: at start and once AskAgainAfter later, never after it answered", calls)
	}
}

// TestAccountRateNoRate: an answer without a MaxSendRate is no answer.
func TestAccountRateNoRate(t *testing.T) {
	log, _ := logLines(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := newAccountRate(context.Background(), &fakeAccount{rate: 0}, nil,
		func(rates map[ledger.Channel]float64) ledger.Budget { return &memstore.Budget{Rates: rates} }, log, now)
	if got := spacing(t, b, ledger.Email, now); got != time.Second {
		t.Errorf("email spacing with MaxSendRate 0 = %s, want 1s (FallbackEmailRate)", got)
	}
}

// TestAccountRateConcurrent: bookings during an ask do not wait for it, and
// only one ask is made at a time (run with -race).
func TestAccountRateConcurrent(t *testing.T) {
	log, _ := logLines(t)
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ses := &fakeAccount{failing: true, rate: 14}
	b := newAccountRate(context.Background(), ses, nil,
		func(rates map[ledger.Channel]float64) ledger.Budget { return &memstore.Budget{Rates: rates} }, log, now)
	ses.set(false)
	var wg sync.WaitGroup
	var booked atomic.Int32
	for range 8 {
		wg.Go(func() {
			if _, err := b.Reserve(context.Background(), ledger.Email, now.Add(AskAgainAfter), now.Add(time.Hour)); err == nil {
				booked.Add(1)
			}
		})
	}
	wg.Wait()
	if booked.Load() != 8 {
		t.Errorf("%d of 8 bookings made", booked.Load())
	}
	if calls := ses.set(false); calls != 2 {
		t.Errorf("GetAccount called %d times, want 2: at start and one ask for the eight bookings", calls)
	}
}

// failGetAccount fails SES v2 GetAccount before it is sent while *failing
// holds, as SES answers a role without ses:GetAccount; other calls pass.
func failGetAccount(failing *atomic.Bool) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("fail-get-account",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if failing.Load() && awsmiddleware.GetServiceID(ctx) == sesv2.ServiceID && awsmiddleware.GetOperationName(ctx) == "GetAccount" {
					return middleware.InitializeOutput{}, middleware.Metadata{}, &smithy.GenericAPIError{
						Code: "AccessDeniedException", Message: "injected: not authorized to perform ses:GetAccount"}
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// TestDispatchStartsWithoutGetAccount builds dispatch as its main does, on
// the emulator (whose SES answers GetAccount), with GetAccount failing: it
// starts, books email at FallbackEmailRate in the budget table, and learns
// the account's MaxSendRate on an email booking AskAgainAfter later, once
// GetAccount answers.
func TestDispatchStartsWithoutGetAccount(t *testing.T) {
	ctx := context.Background()
	cfg := emulator.Config(t)
	var failing atomic.Bool
	failing.Store(true)
	cfg.APIOptions = append(cfg.APIOptions, failGetAccount(&failing))
	acct, err := sesv2.NewFromConfig(emulator.Config(t)).GetAccount(ctx, &sesv2.GetAccountInput{})
	if err != nil || acct.SendQuota == nil || acct.SendQuota.MaxSendRate <= 0 || acct.SendQuota.MaxSendRate == FallbackEmailRate {
		t.Fatalf("the emulator's GetAccount: %+v, %v; the test needs a MaxSendRate other than %v", acct, err, FallbackEmailRate)
	}
	db := dynamodb.NewFromConfig(cfg)
	s := settings.Defaults()
	s.BudgetTable = emulator.UniqueName(t, "budget")
	if err := dynamostore.CreateBudgetTable(ctx, db, s.BudgetTable); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &s.BudgetTable}) })
	s.SESFrom, s.Transports = "no-reply@mail.example.com", map[ledger.Channel]string{ledger.Email: settings.TransportSES}
	log, lines := logLines(t)
	ports, err := wire.Build(ctx, cfg, s, log, &metrics.Emitter{W: &bytes.Buffer{}}, Ports)
	if err != nil {
		t.Fatalf("dispatch did not start with GetAccount failing: %v", err)
	}
	if len(lines()) == 0 || lines()[0]["level"] != "WARN" {
		t.Errorf("no warning at start; log: %v", lines())
	}
	now := time.Now()
	if got := spacing(t, ports.Budget, ledger.Email, now); got != time.Second {
		t.Errorf("email spacing with GetAccount failing = %s, want 1s", got)
	}
	failing.Store(false)
	// The table keeps whole microseconds.
	later := now.Add(AskAgainAfter)
	if got, want := spacing(t, ports.Budget, ledger.Email, later), ledger.Interval(acct.SendQuota.MaxSendRate).Truncate(time.Microsecond); got != want {
		t.Errorf("email spacing once GetAccount answers = %s, want %s (MaxSendRate %v); log: %v", got, want, acct.SendQuota.MaxSendRate, lines())
	}
}
