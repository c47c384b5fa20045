package dispatchports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// FallbackEmailRate is the email send rate, in sends per second, dispatch
// books at while it does not know the SES account's MaxSendRate (email
// through SES, SEND_RATE_EMAIL unset, and GetAccount failed or reported no
// rate): 1, the SES sandbox's rate and the lowest SES gives an account, so
// it never books above the account's rate.
const FallbackEmailRate = 1.0

// AccountTimeout bounds each GetAccount call: at start, and each later ask.
const AccountTimeout = 2 * time.Second

// AskAgainAfter is how long dispatch books email at FallbackEmailRate
// before it asks SES again.
const AskAgainAfter = time.Minute

// AccountReader is the SES call that reads the account's sending quota.
type AccountReader interface {
	GetAccount(ctx context.Context, in *sesv2.GetAccountInput, optFns ...func(*sesv2.Options)) (*sesv2.GetAccountOutput, error)
}

// newBudget returns dispatch's send-rate budget in the budget table: the
// configured rates and, for email through SES without one, the account's
// MaxSendRate (see accountRate). now is the ports' clock at start.
func newBudget(ctx context.Context, env wire.Env, ses AccountReader, now time.Time) ledger.Budget {
	s := env.Settings
	book := func(rates map[ledger.Channel]float64) ledger.Budget {
		return dynamostore.NewBudget(env.DynamoDB, s.BudgetTable, rates)
	}
	if s.SendRates[ledger.Email] > 0 || s.Transports[ledger.Email] != settings.TransportSES {
		return book(s.SendRates)
	}
	return newAccountRate(ctx, ses, s.SendRates, book, env.Log, now)
}

// accountRate is the budget when email's rate is the SES account's
// MaxSendRate. It asks GetAccount at start; if SES does not answer, it
// books email at FallbackEmailRate, logs a warning, and asks again on the
// first email booking AskAgainAfter later (a booking happens in an
// invocation: a frozen Lambda does no background work), until SES answers;
// from then on it books at the account's rate. One ask at a time, outside
// the lock: other bookings never wait for SES.
type accountRate struct {
	ses   AccountReader
	rates map[ledger.Channel]float64 // the configured rates; email's is learned
	book  func(map[ledger.Channel]float64) ledger.Budget
	log   *slog.Logger

	mu      sync.Mutex
	budget  ledger.Budget
	learned bool      // budget books email at the account's rate
	asking  bool      // a GetAccount call is under way
	askAt   time.Time // when to ask again, if not learned
}

var _ ledger.Budget = (*accountRate)(nil)

func newAccountRate(ctx context.Context, ses AccountReader, rates map[ledger.Channel]float64,
	book func(map[ledger.Channel]float64) ledger.Budget, log *slog.Logger, now time.Time) *accountRate {
	b := &accountRate{ses: ses, rates: rates, book: book, log: log}
	b.learn(ctx, now)
	return b
}

// Reserve implements ledger.Budget.
func (b *accountRate) Reserve(ctx context.Context, ch ledger.Channel, now, notAfter time.Time) (time.Time, error) {
	if ch == ledger.Email && b.askNow(now) {
		b.learn(ctx, now)
	}
	b.mu.Lock()
	budget := b.budget
	b.mu.Unlock()
	return budget.Reserve(ctx, ch, now, notAfter)
}

// askNow reports whether to ask SES now, and if so claims the ask.
func (b *accountRate) askNow(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.learned || b.asking || now.Before(b.askAt) {
		return false
	}
	b.asking = true
	return true
}

// learn asks SES for the account's MaxSendRate and books at it from now on;
// if SES does not answer, email stays at (or starts at) FallbackEmailRate
// and the next ask is AskAgainAfter from now.
func (b *accountRate) learn(ctx context.Context, now time.Time) {
	rate, err := maxSendRate(ctx, b.ses)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asking = false
	rates := maps.Clone(b.rates)
	if rates == nil {
		rates = map[ledger.Channel]float64{}
	}
	if err != nil {
		b.askAt = now.Add(AskAgainAfter)
		if b.budget == nil {
			rates[ledger.Email] = FallbackEmailRate
			b.budget = b.book(rates)
		}
		b.log.Warn("email send rate unknown: booking email at the fallback rate until SES GetAccount answers",
			"fallback_rate", FallbackEmailRate, "ask_again_after", AskAgainAfter.String(), "error", err.Error())
		return
	}
	fellBack := b.budget != nil
	rates[ledger.Email] = rate
	b.budget, b.learned = b.book(rates), true
	if fellBack {
		b.log.Info("email send rate learned from SES GetAccount", "rate", rate)
	}
}

// maxSendRate reads the account's MaxSendRate, within AccountTimeout.
func maxSendRate(ctx context.Context, ses AccountReader) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, AccountTimeout)
	defer cancel()
	acct, err := ses.GetAccount(ctx, &sesv2.GetAccountInput{})
	if err != nil {
		return 0, fmt.Errorf("SES GetAccount (set SEND_RATE_EMAIL to skip it): %w", err)
	}
	if acct.SendQuota == nil || acct.SendQuota.MaxSendRate <= 0 {
		return 0, errors.New("SES GetAccount reports no MaxSendRate (set SEND_RATE_EMAIL)")
	}
	return acct.SendQuota.MaxSendRate, nil
}
