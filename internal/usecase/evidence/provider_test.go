package evidence_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// An unknown or quarantined row whose provider reports the send is resolved
// to accepted with the event as its evidence, in one entry that says so;
// the sealed content is purged, and a repeat of the event changes nothing.
func TestProviderEventResolvesUnknown(t *testing.T) {
	for _, tt := range []struct {
		name       string
		quarantine bool
		kind       ledger.EventKind
		typ        string
	}{
		{"unknown, send event", false, ledger.KindProviderSent, "Send"},
		{"quarantined, delivery event", true, ledger.KindDelivered, "Delivery"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Events = true
			in, _, _ := e.Claim(t, 1, ledger.Email, ledger.OutcomeClaimed)
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
			ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeUnknown)
			if tt.quarantine {
				e.Clock.Advance(time.Hour)
				if _, err := e.Cases.Reconcile(context.Background(), "reconcile/req-1", 10); err != nil {
					t.Fatal(err)
				}
				if got := e.Get(t, in.Key()).State; got != ledger.Quarantined {
					t.Fatalf("row is %s, want quarantined", got)
				}
			}
			p := e.ProviderEvent(t, in.Key(), ledger.Email, tt.kind, tt.typ, "", false)
			row := e.Record(t, p, ledger.OutcomeResolved)
			last := row.Last()
			if row.State != ledger.Accepted || row.AckID != p.MessageID || last.Kind != tt.kind || last.To != ledger.Accepted ||
				last.AckID != p.MessageID || last.ProviderType != tt.typ || !last.ProviderAt.Equal(p.At) ||
				!strings.Contains(last.Reason, "transport evidence") || !strings.Contains(last.Reason, "without an operator") {
				t.Fatalf("resolved row %s ack %q, last entry %+v", row.State, row.AckID, last)
			}
			if e.HasContent(t, in.Key()) {
				t.Fatal("sealed content kept after the row ended")
			}
			if again := e.Record(t, p, ledger.OutcomeDuplicate); again.Version != row.Version {
				t.Fatalf("duplicate wrote: version %d -> %d", row.Version, again.Version)
			}
		})
	}
}

// Events for an accepted row are appended in arrival order, each its own
// kind, with the state unchanged; what the provider sends that the ledger
// must not keep is refused before any write.
func TestProviderEventsAppendToAcceptedRow(t *testing.T) {
	e := ledgertest.NewScenario(t)
	e.Transport.Events = true
	in, _, _ := e.Claim(t, 2, ledger.Email, ledger.OutcomeClaimed)
	ledgertest.MustDispatch(t, e, in.Key(), ledger.OutcomeAccepted)
	events := []ledger.ProviderEvent{
		e.ProviderEvent(t, in.Key(), ledger.Email, ledger.KindDelivered, "Delivery", "", false), // before its Send: out of order
		e.ProviderEvent(t, in.Key(), ledger.Email, ledger.KindProviderSent, "Send", "", false),
		e.ProviderEvent(t, in.Key(), ledger.Email, ledger.KindComplained, "Complaint", "abuse", false),
	}
	var row ledger.Entry
	for _, p := range events {
		row = e.Record(t, p, ledger.OutcomeRecorded)
	}
	if row.State != ledger.Accepted || len(row.History) != 3+len(events) {
		t.Fatalf("row %s with %d entries", row.State, len(row.History))
	}
	for i, p := range events {
		got := row.History[3+i]
		if got.Kind != p.Kind || got.From != ledger.Accepted || got.To != ledger.Accepted || got.Detail != p.Detail {
			t.Errorf("entry %d: %+v, want %s", 3+i, got, p.Kind)
		}
	}
	bad := map[string]func(*ledger.ProviderEvent){
		"address in detail": func(p *ledger.ProviderEvent) { p.Detail = "bounced for player@example.com" },
		"phone in type":     func(p *ledger.ProviderEvent) { p.Type = "TEXT +1 206 555 0152" },
		"not a key":         func(p *ledger.ProviderEvent) { p.Key = "player-123" },
		"kind":              func(p *ledger.ProviderEvent) { p.Kind = ledger.KindTransition },
		"no time":           func(p *ledger.ProviderEvent) { p.At = time.Time{} },
		"no message id":     func(p *ledger.ProviderEvent) { p.MessageID = "" },
	}
	for name, mut := range bad {
		p := events[0]
		p.At = p.At.Add(time.Minute)
		mut(&p)
		_, err := e.Cases.RecordProviderEvent(context.Background(), p, "events/req-1")
		if !errors.Is(err, ledger.ErrInvalidProviderEvent) || strings.Contains(err.Error(), "example.com") || strings.Contains(err.Error(), "555") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := e.Get(t, in.Key()); got.Version != row.Version {
		t.Fatal("a refused event was written")
	}
	// The proof binds key and channel: an event moved to another carries a
	// proof of nothing. Signed for where it claims to be, it is refused for
	// what it is.
	for name, tt := range map[string]struct {
		mut  func(*ledger.ProviderEvent)
		want error
	}{
		"sms event for an email row": {func(p *ledger.ProviderEvent) { p.Channel = ledger.SMS }, ledger.ErrEventChannel},
		"event for no row":           {func(p *ledger.ProviderEvent) { p.Key = strings.Repeat("ab", 32) }, ledger.ErrNotFound},
	} {
		other := events[0]
		tt.mut(&other)
		if _, err := e.Cases.RecordProviderEvent(context.Background(), other, "events/req-1"); !errors.Is(err, ledger.ErrUnproven) {
			t.Fatalf("%s, with the proof of another attempt: %v, want ErrUnproven", name, err)
		}
		other.Proof = ledgertest.SignProof(t, e, other)
		if _, err := e.Cases.RecordProviderEvent(context.Background(), other, "events/req-1"); !errors.Is(err, tt.want) {
			t.Fatalf("%s: %v, want %v", name, err, tt.want)
		}
	}
}

// eventOnSend records a provider event while the send is still in flight:
// the event reaches the ledger before dispatch records the outcome.
type eventOnSend struct {
	*ledgertest.Transport
	t   *testing.T
	e   *ledgertest.Scenario
	typ ledger.EventKind
}

func (s eventOnSend) Send(ctx context.Context, m ledger.Send) (ledger.Ack, error) {
	ack, err := s.Transport.Send(ctx, m)
	s.e.Record(s.t, s.e.ProviderEvent(s.t, m.IdempotencyKey, m.Channel, s.typ, "Send", "", false), ledger.OutcomeRecorded)
	return ack, err
}

// An event that arrives before the outcome write is kept on the dispatching
// row; the outcome is still recorded after it. If the acknowledgement was
// lost, reconcile finds the event in the history and resolves the row
// without waiting for the settle period.
func TestProviderEventBeforeOutcomeWrite(t *testing.T) {
	for _, tt := range []struct {
		name     string
		behavior ledgertest.Behavior
		want     ledger.Outcome
	}{
		{"acknowledged", ledgertest.Accept, ledger.OutcomeAccepted},
		{"acknowledgement lost", ledgertest.AcceptThenDrop, ledger.OutcomeUnknown},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := ledgertest.NewScenario(t)
			e.Transport.Events = true
			e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return tt.behavior }
			e.Cases.Transports[ledger.Email] = eventOnSend{Transport: e.Transport, t: t, e: e, typ: ledger.KindProviderSent}
			in, _, _ := e.Claim(t, 3, ledger.Email, ledger.OutcomeClaimed)
			row := ledgertest.MustDispatch(t, e, in.Key(), tt.want)
			kinds := []ledger.EventKind{}
			for _, ev := range row.History {
				kinds = append(kinds, ev.Kind)
			}
			if n := len(kinds); n != 4 || kinds[2] != ledger.KindProviderSent || row.History[2].To != ledger.Dispatching {
				t.Fatalf("history kinds %v", kinds)
			}
			ledgertest.MustVerify(t, row)
			if tt.behavior == ledgertest.Accept {
				return
			}
			e.Clock.Advance(e.Cases.Policy.RecheckAfter)
			rep, err := e.Cases.Reconcile(context.Background(), "reconcile/req-1", 10)
			if err != nil {
				t.Fatal(err)
			}
			row = e.Get(t, in.Key())
			if row.State != ledger.Accepted || rep.Actions["unknown->accepted (provider event)"] != 1 || row.AckID == "" {
				t.Fatalf("after reconcile: %s %v", row.State, rep.Actions)
			}
		})
	}
}
