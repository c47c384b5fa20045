package ledger

import (
	"context"
	"errors"
	"time"
)

// The explicit off values: a control a stage turns off is given as one of
// these, never as a nil, so a wiring slip is an error at start (a
// *MissingPortError), never a control silently off.
var (
	// NoBudget paces nothing: every send gets its slot at once.
	NoBudget Budget = noBudget{}
	// NoScheduler hands nothing back: a deferred entry waits for reconcile's
	// re-drive, which needs a real Scheduler.
	NoScheduler Scheduler = noScheduler{}
	// NoProgress keeps no marks: re-drive hands back every due entry, and
	// dispatch holds its send slot on the entry.
	NoProgress Progress = noProgress{}
	// NoTimeline finds no older challenge to supersede when an admission
	// is refused: their counts wait until they wake.
	NoTimeline Timeline = noTimeline{}
)

// errOff is what an off value answers where it cannot stand in.
var errOff = errors.New("ledger: this port is switched off")

type noBudget struct{}

func (noBudget) Reserve(_ context.Context, _ Channel, now, _ time.Time) (time.Time, error) {
	return now, nil
}

type noScheduler struct{}

func (noScheduler) Schedule(context.Context, string, time.Time) error { return errOff }

type noProgress struct{}

func (noProgress) Lagging(context.Context, time.Duration, time.Time, time.Time) (Lag, error) {
	return Lag{}, nil
}
func (noProgress) Advance(context.Context, time.Time, time.Time) error { return nil }
func (noProgress) Redriven(context.Context, time.Time) error           { return nil }
func (noProgress) Marks(context.Context) (Marks, error)                { return Marks{}, nil }
func (noProgress) Seen() Marks                                         { return Marks{} }

type noTimeline struct{}

func (noTimeline) ListByRef(context.Context, RefKind, string, time.Time, int) ([]Entry, error) {
	return nil, nil
}
