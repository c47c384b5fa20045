package ledger_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
	"github.com/resetledger/resetledger/pkg/memstore"
)

// A row quarantined at dispatch says why in its current-state reason, not
// only in its history (found by the release gate: it kept "intent claimed").
func TestDispatchQuarantineRecordsItsReasonOnTheRow(t *testing.T) {
	ctx := context.Background()
	env := ledgertest.NewEnv(&memstore.Store{})
	in, _ := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	other := ledgertest.Message(2, ledger.Email) // sealed content that does not match the hash
	if _, err := env.Svc.Claim(ctx, in, ledgertest.Seal(other), "claim/test"); err != nil {
		t.Fatal(err)
	}
	res, err := env.Svc.Dispatch(ctx, in.Key(), "dispatch/test")
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != ledger.DispatchQuarantined || res.Entry.State != ledger.Quarantined {
		t.Fatalf("outcome %s state %s", res.Outcome, res.Entry.State)
	}
	if !strings.Contains(res.Entry.Reason, "nothing sent") || res.Entry.Reason != res.Entry.Last().Reason {
		t.Fatalf("row reason %q, last event reason %q", res.Entry.Reason, res.Entry.Last().Reason)
	}
	if env.Transport.Calls() != 0 {
		t.Fatalf("%d sends", env.Transport.Calls())
	}
}
