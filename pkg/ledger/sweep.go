package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// SweepReport counts what one sweep did, by outcome.
type SweepReport struct {
	Seen    int
	Actions map[string]int
	// Errors holds per-entry failures; the sweep continues past them.
	Errors []error
}

func (r *SweepReport) Count(action string) {
	if r.Actions == nil {
		r.Actions = map[string]int{}
	}
	r.Actions[action]++
}

// Err joins the per-entry failures, or returns nil.
func (r SweepReport) Err() error { return errors.Join(r.Errors...) }

func (rep *SweepReport) note(action string, err error) {
	switch {
	case errors.Is(err, ErrConflict):
		rep.Count("skipped (changed concurrently)")
	case err != nil:
		rep.Errors = append(rep.Errors, err)
		rep.Count("error")
	default:
		rep.Count(action)
	}
}

// Open sweeps the entries of store in the open state st that are due by
// dueBy, up to limit (0: all of them): it counts each as seen and notes
// what each did: each returns the action it took, or "" for an entry it
// left alone. A failed listing ends the sweep with an error prefixed by op;
// an entry's failure is noted and the sweep goes on.
func (rep *SweepReport) Open(ctx context.Context, store Store, op string, st State, dueBy time.Time, limit int, each func(Entry) (string, error)) error {
	return rep.Rows(op, st, func() ([]Entry, error) { return store.ListOpen(ctx, st, dueBy, limit) }, each)
}

// Rows is Open over the entries list returns.
func (rep *SweepReport) Rows(op string, st State, list func() ([]Entry, error), each func(Entry) (string, error)) error {
	rows, err := list()
	if err != nil {
		return fmt.Errorf("%s: list %s: %w", op, st, err)
	}
	for _, e := range rows {
		rep.Seen++
		if action, err := each(e); action != "" || err != nil {
			rep.note(action, err)
		}
	}
	return nil
}
