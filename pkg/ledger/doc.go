// Package ledger is the domain of the reset-notification delivery-claim ledger.
//
// A logical message is identified by (purpose, challenge id, channel). Its
// dedupe key is derived from those immutable business inputs only, so an SQS
// redelivery or a template change never becomes permission to notify again.
// The ledger claims the key with a conditional create before any side effect,
// moves the row through the states of the one transition table in state.go,
// and appends every transition to an append-only, hash-chained history.
//
// The package imports no AWS SDK. It defines the ports (Store, ContentStore,
// Opener, Transport and a clock function) and the use cases on Service;
// adapters live in sibling packages.
package ledger
