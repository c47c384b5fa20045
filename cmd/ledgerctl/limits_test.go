package main

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestExplainShowsLimitRule: explain of a row a send limit stopped names
// the rule beside the reason that gives its count and window.
func TestExplainShowsLimitRule(t *testing.T) {
	f := newFixture(t)
	limits := &memstore.Limits{}
	f.cases.Limits = ledger.Limits{SMSGlobal: ledger.Cap{Max: 1, Window: time.Hour}}
	f.cases.Limiter, f.cases.Challenges = limits, limits
	sent := f.claim(1, ledger.SMS, ledger.Single)
	if out := f.dispatch(sent, ledgertest.Accept); out != ledger.OutcomeAccepted {
		t.Fatalf("first SMS: %s", out)
	}
	stopped := f.claim(2, ledger.SMS, ledger.Single)
	if out := f.dispatch(stopped, ledgertest.Accept); out != ledger.OutcomeLimited {
		t.Fatalf("second SMS: %s, want limited", out)
	}
	out, errOut, code := f.run("explain", chal(2))
	wantCode(t, code, exitOK, out, errOut)
	for _, want := range []string{
		"chal-000002 / sms  [limited]",
		"stopped by:      send limit rule sms-global  (nothing sent)",
		"limit sms-global: 1 of 1 SMS in all per 1h0m0s reached",
		"claimed -> limited",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain output lacks %q\n%s", want, out)
		}
	}
}
