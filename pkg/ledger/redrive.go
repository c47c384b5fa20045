package ledger

import (
	"context"
	"fmt"
)

// Redrive hands back to dispatch the entries that are due for dispatch and
// that no dispatch picked up within Policy.RedriveAfter, and that no source
// can still deliver (see Progress):
//   - a claimed entry once it has waited longer than the stream's lateness
//     plus REDRIVE_AFTER (its record was lost, or given up after its
//     retries), or the stream stopped moving;
//   - a deferred entry past its next attempt once the dispatch queue has
//     passed that time (a lost wake-up) or stalled.
//
// A hand-back is itself a queue message: while the queue has not passed the
// previous pass's hand-backs, nothing is handed back again. Redrive writes
// nothing to the ledger: the Scheduler delivers the key to dispatch, whose
// conditional write decides as for any other delivery. Expired challenges
// are left to the expire sweep. At most limit entries per state are handed
// back per call.
func (s *Reconciler) Redrive(ctx context.Context, limit int) (SweepReport, error) {
	var rep SweepReport
	now := s.core.Now()
	late := now.Add(-s.core.Policy().RedriveAfter)
	var marks Marks
	rule := s.core.HandBack()
	if s.progress != NoProgress {
		m, err := s.progress.Marks(ctx)
		if err != nil {
			// Without marks every due entry is handed back: the old cost, never a lost entry.
			rep.Errors = append(rep.Errors, fmt.Errorf("redrive: read the dispatch marks: %w", err))
		}
		marks = m
	}
	if !marks.Redriven.IsZero() && rule.queueWillDeliver(marks.Queue, marks.Redriven, now) {
		rep.count("skipped: the queue still owes the last hand-backs")
		return rep, nil
	}
	handed := 0
	redrive := func(e Entry) (string, error) {
		switch {
		case e.UpdatedAt.After(late) || s.core.ExpiredAt(e.ExpiresAt, now):
			return "", nil
		case e.State == Claimed && rule.streamWillDeliver(marks.Stream, e.UpdatedAt, now):
			return "claimed: the stream still owes it", nil
		case e.State == Deferred && rule.queueWillDeliver(marks.Queue, e.NextAttemptAt, now):
			return "deferred: the queue still owes its wake-up", nil
		}
		handed++
		return string(e.State) + "->redriven", s.scheduler.Schedule(ctx, e.Key, now)
	}
	if err := s.core.SweepOpen(ctx, &rep, "redrive", Deferred, late, limit, redrive); err != nil {
		return rep, err
	}
	// Claimed entries are indexed at their re-drive time (RedriveAt: the
	// claim plus RedriveAfter) or their expiry if sooner: list only those
	// due, and while the stream moves, only those it no longer owes (due
	// by its lateness before now). Claims not yet due are never read.
	dueBy := now
	if l := marks.Stream; now.Sub(l.moved()) < s.core.Policy().RedriveAfter && l.Behind > 0 {
		dueBy = now.Add(-l.Behind)
	}
	err := s.core.SweepOpen(ctx, &rep, "redrive", Claimed, dueBy, limit, redrive)
	if handed > 0 && s.progress != NoProgress {
		if perr := s.progress.Redriven(ctx, now); perr != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("redrive: record the hand-back: %w", perr))
		}
	}
	return rep, err
}
