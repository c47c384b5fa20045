package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/fingerprint"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/internal/usecase/resolve"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// ports are the ports one invocation's use case is built from: ports that
// park at every call. As in a deployed function, each function builds only
// its own use case from them (body), with its constructor.
func (s *sim) ports(inv *invocation) assemble.Ports {
	ports := assemble.Ports{
		Store:      &storePort{inv},
		Content:    &contentPort{inv},
		Opener:     &openerPort{inv},
		Transports: map[ledger.Channel]ledger.Transport{},
		Scheduler:  &schedulerPort{inv},
		Sleep:      inv.sleep,
		Jitter:     s.jitter.Float64,
		Clock:      inv.portClock,
		Policy:     s.policy(inv),
		NewID:      s.newID,
		Progress:   progressPort{s},
		Proofs:     s.proofs,
		// The send limits: counters and newest challenges behind ports,
		// the fingerprint key and the numbering plan in process; the
		// policy and the counters each function holds as the stack's
		// (limitsOf).
		Challenges:   &challengesPort{inv},
		Fingerprints: &fingerprint.Local{Key: fingerprintKey},
		NumberOf:     s.numberPort,
		Timeline:     &storePort{inv},
		// The stack's dispatch reads the row, the newest challenge and
		// the content in one batch (only the dispatcher uses it).
		FirstReads: &firstReadsPort{inv},
	}
	ports.Limits, ports.Limiter = limitsOf(inv.fn, s.w.sendLimits, &limiterPort{inv})
	if s.mutant == ProofShapeOnly && inv.fn == fnEvents {
		ports.Proofs = lengthOnly{s.proofs}
	}
	for _, ch := range ledger.Channels {
		ports.Transports[ch] = &transportPort{inv: inv, p: s.providers[ch]}
	}
	ports.Budget = ledger.NoBudget
	if s.budget != nil {
		ports.Budget = &budgetPort{inv}
	}
	return ports
}

// limitsOf is the send-limit policy and counters function fn holds, as the
// stack wires them (internal/wire.Build, internal/wire/dispatchports): dispatch
// counts with the counters and gives back; claim holds the policy (it notes
// each subject's newest challenge) and no counters;
// expire, reconcile, events and the operator hold no limits table, so no
// policy and no counters. Only dispatch gives a count back: an unsent row
// another function ends keeps its count, too high, never too low
// (docs/design.md, "Counts are exact").
func limitsOf(fn function, l ledger.Limits, counters ledger.Limiter) (ledger.Limits, ledger.Limiter) {
	switch fn {
	case fnDispatch:
		return l, counters
	case fnClaim:
		return l, nil
	}
	return ledger.Limits{}, nil
}

// body is what the invocation does, as the function's handler would, and
// the log line the handler would write.
//
// A use case the ports cannot build is a bug of the simulator's wiring: it
// panics.
func (s *sim) body(inv *invocation, p assemble.Ports) func(ctx context.Context) (string, error) {
	t := inv.trig
	switch inv.fn {
	case fnClaim:
		return s.claim(inv, must(assemble.Claimer(p)))
	case fnDispatch:
		dispatcher := must(assemble.Dispatcher(p))
		return func(ctx context.Context) (string, error) {
			var res ledger.DispatchResult
			var err error
			if t.image != nil {
				res, err = dispatcher.DispatchRow(ctx, *t.image, inv.worker)
			} else {
				res, err = dispatcher.Dispatch(ctx, t.key, inv.worker)
			}
			line := logLine(inv, err, "dedupe_key", t.key, "source", t.source, "outcome", string(res.Outcome),
				"state", string(res.Entry.State), "ack_id", res.Entry.AckID, "reason", res.Entry.Reason)
			if errors.Is(err, ledger.ErrNotFound) {
				err = nil // the handler skips a record for a row that does not exist
			}
			if t.forged != "" && res.Outcome == ledger.OutcomeContradicted {
				s.stats.Paths[pathForgedRecordRefused]++
			}
			if err == nil {
				// As the handler does after a batch: the source's mark moves
				// (not for a record the table contradicts).
				switch {
				case t.image != nil && res.Outcome == ledger.OutcomeContradicted:
				case t.image != nil:
					_ = dispatcher.Read(ctx, ledger.FromStream, t.image.UpdatedAt)
				case t.source == "queue":
					_ = dispatcher.Read(ctx, ledger.FromQueue, t.at)
				}
			}
			return line, err
		}
	case fnReconcile:
		reconciler := must(assemble.Reconciler(p))
		return func(ctx context.Context) (string, error) {
			rep, err := reconciler.Reconcile(ctx, inv.worker, sweepLimit)
			if err == nil {
				var red ledger.SweepReport
				red, err = reconciler.Redrive(ctx, sweepLimit)
				rep.Errors = append(rep.Errors, red.Errors...)
				for a, n := range red.Actions {
					if rep.Actions == nil {
						rep.Actions = map[string]int{}
					}
					rep.Actions[a] += n
				}
			}
			return sweepLine(inv, rep, err), err
		}
	case fnExpire:
		expirer := must(assemble.Expirer(p))
		return func(ctx context.Context) (string, error) {
			rep, err := expirer.ExpireSweep(ctx, inv.worker, sweepLimit)
			return sweepLine(inv, rep, err), err
		}
	case fnEvents:
		recorder := must(assemble.EventRecorder(p))
		return func(ctx context.Context) (string, error) { return s.recordEvent(ctx, inv, recorder) }
	default:
		resolver := must(assemble.Resolver(p))
		return func(ctx context.Context) (string, error) { return s.operate(ctx, inv, p.Store, resolver) }
	}
}

// claim is the claim function's body: in a KMS world it checks the
// intent's seal first (checkSeal), as the claim handler does.
func (s *sim) claim(inv *invocation, claimer *claim.Claimer) func(ctx context.Context) (string, error) {
	t := inv.trig
	return func(ctx context.Context) (string, error) {
		if s.w.kms {
			if err := s.checkSeal(ctx, inv); err != nil {
				return logLine(inv, err, "challenge_id", t.msg.intent.ChallengeID, "channel", string(t.msg.intent.Channel),
					"outcome", "seal not verified"), err
			}
		}
		in := t.msg.intent
		if s.mutant == IssuedAtDropped {
			in.IssuedAt = time.Time{}
		}
		res, err := claimer.Claim(ctx, in, t.msg.sealed, inv.worker)
		return logLine(inv, err, "challenge_id", t.msg.intent.ChallengeID, "channel", string(t.msg.intent.Channel),
			"content_hash", t.msg.intent.ContentHash, "outcome", string(res.Outcome), "state", string(res.Entry.State),
			"reason", res.Entry.Reason), err
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic("sim: " + err.Error())
	}
	return v
}

// operate is the operator's round: every quarantined row is resolved with
// the provider's records as evidence (its message events, or the webhook
// provider's log): accepted with the provider's id when it took the
// message, abandoned when it has no record of it. The operator never
// decides rejected.
func (s *sim) operate(ctx context.Context, inv *invocation, store ledger.Store, resolver *resolve.Resolver) (string, error) {
	rows, err := store.ListOpen(ctx, ledger.Quarantined, time.Time{}, 0)
	if err != nil {
		return logLine(inv, err), err
	}
	var errs []error
	decided := 0
	for _, e := range rows {
		var rerr error
		if rs := s.providers[e.Identity.Channel].msgs[e.Key]; len(rs) > 0 {
			_, rerr = resolver.Resolve(ctx, e.Key, ledger.DecideAccepted, "provider records the message under our key", rs[0].ack, inv.worker)
		} else {
			_, rerr = resolver.Resolve(ctx, e.Key, ledger.DecideAbandoned, "provider has no record of the message", "", inv.worker)
		}
		if rerr != nil {
			errs = append(errs, rerr)
		} else {
			decided++
		}
	}
	err = errors.Join(errs...)
	return logLine(inv, err, "quarantined", fmt.Sprint(len(rows)), "decided", fmt.Sprint(decided)), err
}

// logLine renders one JSON log line the way the handlers write them.
func logLine(inv *invocation, err error, kv ...string) string {
	var b bytes.Buffer
	h := slog.NewJSONHandler(&b, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	args := []any{"function", inv.fn.String(), "worker", string(inv.worker)}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			args = append(args, kv[i], kv[i+1])
		}
	}
	level, msg := slog.LevelInfo, "handled"
	if err != nil {
		level, msg = slog.LevelError, "failed; will retry"
		args = append(args, "error", err.Error())
	}
	slog.New(h).Log(context.Background(), level, msg, args...)
	return strings.TrimSpace(b.String())
}

func sweepLine(inv *invocation, rep ledger.SweepReport, err error) string {
	acts := make([]string, 0, len(rep.Actions))
	for a, n := range rep.Actions {
		acts = append(acts, fmt.Sprintf("%s=%d", a, n))
	}
	sort.Strings(acts)
	kv := []string{"seen", fmt.Sprint(rep.Seen), "actions", strings.Join(acts, ",")}
	if rerr := rep.Err(); rerr != nil {
		kv = append(kv, "row_errors", rerr.Error())
	}
	return logLine(inv, err, kv...)
}
