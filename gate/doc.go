// Package gate is the release gate: failure injection under load against the
// emulator, a checked-in bad-input corpus, and the accounting that proves no
// intent was lost, sent twice, or sent late.
//
// Everything lives in the package's tests, which drive the real four Lambda
// handlers through internal/pipeline:
//
//	TestGate          the load scenario with faults and the accounting table
//	                  (GATE_INTENTS intents, default 200; make gate runs 2000)
//	TestBadInput      every case of testdata/bad through the real handlers
//
// See RELIABILITY.md for the scenario, the injected faults and the numbers
// of the last full-size run.
package gate
