package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// NewStore returns a fresh, empty store for one subtest.
type NewStore func(t *testing.T) ledger.Store

// Env is the use cases wired for contract tests over a store.
type Env struct {
	Cases     *UseCases
	Store     ledger.Store
	Content   *memstore.Content
	Clock     *Clock
	Transport *Transport
	// Proofs signs attempts and verifies provider events (Cases.Proofs).
	Proofs *attemptproof.Local
}

// NewEnv wires the use cases over store with a memory content store, a plain
// opener and one scriptable transport for both channels.
func NewEnv(store ledger.Store) *Env {
	clk := NewClock()
	tr := &Transport{}
	content := &memstore.Content{}
	proofs := &attemptproof.Local{Key: []byte("ledgertest attempt-proof key")}
	return &Env{
		Store: store, Content: content, Clock: clk, Transport: tr, Proofs: proofs,
		Cases: &UseCases{Ports: assemble.Ports{
			Store: store, Content: content, Opener: PlainOpener{}, Clock: clk.Now, Proofs: proofs,
			Transports: map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr},
			Policy:     ledger.DefaultPolicy(),
		}},
	}
}

// claim claims intent i (see Intent) on ch, expiring in ten minutes, as
// contractWorker, and fails the test if the claim returns an error.
func (env *Env) claim(t *testing.T, i int, ch ledger.Channel) (ledger.Intent, []byte, claim.Result) {
	t.Helper()
	in, sealed := Intent(i, ch, env.Clock.Now(), 10*time.Minute)
	res, err := env.Cases.Claim(context.Background(), in, sealed, contractWorker)
	if err != nil {
		t.Fatal(err)
	}
	return in, sealed, res
}

// contractWorker is the worker identity the contract's calls record.
const contractWorker = ledger.Worker("contract/test")

// property is one property of a contract suite: a test of every
// implementation that newImpl makes.
type property[F any] struct {
	name string
	test func(t *testing.T, newImpl F)
}

// runProperties runs each property as a subtest of its name.
func runProperties[F any](t *testing.T, props []property[F], newImpl F) {
	for _, p := range props {
		t.Run(p.name, func(t *testing.T) { p.test(t, newImpl) })
	}
}

// storeContract is the contract every ledger.Store must pass: one function
// per property, each run by RunStoreContract as a subtest of that name.
var storeContract = []property[NewStore]{
	{"claim round-trips every field", claimRoundTrips},
	{"get of a missing key is ErrNotFound", getMissingIsNotFound},
	{"create of an existing key is ErrConflict and returns the existing row", createExistingIsConflict},
	{"apply is compare-and-set on state, version and expiry", applyIsCompareAndSet},
	{"a not-sent answer defers the row, and the deferral round-trips", notSentDefers},
	{"a create or apply repeated after its first attempt landed succeeds once", repeatedWriteLandsOnce},
	{"history is append-only even if the caller drops entries", historyIsAppendOnly},
	{"provider-event entries round-trip and verify", providerEventsRoundTrip},
	{"open index lists only due open rows, oldest first, and drops closed rows", openIndexListsDueOpenRows},
	{"due times are the open index's, soonest first, due rows only", dueTimesFromTheIndex},
	{"claims are due at their re-drive time; expired claims are found by expiry", claimsDueForRedriveThenExpiry},
	{"a claim moved to dispatching is listed, timed and counted as dispatching at its lease", dispatchingFromClaimIsDispatching},
	{"32 goroutines claiming 200 identities make exactly 200 rows", concurrentClaimsMakeOneRowEach},
	{"two workers racing claimed to dispatching: exactly one sends", racingDispatchSendsOnce},
	{"clock past expiry while claimed: dispatch refuses and records expired", expiredClaimIsNotSent},
	{"same identity with a changed content hash is blocked and recorded", changedContentIsBlocked},
	{"unknown stays unknown without a recorded decision", unknownStaysUnknown},
}

// RunStoreContract runs the contract every ledger.Store must pass, including
// the concurrency cases of the release gate that belong at the database
// boundary. Each property is a subtest with a fresh store from newStore.
func RunStoreContract(t *testing.T, newStore NewStore) {
	runProperties(t, storeContract, newStore)
}

func assertSameEntry(t *testing.T, want, got ledger.Entry) {
	t.Helper()
	if want.Key != got.Key || want.Identity != got.Identity || want.State != got.State || want.Version != got.Version ||
		want.ContentHash != got.ContentHash || want.DestinationRef != got.DestinationRef || want.SubjectRef != got.SubjectRef ||
		want.TemplateID != got.TemplateID || want.TemplateVersion != got.TemplateVersion ||
		want.PolicyVersion != got.PolicyVersion || !want.ExpiresAt.Equal(got.ExpiresAt) ||
		!want.CreatedAt.Equal(got.CreatedAt) || !want.UpdatedAt.Equal(got.UpdatedAt) ||
		!want.RedriveAt.Equal(got.RedriveAt) || !want.LeaseUntil.Equal(got.LeaseUntil) || !want.NextCheckAt.Equal(got.NextCheckAt) ||
		!want.FirstAttemptAt.Equal(got.FirstAttemptAt) || !want.RetainUntil.Equal(got.RetainUntil) ||
		want.Attempts != got.Attempts || want.AckID != got.AckID || want.Reason != got.Reason ||
		want.Mismatches != got.Mismatches || want.Workflow.Kind != got.Workflow.Kind ||
		!want.NextAttemptAt.Equal(got.NextAttemptAt) || !want.SlotAt.Equal(got.SlotAt) || want.NotSentCode != got.NotSentCode ||
		fmt.Sprint(want.Workflow.Order) != fmt.Sprint(got.Workflow.Order) || len(want.History) != len(got.History) {
		t.Fatalf("entry did not round-trip:\nwant %+v\ngot  %+v", want, got)
	}
	for i := range want.History {
		a, b := want.History[i], got.History[i]
		if a.ID != b.ID || a.Kind != b.Kind || a.From != b.From || a.To != b.To || !a.At.Equal(b.At) || a.Worker != b.Worker ||
			a.Reason != b.Reason || a.PolicyVersion != b.PolicyVersion || a.Attempt != b.Attempt || a.AckID != b.AckID ||
			a.ContentHash != b.ContentHash || a.Prev != b.Prev || a.Hash != b.Hash ||
			a.Code != b.Code || !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			t.Fatalf("history entry %d did not round-trip:\nwant %+v\ngot  %+v", i, a, b)
		}
	}
}

// RunContentContract runs the contract every ledger.ContentStore must pass.
func RunContentContract(t *testing.T, newContent func(t *testing.T) ledger.ContentStore) {
	ctx := context.Background()
	t.Run("put once, get, delete", func(t *testing.T) {
		c := newContent(t)
		exp := time.Now().Add(10 * time.Minute)
		if wrote, err := c.Put(ctx, "k1", []byte("sealed-1"), exp); err != nil || !wrote {
			t.Fatalf("first put: %v %v", wrote, err)
		}
		if wrote, err := c.Put(ctx, "k1", []byte("sealed-2"), exp); err != nil || wrote {
			t.Fatalf("second put must not overwrite: %v %v", wrote, err)
		}
		got, err := c.Get(ctx, "k1")
		if err != nil || string(got) != "sealed-1" {
			t.Fatalf("get: %q %v", got, err)
		}
		if err := c.Delete(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Get(ctx, "k1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if err := c.Delete(ctx, "k1"); err != nil {
			t.Fatalf("second delete: %v", err)
		}
	})
}
