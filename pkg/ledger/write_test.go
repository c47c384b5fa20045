package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
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
	e := ledgertest.NewScenario(t)
	lossy := &lostResponseStore{Store: e.Cases.Store, lose: true, asError: asError}
	e.Cases.Store = lossy
	ctx := context.Background()
	in, sealed := ledgertest.Intent(1, ledger.Email, e.Clock.Now(), ledgertest.ScenarioTTL)
	res, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1")
	if err != nil || res.Outcome != ledger.OutcomeClaimed {
		t.Fatalf("claim: %s %v", res.Outcome, err)
	}
	d, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || d.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("dispatch: %s %v", d.Outcome, err)
	}
	row := e.Get(t, in.Key())
	if row.State != ledger.Accepted || e.Transport.Recorded(in.Key()) != 1 || len(row.History) != 3 {
		t.Fatalf("row %s, recorded %d, history %d", row.State, e.Transport.Recorded(in.Key()), len(row.History))
	}
	// The recognition of landed writes does not reopen an ended row: an
	// operator decision on the accepted row is still refused. (A genuine
	// conflict on a stale version is the store contract's "a different
	// change on the stale version must conflict".)
	lossy.lose = false
	if _, err := e.Cases.Resolve(ctx, in.Key(), ledger.DecideAbandoned, "test", "", "operator:t"); err == nil {
		t.Fatal("resolving an accepted row must fail")
	}
}

func TestContentOfferedWithAnotherHashNeverStandsInForTheRow(t *testing.T) {
	e := ledgertest.NewScenario(t)
	ctx := context.Background()
	in, sealed := ledgertest.Intent(2, ledger.Email, e.Clock.Now(), ledgertest.ScenarioTTL)
	// A racing claim with other content stored its blob first.
	other := ledgertest.Message(2, ledger.Email)
	other.Body = "another rendering"
	otherHash := ledger.ContentHash(in.TemplateID, in.TemplateVersion, other)
	if _, err := e.Content.Put(ctx, in.Key()+":"+otherHash, ledgertest.Seal(other), in.ExpiresAt); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cases.Claim(ctx, in, sealed, "claim/req-1"); err != nil {
		t.Fatal(err)
	}
	d, err := e.Cases.Dispatch(ctx, in.Key(), "dispatch/req-1")
	if err != nil || d.Outcome != ledger.OutcomeAccepted {
		t.Fatalf("dispatch: %s %v", d.Outcome, err)
	}
	if s := e.Transport.Sent; len(s) != 1 || s[0].ContentHash != in.ContentHash || s[0].Message.Body == other.Body {
		t.Fatalf("sent %+v", s)
	}
}
