package ledger_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestForgedImageWritesNothing: a stream record whose image the table
// contradicts (the forgeries: an earlier expiry, another subject;
// and an image at a version the row never had) is answered contradicted,
// leaves the row as it was, and sends nothing; the genuine record then
// sends the message.
func TestForgedImageWritesNothing(t *testing.T) {
	forgeries := []struct {
		name   string
		forge  func(*ledger.Entry)
		fields []string
	}{
		{"earlier expiry", func(e *ledger.Entry) { e.ExpiresAt = e.CreatedAt.Add(-time.Minute) }, []string{"expires_at"}},
		{"other subject", func(e *ledger.Entry) { e.SubjectRef = "acct-forged" }, []string{"subject_ref"}},
		{"other content", func(e *ledger.Entry) { e.ContentHash = "00" + e.ContentHash[2:] }, []string{"content_hash"}},
		{"history head", func(e *ledger.Entry) { e.History[len(e.History)-1].Hash = "forged" }, []string{"history_head"}},
		{"future version", func(e *ledger.Entry) { e.Version++ }, []string{"version"}},
	}
	for i, f := range forgeries {
		t.Run(f.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			ctx := context.Background()
			_, _, genuine := e.Claim(t, 80+i, ledger.Email, ledger.OutcomeClaimed)
			forged := genuine
			forged.History = slices.Clone(genuine.History)
			f.forge(&forged)
			res, err := e.Cases.DispatchRow(ctx, forged, "dispatch/forged")
			if err != nil || res.Outcome != ledger.OutcomeContradicted || !slices.Equal(res.Contradicted, f.fields) {
				t.Fatalf("forged record: %s %v, fields %v; want contradicted, fields %v", res.Outcome, err, res.Contradicted, f.fields)
			}
			if row := e.Get(t, genuine.Key); row.Version != genuine.Version || row.State != ledger.Claimed {
				t.Fatalf("row after the forged record: %s v%d; want claimed v%d, untouched", row.State, row.Version, genuine.Version)
			}
			if n := e.Transport.Recorded(genuine.Key); n != 0 {
				t.Fatalf("forged record sent %d messages", n)
			}
			res, err = e.Cases.DispatchRow(ctx, genuine, "dispatch/genuine")
			if err != nil || res.Outcome != ledger.OutcomeAccepted || e.Transport.Recorded(genuine.Key) != 1 {
				t.Fatalf("genuine record: %s %v; want accepted, sent once", res.Outcome, err)
			}
		})
	}
}

// TestContradictionIgnoresStaleImages: an image older than the row is a
// repeated or late delivery, not a forgery; the row decides.
func TestContradictionIgnoresStaleImages(t *testing.T) {
	row := ledger.Entry{Key: "k", Version: 3, State: ledger.Accepted}
	stale := ledger.Entry{Key: "k", Version: 1, State: ledger.Claimed, ExpiresAt: time.Unix(1, 0)}
	if diff := ledger.Contradiction(stale, row); diff != nil {
		t.Fatalf("stale image contradicts: %v", diff)
	}
	if diff := ledger.Contradiction(row, row); diff != nil {
		t.Fatalf("the row contradicts itself: %v", diff)
	}
	if diff := ledger.Contradiction(ledger.Entry{Key: "other", Version: 3}, row); !slices.Equal(diff, []string{"key"}) {
		t.Fatalf("another key: %v", diff)
	}
}
