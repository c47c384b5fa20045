package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/ledgertest"
)

// lostResponseStore applies every write and then reports a conflict, as a
// store client does when a write's response is lost and its retry fails the
// condition the first attempt already changed.
type lostResponseStore struct {
	ledger.Store
	lose bool
	// asError reports the lost response as a plain failure (retries
	// exhausted) instead of a conflict.
	asError bool
}

func (s *lostResponseStore) lost(what string) error {
	if s.asError {
		return fmt.Errorf("%s: internal server error after retries", what)
	}
	return fmt.Errorf("retried %s: %w", what, ledger.ErrConflict)
}

func (s *lostResponseStore) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	got, err := s.Store.Create(ctx, e)
	if err == nil && s.lose {
		return got, s.lost("create")
	}
	return got, err
}

func (s *lostResponseStore) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if err == nil && s.lose {
		return ledger.Entry{}, s.lost("update")
	}
	return got, err
}

func TestWritesWhoseResponseWasLostStillCount(t *testing.T) {
	for _, asError := range []bool{false, true} {
		t.Run(fmt.Sprintf("reported as error=%v", asError), func(t *testing.T) { testLostResponses(t, asError) })
	}
}

func testLostResponses(t *testing.T, asError bool) {
	e := newEnv(t)
	lossy := &lostResponseStore{Store: e.Svc.Store, lose: true, asError: asError}
	e.Svc.Store = lossy
	ctx := context.Background()
	in, sealed := ledgertest.Intent(1, ledger.Email, e.Clock.Now(), ttl)
	res, err := e.Svc.Claim(ctx, in, sealed, "claim/req-1")
	if err != nil || res.Outcome != ledger.ClaimCreated {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	d, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || d.Outcome != ledger.DispatchAccepted {
		t.Fatalf("dispatch: %s %v", d.Outcome, err)
	}
	row := e.get(t, in.Key())
	if row.State != ledger.Accepted || e.Transport.Recorded(in.Key()) != 1 || len(row.History) != 3 {
		t.Fatalf("row %s, recorded %d, history %d", row.State, e.Transport.Recorded(in.Key()), len(row.History))
	}
	// The recognition of landed writes does not reopen an ended row: an
	// operator decision on the accepted row is still refused. (A genuine
	// conflict on a stale version is the store contract's "a different
	// change on the stale version must conflict".)
	lossy.lose = false
	if _, err := e.Svc.Resolve(ctx, in.Key(), ledger.DecideAbandoned, "test", "", "operator:t"); err == nil {
		t.Fatal("resolving an accepted row must fail")
	}
}

func TestContentOfferedWithAnotherHashNeverStandsInForTheRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in, sealed := ledgertest.Intent(2, ledger.Email, e.Clock.Now(), ttl)
	// A racing claim with other content stored its blob first.
	other := ledgertest.Message(2, ledger.Email)
	other.Body = "another rendering"
	otherHash := ledger.ContentHash(in.TemplateID, in.TemplateVersion, other)
	if _, err := e.Content.Put(ctx, in.Key()+":"+otherHash, ledgertest.Seal(other), in.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.Claim(ctx, in, sealed, "claim/req-1"); err != nil {
		t.Fatal(err)
	}
	d, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || d.Outcome != ledger.DispatchAccepted {
		t.Fatalf("dispatch: %s %v", d.Outcome, err)
	}
	if s := e.Transport.Sent; len(s) != 1 || s[0].ContentHash != in.ContentHash || s[0].Message.Body == other.Body {
		t.Fatalf("sent %+v", s)
	}
}

func TestAcknowledgementArrivingAfterTheLeaseResolvesUnknown(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in, _, _ := e.claim(t, 3, ledger.SMS, ledger.ClaimCreated)
	swept := false
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior {
		// The provider is slow: the lease runs out and reconcile marks the
		// row unknown while the request is still in flight.
		e.Clock.Advance(e.Svc.Policy.Lease + time.Second)
		rep, err := e.Svc.Reconcile(ctx, "reconcile/req-1", 10)
		swept = err == nil && rep.Actions["dispatching->unknown"] == 1
		return ledgertest.Accept
	}
	d, err := e.Svc.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || !swept {
		t.Fatalf("dispatch: %v, swept %v", err, swept)
	}
	row := e.get(t, in.Key())
	last := row.Last()
	if row.State != ledger.Accepted || row.AckID == "" || (last.From != ledger.Unknown && last.From != ledger.Quarantined) || !strings.Contains(last.Reason, "after the lease expired") {
		t.Fatalf("row %s ack %q last %s->%s %q (outcome %s)", row.State, row.AckID, last.From, last.To, last.Reason, d.Outcome)
	}
	mustVerify(t, row)
}

func TestOperatorTextKeepsPersonalDataOut(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.Transport.Script = func(ledger.Send) ledgertest.Behavior { return ledgertest.AcceptThenDrop }
	in, _, _ := e.claim(t, 4, ledger.Email, ledger.ClaimCreated)
	mustDispatch(t, e, in.Key(), ledger.DispatchUnknown)
	for _, tt := range []struct{ field, reason, evidence string }{
		{"reason", "player jane@example.test asked", ""},
		{"reason", "called +1 555 123 4567", ""},
		{"reason", "line\nbreak", ""},
		{"evidence", "provider ok", "to: jane@example.test"},
	} {
		d := ledger.DecideAbandoned
		if tt.evidence != "" {
			d = ledger.DecideAccepted
		}
		_, err := e.Svc.Resolve(ctx, in.Key(), d, tt.reason, tt.evidence, "operator:t")
		var fe *ledger.FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field {
			t.Fatalf("%q/%q: want a %s field error, got %v", tt.reason, tt.evidence, tt.field, err)
		}
	}
	if _, err := e.Svc.Resolve(ctx, in.Key(), ledger.DecideAccepted, "provider dashboard shows delivery at 10:02", "ses-0100019a", "operator:t"); err != nil {
		t.Fatal(err)
	}
}

// countingStore counts reads.
type countingStore struct {
	ledger.Store
	gets int
}

func (s *countingStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	s.gets++
	return s.Store.Get(ctx, key)
}

func TestDispatchRowSavesTheReadAndToleratesAStaleRow(t *testing.T) {
	e := newEnv(t)
	counting := &countingStore{Store: e.Svc.Store}
	e.Svc.Store = counting
	ctx := context.Background()
	_, _, claimed := e.claim(t, 5, ledger.Email, ledger.ClaimCreated)
	counting.gets = 0
	res, err := e.Svc.DispatchRow(ctx, claimed, "dispatch/req-1")
	if err != nil || res.Outcome != ledger.DispatchAccepted || counting.gets != 0 {
		t.Fatalf("fresh row: %s %v, %d reads", res.Outcome, err, counting.gets)
	}
	// The same stream record again: its image still says claimed.
	res, err = e.Svc.DispatchRow(ctx, claimed, "dispatch/req-2")
	if err != nil || res.Outcome != ledger.DispatchSkipped || res.Entry.State != ledger.Accepted {
		t.Fatalf("stale row: %s %v (row %s)", res.Outcome, err, res.Entry.State)
	}
	if got := e.Transport.Recorded(claimed.Key); got != 1 {
		t.Fatalf("provider recorded %d", got)
	}
}
