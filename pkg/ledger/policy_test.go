package ledger_test

import (
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*ledger.Policy)
		ok     bool
	}{
		{"default", func(*ledger.Policy) {}, true},
		{"zero margin", func(p *ledger.Policy) { p.ExpiryMargin = 0 }, false},
		{"margin at the send guard", func(p *ledger.Policy) { p.ExpiryMargin = p.SendGuard }, false},
		{"margin just above the send guard", func(p *ledger.Policy) { p.ExpiryMargin = p.SendGuard + time.Millisecond }, true},
		{"retry max below base", func(p *ledger.Policy) { p.RetryMax = p.RetryBase - 1 }, false},
		{"lifetime at the margin", func(p *ledger.Policy) { p.MaxChallengeLifetime = p.ExpiryMargin }, false},
		{"no version", func(p *ledger.Policy) { p.Version = "" }, false},
		{"zero lease", func(p *ledger.Policy) { p.Lease = 0 }, false},
		{"negative margin", func(p *ledger.Policy) { p.ExpiryMargin = -time.Second }, false},
		{"zero retention", func(p *ledger.Policy) { p.Retention = 0 }, false},
		{"zero attempts", func(p *ledger.Policy) { p.MaxAttempts = 0 }, false},
		{"zero recheck", func(p *ledger.Policy) { p.RecheckAfter = 0 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ledger.DefaultPolicy()
			tt.mutate(&p)
			if err := p.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
