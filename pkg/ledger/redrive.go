package ledger

import (
	"context"
	"errors"
)

// Redrive hands back to dispatch the rows that are due for dispatch and
// that no dispatch picked up within Policy.RedriveAfter: claimed rows (a
// lost or given-up stream record, a crashed batch) and deferred rows past
// their next attempt (a lost wake-up). It writes nothing to the ledger:
// the Scheduler delivers the key to dispatch, whose conditional write
// decides as for any other delivery. Expired challenges are left to the
// expire sweep. At most limit rows per state are handed back per call.
func (s *Service) Redrive(ctx context.Context, limit int) (SweepReport, error) {
	var rep SweepReport
	if s.Scheduler == nil {
		return rep, errors.New("redrive: no scheduler configured")
	}
	now := s.now()
	late := now.Add(-s.Policy.RedriveAfter)
	redrive := func(e Entry) (string, error) {
		if e.UpdatedAt.After(late) || s.expiredAt(e.ExpiresAt, now) {
			return "", nil
		}
		return string(e.State) + "->redriven", s.Scheduler.Schedule(ctx, e.Key, now)
	}
	if err := s.sweepOpen(ctx, &rep, "redrive", Deferred, late, limit, redrive); err != nil {
		return rep, err
	}
	// Claimed rows are indexed by expiry, not by when they were claimed:
	// list the open ones soonest-expiring first and take the late ones.
	err := s.sweepOpen(ctx, &rep, "redrive", Claimed, timeZero, limit, redrive)
	return rep, err
}
