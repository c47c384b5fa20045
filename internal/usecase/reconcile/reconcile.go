// Package reconcile sweeps dispatching and unknown entries and hands back
// what no dispatch picked up (functions/reconcile).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/resetledger/resetledger/internal/usecase/pacing"
	"github.com/resetledger/resetledger/internal/usecase/sending"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Reconcile sweeps entries stuck in dispatching past their lease (to unknown)
// and due unknown entries, applying the transport's policy: a same-key retry
// inside the window the transport honors, a lookup where supported, and
// otherwise quarantine for an explicit decision. It never turns unknown into
// accepted or rejected without transport evidence. At most limit entries per
// state are handled per call.
func (r *Reconciler) Reconcile(ctx context.Context, w ledger.Worker, limit int) (ledger.SweepReport, error) {
	var rep ledger.SweepReport
	now := r.core.Now()
	err := rep.Open(ctx, r.core.Store(), "reconcile", ledger.Dispatching, now, limit, func(e ledger.Entry) (string, error) {
		c, err := r.core.Transition(e, ledger.Unknown, w, "lease expired without a recorded outcome", func(n *ledger.Entry) {
			n.LeaseUntil = time.Time{}
			n.NextCheckAt = now
			n.Reason = "lease expired without a recorded outcome"
		})
		if err == nil {
			_, err = r.core.Write(ctx, c)
		}
		return "dispatching->unknown", err
	})
	if err != nil {
		return rep, err
	}
	err = rep.Open(ctx, r.core.Store(), "reconcile", ledger.Unknown, now, limit, func(e ledger.Entry) (string, error) {
		return r.resolveUnknown(ctx, e, w)
	})
	return rep, err
}

// resolveUnknown applies the reconcile policy of the entry's transport.
func (r *Reconciler) resolveUnknown(ctx context.Context, e ledger.Entry, w ledger.Worker) (string, error) {
	now := r.core.Now()
	tr, ok := r.sender.Transport(e.Identity.Channel)
	if !ok {
		return "", fmt.Errorf("reconcile %s: %s: %w", e.Key, e.Identity.Channel, ledger.ErrNoTransport)
	}
	caps := tr.Capabilities()

	if caps.Events {
		// An event may have arrived while the entry was still dispatching:
		// it was kept in the history, and is the evidence now.
		if ev, ok := e.ProviderEvidence(); ok {
			_, err := r.core.AcceptOnEvidence(ctx, e, w, ev, "reconcile")
			return "unknown->accepted (provider event)", err
		}
		if now.Before(e.LastAttemptAt().Add(r.core.Policy().SettlePeriod)) {
			return "waiting (provider events settle period)", r.recheck(ctx, e, w, now, "reconcile: no provider event yet; waiting for the settle period")
		}
		if caps.IdempotencyWindow == 0 && !caps.Lookup {
			return "unknown->quarantined", r.core.Quarantine(ctx, e, w, fmt.Sprintf("no provider event within the settle period of %s, and the transport has no idempotency key or lookup; outcome unknown, needs an operator decision", r.core.Policy().SettlePeriod))
		}
	}

	if lk, ok := tr.(ledger.Looker); ok && caps.Lookup {
		ack, found, err := lk.Lookup(ctx, e.Key)
		if err != nil {
			return "", fmt.Errorf("reconcile %s: lookup: %w", e.Key, err)
		}
		if found {
			_, err := r.core.Decide(ctx, e, ledger.Accepted, w, "reconcile: transport lookup found the message", ack.ID)
			return "unknown->accepted (lookup)", err
		}
		if now.Before(e.FirstAttemptAt.Add(r.core.Policy().SettlePeriod)) {
			return "waiting (lookup settle period)", r.recheck(ctx, e, w, now, "reconcile: lookup found nothing yet; waiting for the settle period")
		}
		// Settled and not found: fall through to the retry or quarantine policy.
	}

	if caps.IdempotencyWindow > 0 {
		switch {
		case r.core.ExpiredAt(e.ExpiresAt, now):
			return "unknown->quarantined", r.core.Quarantine(ctx, e, w, "same-key retry not allowed: challenge expired; outcome unknown")
		case e.Attempts >= r.core.Policy().MaxAttempts:
			return "unknown->quarantined", r.core.Quarantine(ctx, e, w, fmt.Sprintf("same-key retry budget of %d attempts spent; outcome unknown", r.core.Policy().MaxAttempts))
		case !now.Add(r.core.Policy().Lease + r.core.Policy().ExpiryMargin).Before(e.FirstAttemptAt.Add(caps.IdempotencyWindow)):
			// The retry must reach the provider before it forgets the key:
			// an attempt may take up to its lease (the next look is pushed
			// past it), and the margin covers skew between the clock that
			// recorded the first attempt, this one and the provider's.
			return "unknown->quarantined", r.core.Quarantine(ctx, e, w, "transport idempotency window passed, or would before a retry could finish within its lease; outcome unknown")
		}
		return r.retry(ctx, e, tr, w, now.Add(r.core.Policy().Lease))
	}
	return "unknown->quarantined", r.core.Quarantine(ctx, e, w, "transport has no idempotency key or lookup; outcome unknown, needs an operator decision")
}

// recheck moves the entry's next look later without a state change.
func (r *Reconciler) recheck(ctx context.Context, e ledger.Entry, w ledger.Worker, now time.Time, reason string) error {
	c := r.core.Record(e, ledger.KindRecheck, ledger.Unknown, w, reason, func(n *ledger.Entry) {
		n.NextCheckAt = now.Add(r.core.Policy().RecheckAfter)
	})
	_, err := r.core.Write(ctx, c)
	return err
}

// retry makes another attempt under the same idempotency key. The attempt is
// recorded (and the next look pushed past the lease) before the send, so a
// crash during the retry leaves an unknown entry with an honest attempt count.
// The transport call is cut at until (the lease the window check allowed it)
// or at the send deadline, whichever comes first.
func (r *Reconciler) retry(ctx context.Context, e ledger.Entry, tr ledger.Transport, w ledger.Worker, until time.Time) (string, error) {
	msg, err := r.sender.OpenContent(ctx, e)
	if errors.Is(err, ledger.ErrContentUnavailable) || errors.Is(err, ledger.ErrNotFound) {
		return "unknown->quarantined", r.core.Quarantine(ctx, e, w, "same-key retry impossible: sealed content unavailable; outcome unknown")
	}
	if err != nil {
		return "", err
	}
	now := r.core.Now() // after the content read: the write's expiry condition uses the clock of the write
	c := r.core.Record(e, ledger.KindRetry, ledger.Unknown, w, "reconcile: same-key retry inside the transport's idempotency window", func(n *ledger.Entry) {
		n.Attempts++
		n.NextCheckAt = now.Add(r.core.Policy().Lease)
	})
	c.NotExpiredBy = now.Add(r.core.Policy().ExpiryMargin)
	e, err = r.core.Write(ctx, c)
	if err != nil {
		return "", err
	}
	// The write's answer can come back late, as dispatch's begin can: the
	// retry is sent only if the challenge still counts as unexpired now.
	if r.core.ExpiredAt(e.ExpiresAt, r.core.Now()) {
		return "unknown->quarantined", r.core.Quarantine(ctx, e, w, "same-key retry not made: challenge expired before it could start; outcome unknown")
	}
	callCtx, cancel := context.WithTimeout(ctx, until.Sub(r.core.Clock()))
	ack, err := r.sender.Attempt(callCtx, e, tr, msg)
	cancel()
	to, out, reason, ackID := sending.OutcomeOf(ack, err)
	var ns *ledger.NotSent
	if errors.As(err, &ns) {
		// The provider (or the send deadline, or the proof) proves this
		// retry sent nothing; the earlier attempt is still unknown.
		reason = "not sent: " + ns.Code
	}
	if to == ledger.Unknown {
		// Still no answer: the entry stays unknown; record the attempt's result.
		c := r.core.Record(e, ledger.KindRetry, ledger.Unknown, w, "reconcile: same-key retry got "+reason, func(n *ledger.Entry) {
			n.NextCheckAt = r.core.Now().Add(r.core.Policy().RecheckAfter)
		})
		_, err := r.core.Write(ctx, c)
		return "unknown (retry unanswered)", err
	}
	_, err = r.sender.RecordOutcome(ctx, e, to, out, "reconcile: same-key retry: "+reason, ackID, w)
	return "unknown->" + string(to) + " (same-key retry)", err
}

// Stats is ReadStats over the reconciler's store, now: the figures reconcile
// publishes after each sweep.
func (r *Reconciler) Stats(ctx context.Context) (map[ledger.State]ledger.StateStats, error) {
	return ledger.ReadStats(ctx, r.core.Store(), r.core.Now())
}

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
func (r *Reconciler) Redrive(ctx context.Context, limit int) (ledger.SweepReport, error) {
	var rep ledger.SweepReport
	now := r.core.Now()
	late := now.Add(-r.core.Policy().RedriveAfter)
	var marks ledger.Marks
	rule := pacing.RuleFor(r.core.Policy())
	if r.progress != ledger.NoProgress {
		m, err := r.progress.Marks(ctx)
		if err != nil {
			// Without marks every due entry is handed back: the old cost, never a lost entry.
			rep.Errors = append(rep.Errors, fmt.Errorf("redrive: read the dispatch marks: %w", err))
		}
		marks = m
	}
	if !marks.Redriven.IsZero() && rule.QueueWillDeliver(marks.Queue, marks.Redriven, now) {
		rep.Count("skipped: the queue still owes the last hand-backs")
		return rep, nil
	}
	handed := 0
	redrive := func(e ledger.Entry) (string, error) {
		switch {
		case e.UpdatedAt.After(late) || r.core.ExpiredAt(e.ExpiresAt, now):
			return "", nil
		case e.State == ledger.Claimed && rule.StreamWillDeliver(marks.Stream, e.UpdatedAt, now):
			return "claimed: the stream still owes it", nil
		case e.State == ledger.Deferred && rule.QueueWillDeliver(marks.Queue, e.NextAttemptAt, now):
			return "deferred: the queue still owes its wake-up", nil
		}
		handed++
		return string(e.State) + "->redriven", r.scheduler.Schedule(ctx, e.Key, now)
	}
	if err := rep.Open(ctx, r.core.Store(), "redrive", ledger.Deferred, late, limit, redrive); err != nil {
		return rep, err
	}
	// Claimed entries are indexed at their re-drive time (RedriveAt: the
	// claim plus RedriveAfter) or their expiry if sooner: list only those
	// due, and while the stream moves, only those it no longer owes (due
	// by its lateness before now). Claims not yet due are never read.
	dueBy := now
	if l := marks.Stream; now.Sub(l.Moved()) < r.core.Policy().RedriveAfter && l.Behind > 0 {
		dueBy = now.Add(-l.Behind)
	}
	err := rep.Open(ctx, r.core.Store(), "redrive", ledger.Claimed, dueBy, limit, redrive)
	if handed > 0 && r.progress != ledger.NoProgress {
		if perr := r.progress.Redriven(ctx, now); perr != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("redrive: record the hand-back: %w", perr))
		}
	}
	return rep, err
}

// Reconciler sweeps dispatching and unknown entries and hands back what no
// dispatch picked up (functions/reconcile).
type Reconciler struct {
	core      ledger.Core
	sender    sending.Sender
	scheduler ledger.Scheduler
	progress  ledger.Progress
}

// New builds the reconcile use case from the Core, what a same-key retry
// sends with (a transport per channel; the opener and, where the transport
// reports events, the proofs, for a transport that allows a same-key
// retry), the Scheduler that hands entries back, and the dispatch marks
// (ledger.NoProgress: every due entry is handed back).
func New(core ledger.Core, send sending.Ports, scheduler ledger.Scheduler, progress ledger.Progress) (*Reconciler, error) {
	// Reconcile sends only a same-key retry, through a transport that
	// honours an idempotency key.
	snd, err := sending.New("reconcile", send, func(caps ledger.Capabilities) bool { return caps.IdempotencyWindow > 0 })
	if err != nil {
		return nil, err
	}
	need := ledger.PortCheck{UseCase: "reconcile"}
	need.Port(scheduler != nil && scheduler != ledger.NoScheduler, "Scheduler (re-drive hands entries back through it)")
	need.Port(progress != nil, "Progress (NoProgress: every due entry is handed back)")
	if err := need.Err(); err != nil {
		return nil, err
	}
	r := &Reconciler{core: core, sender: snd, scheduler: scheduler, progress: progress}
	r.sender = r.sender.For(&r.core)
	return r, nil
}
