// Package gate is the release gate: load through the real handlers on the
// emulator, with failures injected (TestGate), bad input (TestBadInput) and
// a burst against throttling providers (TestSurge), and the accounting that
// proves no intent was lost, sent twice, or sent late.
//
// Everything lives in the package's tests, which drive the real Lambda
// handlers through internal/testkit/pipelinetest:
//
//	TestGate          the load scenario with faults and the accounting table
//	                  (GATE_INTENTS intents, default 200; make gate runs 2000)
//	TestBadInput      every case of testdata/bad through the real handlers
//	TestSurge         the burst (SURGE_INTENTS, default 1,000; make surge
//	                  runs 10,000), below
//
// See RELIABILITY.md for the scenario, the injected faults and the numbers
// of the last full-size run.
//
// The surge (surge_test.go, TestSurge): N notification intents
// published in one burst through the real claim, dispatch, reconcile and
// expire handlers on the emulator (internal/testkit/pipelinetest), with both providers
// throttling above the send-rate budget R and a tenth of the challenges
// expiring during the run. It fails unless nothing was sent twice, nothing
// ended quarantined or unknown, every message was accepted before its expiry
// or expired with the reason it was not sent, the providers never accepted
// more than 1.1 × R in any 10 s window, and no row was stopped by a send
// limit: the limits are on (internal/testkit/pipelinetest's Options.Limits), every
// intent has an address of its own and a subject_ref (its own, or a repeat
// subject's, below), and the summary line reports limited=N, which must be
// 0 (SURGE_LIMITS=off runs without the limits and without repeat subjects,
// to compare what the limits cost per message with a SURGE_REPEATS=0 run).
//
// Supersession under a backlog (repeat_test.go): a share of the subjects
// (SURGE_REPEATS, default 0.1) ask three times on one channel, each ask
// expiring later than the one before and published a third of the
// channel's burst after it. The newest must be accepted and taken once;
// every older one must have begun its send before a newer ask was claimed
// (within supersedeRace, 1 s: the calls between dispatch's last read of
// the newest challenge and its dispatching write) or have ended
// suppressed, "superseded by challenge <a newer ask>", never taken; and at
// least one must have been superseded, or the run showed no backlog. The
// summary line reports repeat_subjects, superseded,
// older_sent_before_newer, older_sent_in_race (begun within that second),
// older_sent_waiting (must be 0) and newest_sent.
//
// The drain (against the physical minimum: per channel, its accepted
// messages and the send slots its superseded rows had booked, ÷ R) is a
// speed: every run prints it, and only `make surge` (SURGE_DRAIN_CHECK=1)
// fails above 1.25 ×, so that a busy machine cannot fail `make test` with
// a correct system.
//
// SURGE_PACE=quiet (`make surge-quiet`) publishes the same traffic at a
// pace instead: R intents a second in all, half of each channel's budget,
// none short-lived, so nothing waits for a slot and nothing expires. Its
// cost per accepted message is what the same traffic costs in a quiet
// hour, and make bench sets it beside the burst's. The checks are the same
// but for the drain (the pace sets it) and the supersession of repeat
// subjects (at a quiet pace an older ask is usually sent first).
//
// `make surge` runs it at full size (SURGE_INTENTS, default 10,000); plain
// `go test ./gate -run TestSurge` runs 1,000 intents, and so does `make surge-check`, part
// of `make test`. R is 10 sends/s per channel unless SURGE_RATE says
// otherwise. The handlers run in the test's process, so the test skips
// itself under -race (the race detector would slow them down and the drain
// would measure that). RELIABILITY.md has the figures and how they were
// obtained.
package gate
