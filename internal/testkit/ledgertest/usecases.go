package ledgertest

import (
	"context"
	"errors"
	"time"

	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/internal/usecase/dispatch"
	"github.com/resetledger/resetledger/internal/usecase/evidence"
	"github.com/resetledger/resetledger/internal/usecase/reconcile"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// UseCases is a test's way to the use cases: its Ports, from which every
// call builds the use case it needs afresh with that use case's own
// constructor, so a test may change a port or the policy between calls. A
// measured path (a benchmark, a handler under load) builds its use case
// once instead, with Claimer, Dispatcher and the rest, as a function does.
//
// A port left nil is the test's way of saying the control is off: it is
// given as the explicit off value (ledger.NoBudget, NoProgress, NoTimeline,
// ReadRowAlone) before the constructor sees it; a nil Scheduler becomes one
// that fails every hand-back. The constructors' own refusal of a missing
// port is tested with the constructors themselves (ledger's
// TestConstructorsNameMissingPorts), not through this type.
type UseCases struct {
	assemble.Ports
}

// errNoScheduler is what a test's nil Scheduler answers.
var errNoScheduler = errors.New("ledgertest: this test gave no Scheduler")

type failingScheduler struct{}

func (failingScheduler) Schedule(context.Context, string, time.Time) error { return errNoScheduler }

// Filled returns u's ports with every nil control given its off value.
func (u *UseCases) Filled() assemble.Ports {
	p := u.Ports
	if p.Budget == nil {
		p.Budget = ledger.NoBudget
	}
	if p.Scheduler == nil {
		p.Scheduler = failingScheduler{}
	}
	if p.Progress == nil {
		p.Progress = ledger.NoProgress
	}
	if p.Timeline == nil {
		p.Timeline = ledger.NoTimeline
	}
	if p.FirstReads == nil {
		p.FirstReads = ledger.ReadRowAlone
	}
	return p
}

// Claimer builds the claim use case.
func (u *UseCases) Claimer() (*claim.Claimer, error) { return assemble.Claimer(u.Filled()) }

// Dispatcher builds the dispatch use case.
func (u *UseCases) Dispatcher() (*dispatch.Dispatcher, error) { return assemble.Dispatcher(u.Filled()) }

// Reconciler builds the reconcile use case.
func (u *UseCases) Reconciler() (*reconcile.Reconciler, error) {
	return assemble.Reconciler(u.Filled())
}

// EventRecorder builds the provider-events use case.
func (u *UseCases) EventRecorder() (*evidence.Recorder, error) {
	return assemble.EventRecorder(u.Filled())
}

// Claim is claim.Claimer.Claim.
func (u *UseCases) Claim(ctx context.Context, in ledger.Intent, sealed []byte, w ledger.Worker) (claim.Result, error) {
	c, err := u.Claimer()
	if err != nil {
		return claim.Result{}, err
	}
	return c.Claim(ctx, in, sealed, w)
}

// Dispatch is dispatch.Dispatcher.Dispatch.
func (u *UseCases) Dispatch(ctx context.Context, key string, w ledger.Worker) (ledger.DispatchResult, error) {
	d, err := u.Dispatcher()
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	return d.Dispatch(ctx, key, w)
}

// DispatchRow is dispatch.Dispatcher.DispatchRow.
func (u *UseCases) DispatchRow(ctx context.Context, row ledger.Entry, w ledger.Worker) (ledger.DispatchResult, error) {
	d, err := u.Dispatcher()
	if err != nil {
		return ledger.DispatchResult{}, err
	}
	return d.DispatchRow(ctx, row, w)
}

// RescheduleNotDue is dispatch.Dispatcher.RescheduleNotDue.
func (u *UseCases) RescheduleNotDue(ctx context.Context, res ledger.DispatchResult) error {
	d, err := u.Dispatcher()
	if err != nil {
		return err
	}
	return d.RescheduleNotDue(ctx, res)
}

// Read is dispatch.Dispatcher.Read.
func (u *UseCases) Read(ctx context.Context, src ledger.Source, t time.Time) error {
	d, err := u.Dispatcher()
	if err != nil {
		return err
	}
	return d.Read(ctx, src, t)
}

// Reconcile is reconcile.Reconciler.Reconcile.
func (u *UseCases) Reconcile(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error) {
	r, err := u.Reconciler()
	if err != nil {
		return ledger.SweepReport{}, err
	}
	return r.Reconcile(ctx, w, limit)
}

// Redrive is reconcile.Reconciler.Redrive.
func (u *UseCases) Redrive(ctx context.Context, limit int) (ledger.SweepReport, error) {
	r, err := u.Reconciler()
	if err != nil {
		return ledger.SweepReport{}, err
	}
	return r.Redrive(ctx, limit)
}

// ExpireSweep is expire.Expirer.ExpireSweep.
func (u *UseCases) ExpireSweep(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error) {
	x, err := assemble.Expirer(u.Filled())
	if err != nil {
		return ledger.SweepReport{}, err
	}
	return x.ExpireSweep(ctx, w, limit)
}

// RecordProviderEvent is evidence.Recorder.RecordProviderEvent.
func (u *UseCases) RecordProviderEvent(ctx context.Context, p ledger.ProviderEvent, w ledger.Worker) (ledger.EventResult, error) {
	r, err := u.EventRecorder()
	if err != nil {
		return ledger.EventResult{}, err
	}
	return r.RecordProviderEvent(ctx, p, w)
}

// Resolve is resolve.Resolver.Resolve.
func (u *UseCases) Resolve(ctx context.Context, key string, d ledger.Decision, reason, evidence string, w ledger.Worker) (ledger.Entry, error) {
	r, err := assemble.Resolver(u.Filled())
	if err != nil {
		return ledger.Entry{}, err
	}
	return r.Resolve(ctx, key, d, reason, evidence, w)
}

// Stats is ledger.ReadStats at the ports' clock.
func (u *UseCases) Stats(ctx context.Context) (map[ledger.State]ledger.StateStats, error) {
	return ledger.ReadStats(ctx, u.Store, u.Clock())
}
