package ledger_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// busyRow walks one row through claim, a lost acknowledgement, a content
// mismatch and a same-key retry, checking that every write appends exactly
// one entry.
func busyRow(t *testing.T, e *ledgertest.Scenario) ledger.Entry {
	t.Helper()
	ctx := context.Background()
	e.Transport.Window = 24 * time.Hour
	in, sealed := ledgertest.Intent(90, ledger.Email, e.Clock.Now(), ledgertest.ScenarioTTL)
	prev := ledger.Entry{}
	step := func(name string, do func()) {
		t.Helper()
		do()
		got := e.Get(t, in.Key())
		if got.Version != prev.Version+1 || len(got.History) != len(prev.History)+1 {
			t.Fatalf("%s: v%d h%d after v%d h%d: want exactly one more entry", name, got.Version, len(got.History), prev.Version, len(prev.History))
		}
		for i := range prev.History {
			if got.History[i] != prev.History[i] {
				t.Fatalf("%s: entry %d rewritten", name, i)
			}
		}
		prev = got
	}
	step("claim", func() {
		if _, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1"); err != nil {
			t.Fatal(err)
		}
	})
	e.Clock.Advance(10 * time.Second)
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	// Dispatch writes twice: begin and outcome.
	if _, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-2"); err != nil {
		t.Fatal(err)
	}
	got := e.Get(t, in.Key())
	if got.Version != 3 || len(got.History) != 3 {
		t.Fatalf("dispatch: v%d h%d", got.Version, len(got.History))
	}
	prev = got
	e.Clock.Advance(10 * time.Second)
	step("mismatch", func() {
		m := ledgertest.Message(90, ledger.Email)
		m.Subject = "Other subject"
		other := in
		other.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
		if _, err := e.Cases.Claim(ctx, other, ledgertest.Seal(m), "claim/req-3"); err != nil {
			t.Fatal(err)
		}
	})
	e.Clock.Advance(time.Minute)
	e.Transport.Script = nil
	ledgertest.MustReconcile(t, e) // writes twice: the retry, then its outcome
	got = e.Get(t, in.Key())
	if got.Version != 6 || len(got.History) != 6 {
		t.Fatalf("reconcile: v%d h%d", got.Version, len(got.History))
	}
	return got
}

func TestHistoryEntries(t *testing.T) {
	e := ledgertest.NewScenario(t)
	row := busyRow(t, e)
	t0 := ledgertest.Epoch
	mismatchHash := ledger.ContentHash("reset-email", "3", func() ledger.Message {
		m := ledgertest.Message(90, ledger.Email)
		m.Subject = "Other subject"
		return m
	}())
	tests := []struct {
		kind     ledger.EventKind
		from, to ledger.State
		at       time.Time
		worker   string
		reason   string // prefix
		attempt  int
		ackID    string
		hash     string // "" means the row's content hash
	}{
		{ledger.KindTransition, ledger.None, ledger.Claimed, t0, "claim/req-1", "intent claimed", 0, "", ""},
		{ledger.KindTransition, ledger.Claimed, ledger.Dispatching, t0.Add(10 * time.Second), "dispatch/req-2", "dispatch started", 1, "", ""},
		{ledger.KindTransition, ledger.Dispatching, ledger.Unknown, t0.Add(10 * time.Second), "dispatch/req-2", "no acknowledgement: read response: connection reset", 1, "", ""},
		{ledger.KindContentMismatch, ledger.Unknown, ledger.Unknown, t0.Add(20 * time.Second), "claim/req-3", "content hash " + mismatchHash, 1, "", mismatchHash},
		{ledger.KindRetry, ledger.Unknown, ledger.Unknown, t0.Add(80 * time.Second), "reconcile/req-1", "reconcile: same-key retry", 2, "", ""},
		{ledger.KindTransition, ledger.Unknown, ledger.Accepted, t0.Add(80 * time.Second), "reconcile/req-1", "reconcile: same-key retry: transport accepted", 2, "msg-1", ""},
	}
	if len(row.History) != len(tests) {
		t.Fatalf("%d entries, want %d", len(row.History), len(tests))
	}
	// Event ids are the env's counter, in the order the events were made:
	// rising and unique (a claim that finds the identity taken makes one
	// for the create it attempts, so the row's ids need not be adjacent).
	ids, prev := map[string]bool{}, ""
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d %s %s>%s", i, tt.kind, tt.from, tt.to), func(t *testing.T) {
			ev := row.History[i]
			hash := tt.hash
			if hash == "" {
				hash = row.ContentHash
			}
			if ev.Kind != tt.kind || ev.From != tt.from || ev.To != tt.to || !ev.At.Equal(tt.at) || ev.Worker != tt.worker ||
				!strings.HasPrefix(ev.Reason, tt.reason) || ev.Attempt != tt.attempt || ev.AckID != tt.ackID ||
				ev.PolicyVersion != ledgertest.ScenarioPolicyVersion || ev.ContentHash != hash {
				t.Fatalf("entry %d:\n got %+v\nwant %+v", i, ev, tt)
			}
			if !strings.HasPrefix(ev.ID, "ev-") || len(ev.ID) != len("ev-001") || ev.ID <= prev || ids[ev.ID] {
				t.Fatalf("event id %q after %q (seen: %v)", ev.ID, prev, ids[ev.ID])
			}
			ids[ev.ID], prev = true, ev.ID
			if strings.Contains(ev.Reason, ledgertest.Canary) || strings.Contains(ev.Reason, "@") || strings.Contains(ev.Reason, "Reset your password") {
				t.Fatalf("entry %d leaks content: %q", i, ev.Reason)
			}
		})
	}
	ledgertest.CheckHistory(t, row)
	if row.State != ledger.Accepted || row.AckID != "msg-1" || e.Transport.Recorded(row.Key) != 1 {
		t.Fatalf("row %s ack %q recorded %d", row.State, row.AckID, e.Transport.Recorded(row.Key))
	}
	if want := e.Clock.Now().Add(e.Cases.Policy.Retention); !row.RetainUntil.Equal(want) {
		t.Fatalf("retain until %v, want %v", row.RetainUntil, want)
	}
}

func TestDefaultEventIDs(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Cases.NewID = nil
	row := busyRow(t, e)
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	seen := map[string]bool{}
	for i, ev := range row.History {
		if !hex32.MatchString(ev.ID) || seen[ev.ID] {
			t.Fatalf("entry %d: id %q", i, ev.ID)
		}
		seen[ev.ID] = true
	}
}

func TestVerifyDetectsTampering(t *testing.T) {
	e := ledgertest.NewScenario(t)
	row := busyRow(t, e) // 6 entries, ends with a transition
	ledgertest.MustVerify(t, row)
	// A row whose last entry keeps the state: claimed, then a mismatch.
	in, _, _ := e.Claim(t, 91, ledger.SMS, ledger.OutcomeClaimed)
	m := ledgertest.Message(91, ledger.SMS)
	m.Body = "other"
	other := in
	other.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	if _, err := e.Cases.Claim(context.Background(), other, ledgertest.Seal(m), "claim/req-2"); err != nil {
		t.Fatal(err)
	}
	quiet := e.Get(t, in.Key())
	ledgertest.MustVerify(t, quiet)
	if len(quiet.History) != 2 || quiet.Last().Kind != ledger.KindContentMismatch {
		t.Fatalf("quiet row: %s", ledgertest.HistoryPath(quiet))
	}

	without := func(h []ledger.Event, i int) []ledger.Event {
		return append(append([]ledger.Event(nil), h[:i]...), h[i+1:]...)
	}
	tests := []struct {
		name   string
		row    ledger.Entry
		tamper func(e *ledger.Entry)
		entry  int // the entry the message must name
	}{
		{"reason edited", row, func(e *ledger.Entry) { e.History[2].Reason = "transport accepted" }, 2},
		{"time edited", row, func(e *ledger.Entry) { e.History[0].At = e.History[0].At.Add(-time.Hour) }, 0},
		{"worker edited", row, func(e *ledger.Entry) { e.History[5].Worker = "operator:mallory" }, 5},
		{"ack id edited", row, func(e *ledger.Entry) { e.History[5].AckID = "msg-999" }, 5},
		{"to edited", row, func(e *ledger.Entry) { e.History[2].To = ledger.Rejected }, 2},
		{"attempt edited", row, func(e *ledger.Entry) { e.History[4].Attempt = 1 }, 4},
		{"policy version edited", row, func(e *ledger.Entry) { e.History[1].PolicyVersion = "policy-0" }, 1},
		{"content hash edited", row, func(e *ledger.Entry) { e.History[3].ContentHash = e.ContentHash }, 3},
		{"edited and rehashed", row, func(e *ledger.Entry) {
			e.History[3].Reason = "nothing to see"
			e.History[3].Hash = strings.Repeat("0", 64)
		}, 3},
		{"first removed", row, func(e *ledger.Entry) { e.History = without(e.History, 0) }, 0},
		{"middle removed", row, func(e *ledger.Entry) { e.History = without(e.History, 2) }, 2},
		{"reordered", row, func(e *ledger.Entry) { e.History[3], e.History[4] = e.History[4], e.History[3] }, 3},
		{"last removed", row, func(e *ledger.Entry) { e.History = e.History[:5] }, 5},
		{"last two removed", row, func(e *ledger.Entry) { e.History = e.History[:4] }, 4},
		{"all removed", row, func(e *ledger.Entry) { e.History = nil }, 0},
		{"last removed, it kept the state", quiet, func(e *ledger.Entry) { e.History = e.History[:1] }, 1},
		{"row key changed", row, func(e *ledger.Entry) { e.Key = in.Key() }, 0},
		{"another row's history", row, func(e *ledger.Entry) { e.History = quiet.History }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := tt.row
			bad.History = append([]ledger.Event(nil), tt.row.History...)
			tt.tamper(&bad)
			err := bad.Verify()
			if err == nil {
				t.Fatal("Verify passed on a tampered history")
			}
			if want := fmt.Sprintf("entry %d", tt.entry); !strings.Contains(err.Error(), want) {
				t.Fatalf("message %q does not name %s", err, want)
			}
			// The original is untouched and still verifies.
			ledgertest.MustVerify(t, tt.row)
		})
	}
}
