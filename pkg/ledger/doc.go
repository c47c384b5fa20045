// Package ledger is the domain of the reset-notification delivery-claim ledger.
//
// A logical message is identified by (purpose, challenge id, channel). Its
// dedupe key is derived from those immutable business inputs only, so an SQS
// redelivery or a template change never becomes permission to notify again.
// The ledger claims the key with a conditional create before any side effect,
// moves the entry through the states of the one transition table in state.go,
// and appends every transition to an append-only, hash-chained history.
//
// An Entry is that message's entry in the ledger: its state, its deadlines
// and its history. A Store keeps each entry as one row of a table; the
// domain's comments say "entry" for the value and "row" only for what a
// store holds.
//
// The package imports no AWS SDK. It defines the ports (Store, ContentStore,
// Opener, Transport, a clock function and the rest, gathered in Ports) and
// one type per use case, each built by its constructor from the ports it
// uses: Claimer, Dispatcher, Reconciler, Expirer, EventRecorder and
// Resolver. Adapters live in sibling packages.
package ledger
