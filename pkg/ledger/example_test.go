package ledger_test

import (
	"context"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Claim an intent, then dispatch it: the claim records the row before any
// side effect, dispatch sends once under the dedupe key, records the
// transport's acknowledgement and purges the sealed content. A redelivery of
// the intent and a duplicate dispatch change nothing.
func Example() {
	ctx := context.Background()
	clock := ledgertest.NewClock()
	content := &memstore.Content{}
	transport := &ledgertest.Transport{}
	ports := assemble.Ports{
		Store:      &memstore.Store{},
		Content:    content,
		Opener:     ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{ledger.Email: transport},
		Clock:      clock.Now,
		Policy:     ledger.DefaultPolicy(),
		// No send-rate budget, no hand-backs, no marks, one read at a time:
		// each off explicitly.
		Budget: ledger.NoBudget, Scheduler: ledger.NoScheduler, Progress: ledger.NoProgress,
		FirstReads: ledger.ReadRowAlone,
	}
	claimer, err := assemble.Claimer(ports)
	if err != nil {
		panic(err)
	}
	dispatcher, err := assemble.Dispatcher(ports)
	if err != nil {
		panic(err)
	}

	in, sealed := ledgertest.Intent(1, ledger.Email, clock.Now(), 10*time.Minute)
	claim, err := claimer.Claim(ctx, in, sealed, "claim/req-1")
	if err != nil {
		panic(err)
	}
	fmt.Println("claim:", claim.Outcome, claim.Entry.State, "content stored:", content.Len())

	sent, err := dispatcher.Dispatch(ctx, claim.Entry.Key, "dispatch/req-1")
	if err != nil {
		panic(err)
	}
	e := sent.Entry
	fmt.Println("dispatch:", sent.Outcome, "ack:", e.AckID, "attempts:", e.Attempts, "content stored:", content.Len())

	again, _ := claimer.Claim(ctx, in, sealed, "claim/req-2")
	dup, _ := dispatcher.Dispatch(ctx, claim.Entry.Key, "dispatch/req-2")
	fmt.Println("redelivery:", again.Outcome, "duplicate dispatch:", dup.Outcome, "sends:", transport.Calls())

	for _, ev := range e.History {
		fmt.Printf("%s -> %s by %s: %s\n", ev.From, ev.To, ev.Worker, ev.Reason)
	}
	fmt.Println("history verifies:", e.Verify() == nil)
	// Output:
	// claim: claimed claimed content stored: 1
	// dispatch: accepted ack: msg-1 attempts: 1 content stored: 0
	// redelivery: duplicate duplicate dispatch: skipped sends: 1
	// none -> claimed by claim/req-1: intent claimed
	// claimed -> dispatching by dispatch/req-1: dispatch started
	// dispatching -> accepted by dispatch/req-1: transport accepted
	// history verifies: true
}
