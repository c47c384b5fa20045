package gate

import (
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestGateNumberKinds: through the real claim and dispatch handlers on the
// emulator, with the limits wired as deployed (the default number-kind
// allow-list), an SMS to a premium-rate number of an allowed country (US,
// +1 900) ends limited by the number-kind rule without an attempt, while an
// SMS to an ordinary US number is sent.
func TestGateNumberKinds(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{Limits: true})
	publish(t, p, p.Notification(1, ledger.SMS, 30*time.Minute), ledger.Accepted)
	premium := p.Notification(2, ledger.SMS, 30*time.Minute)
	premium.Message.To = "+19002345678"
	row := publish(t, p, premium, ledger.Limited)
	if rule, _ := ledger.LimitRule(row); rule != ledger.RuleSMSNumberKind ||
		row.Reason != "a premium-rate number (region US) is not in the SMS number-kind allow-list; nothing sent" {
		t.Fatalf("premium-rate SMS limited by %q: %q, want %s naming the kind", rule, row.Reason, ledger.RuleSMSNumberKind)
	}
	if row.Attempts != 0 {
		t.Fatalf("premium-rate SMS: %d attempts, want none", row.Attempts)
	}
	if err := row.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestGateOneCounterPerMailbox: three spellings of one Gmail mailbox share
// one destination counter in the emulator's limits table (fingerprinted
// under the emulator's KMS key): under a cap of 2, the third ends limited
// by the destination rule and SES captures two emails.
func TestGateOneCounterPerMailbox(t *testing.T) {
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{Limits: true, Env: map[string]string{settings.LimitDestination.Env: "2/1h"}})
	spellings := []string{"a.b+x@gmail.com", "ab@gmail.com", "AB@googlemail.com"}
	for i, to := range spellings {
		n := p.Notification(10+i, ledger.Email, 30*time.Minute)
		n.Message.To = to
		want := ledger.Accepted
		if i == 2 {
			want = ledger.Limited
		}
		row := publish(t, p, n, want)
		if rule, _ := ledger.LimitRule(row); want == ledger.Limited && rule != ledger.RuleDestination {
			t.Fatalf("%s limited by %q, want the destination rule", to, rule)
		}
	}
	sent := 0
	for _, to := range spellings {
		sent += p.SESMessages(to)
	}
	if sent != 2 {
		t.Fatalf("SES captured %d emails to the mailbox, want 2", sent)
	}
}
