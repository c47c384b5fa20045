package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The ports of one invocation. Each call parks the invocation (yield), then
// takes effect on the shared in-memory store, content store, budget,
// dispatch queue or provider, with the fault the scheduler drew.

// errInjected is the cause of every failure the scheduler injects. It is
// not ledger.ErrConflict or ledger.ErrNotFound: the caller cannot tell what
// happened.
var errInjected = errors.New("injected failure")

func injected(what, key string) error { return fmt.Errorf("%s %s: %w", what, key, errInjected) }

func lost(what, key string) error {
	return fmt.Errorf("%s %s: response lost after the request took effect: %w", what, key, errInjected)
}

type storePort struct{ inv *invocation }

func (p *storePort) Get(ctx context.Context, key string) (ledger.Entry, error) {
	r := p.inv.yield(&call{op: opGet, key: key})
	if r.fault == failCall {
		return ledger.Entry{}, injected("get", key)
	}
	e, err := p.inv.readRow(ctx, key, "store.Get")
	p.inv.answerLate(key, false)
	return e, err
}

// readRow is a strongly consistent read of the row key, as the store
// answers it to inv (how names the call, for the chain check).
func (inv *invocation) readRow(ctx context.Context, key, how string) (ledger.Entry, error) {
	e, err := inv.sim.get(ctx, inv, key)
	if err == nil {
		e = inv.sim.read(inv, e, how)
	}
	if t := inv.trig; inv.sim.mutant == ImageAsRow && t.image != nil && !inv.imageRead {
		inv.imageRead = true
		e, err = *t.image, nil
	}
	return e, err
}

// firstReadsPort is dispatch's first reads as the stack makes them
// (dynamostore.FirstReads): one BatchGetItem of the row, the newest
// challenge of the subject stream and the sealed content. DynamoDB answers
// it as one request, so it is one step, and fails as a whole; each item
// is read strongly consistent, but the three are not read as one
// transaction (reading them at the same step is one of the orders a
// batch allows). A missing row fails the reads, as the adapter does.
type firstReadsPort struct{ inv *invocation }

func (p *firstReadsPort) ReadFirst(ctx context.Context, q ledger.FirstQuery) (ledger.FirstRead, error) {
	inv := p.inv
	detail := "row"
	if q.Stream != nil {
		detail += fmt.Sprintf(", newest %s %s", q.Stream.Subject, q.Stream.Channel)
	}
	if q.ContentKey != "" {
		detail += ", content"
	}
	r := inv.yield(&call{op: opFirst, key: q.Key, detail: detail})
	if r.fault == failCall {
		return ledger.FirstRead{}, injected("first reads", q.Key)
	}
	var out ledger.FirstRead
	e, err := inv.readRow(ctx, q.Key, "store.FirstReads")
	out.Entry = e
	if q.Stream != nil {
		c, ok, nerr := inv.readNewest(ctx, *q.Stream)
		err = cmp.Or(err, nerr)
		out.Newest = &ledger.Found[ledger.Challenge]{Value: c, OK: ok}
		inv.first = &firstNewest{stream: *q.Stream, read: *out.Newest}
	}
	if q.ContentKey != "" {
		b, cerr := inv.sim.content.Get(ctx, q.ContentKey)
		if errors.Is(cerr, ledger.ErrNotFound) {
			cerr = nil
		}
		err = cmp.Or(err, cerr)
		out.Content = &ledger.Found[[]byte]{Value: b, OK: b != nil}
	}
	inv.answerLate(q.Key, false)
	if err != nil {
		return ledger.FirstRead{}, err
	}
	return out, nil
}

// firstNewest is what an invocation's first reads answered for the newest
// challenge of stream.
type firstNewest struct {
	stream ledger.SubjectStream
	read   ledger.Found[ledger.Challenge]
}

func (p *storePort) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	s, inv := p.inv.sim, p.inv
	r := inv.yield(&call{op: opCreate, key: e.Key, detail: "→" + e.State.String()})
	if r.fault == failCall {
		return ledger.Entry{}, injected("create", e.Key)
	}
	before, existed := s.peek(e.Key)
	got, err := s.create(ctx, inv, e)
	s.wrote(inv, before, existed, e.Key, e.Last().ID)
	switch r.fault {
	case lostResponse:
		return ledger.Entry{}, lost("create", e.Key)
	case crashAfter:
		inv.crash()
	}
	got = s.read(inv, got, "store.Create")
	inv.answerLate(e.Key, false)
	return got, err
}

func (p *storePort) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	s, inv := p.inv.sim, p.inv
	detail := c.From.String() + "→" + c.Next.State.String()
	if c.Event.Kind != ledger.KindTransition {
		detail += " (" + string(c.Event.Kind) + ")"
	}
	if c.Next.Attempts != 0 && c.Next.State == ledger.Dispatching || c.Event.Kind == ledger.KindRetry {
		detail += fmt.Sprintf(" attempt %d", c.Next.Attempts)
	}
	r := inv.yield(&call{op: opApply, key: c.Next.Key, detail: detail})
	if r.fault == failCall {
		return ledger.Entry{}, injected("apply", c.Next.Key)
	}
	issued := inv.issuedAt()
	before, existed := s.peek(c.Next.Key)
	got, err := s.apply(ctx, inv, c)
	s.wrote(inv, before, existed, c.Next.Key, c.Event.ID)
	switch r.fault {
	case lostResponse:
		return ledger.Entry{}, lost("apply", c.Next.Key)
	case crashAfter:
		inv.crash()
	}
	got = s.read(inv, got, "store.Apply")
	inv.answerLate(c.Next.Key, err == nil && c.Next.Attempts > before.Attempts)
	if s.mutant == DeadlineBeforeWrite && inv.fn == fnDispatch && err == nil && c.Next.State == ledger.Dispatching && c.From != ledger.Dispatching {
		// Dispatch measures its send's timeout from the clock it read
		// before this write: its expiry check after the write reads the
		// clock as it is, the timeout the one before.
		inv.staleAt, inv.staleSkip, inv.staleOnce = issued, 1, false
	}
	if s.mutant == RetryLeaseBeforeWrite && inv.fn == fnReconcile && err == nil && c.Event.Kind == ledger.KindRetry && c.Next.Attempts > before.Attempts {
		// Reconcile measures its retry's lease (the timeout that cuts
		// the call) from the clock it read before this write: the expiry
		// check after the write and the send deadline read the clock as
		// it is.
		inv.staleAt, inv.staleSkip, inv.staleOnce = issued, 1, true
	}
	return got, err
}

// ListOpen returns the rows in a deterministic order: oldest due first,
// then by key (the in-memory store breaks ties in map order).
func (p *storePort) DueTimes(ctx context.Context, st ledger.State, dueBy time.Time) ([]time.Time, error) {
	r := p.inv.yield(&call{op: opListOpen, detail: st.String() + " due times"})
	if r.fault == failCall {
		return nil, injected("due times", st.String())
	}
	return p.inv.sim.store.DueTimes(ctx, st, dueBy)
}

func (p *storePort) ListOpen(ctx context.Context, st ledger.State, dueBy time.Time, limit int) ([]ledger.Entry, error) {
	if p.inv.sim.mutant == ReconcileSweepsDispatchingTwice && p.inv.fn == fnReconcile && st == ledger.Unknown {
		st = ledger.Dispatching
	}
	r := p.inv.yield(&call{op: opListOpen, detail: st.String()})
	if r.fault == failCall {
		return nil, injected("list open", st.String())
	}
	rows, err := p.inv.sim.store.ListOpen(ctx, st, dueBy, 0)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(rows, func(a, b ledger.Entry) int {
		if c := a.OpenDue().Compare(b.OpenDue()); c != 0 {
			return c
		}
		if a.Key < b.Key {
			return -1
		}
		return 1
	})
	if limit > 0 && len(rows) > limit {
		rows = rows[:limit]
	}
	for i := range rows {
		rows[i] = p.inv.sim.read(p.inv, p.inv.sim.view(p.inv, rows[i]), "store.ListOpen")
	}
	return rows, nil
}

// ListByRef lists a subject's rows for a refused admission's reclaim.
func (p *storePort) ListByRef(ctx context.Context, kind ledger.RefKind, ref string, since time.Time, limit int) ([]ledger.Entry, error) {
	r := p.inv.yield(&call{op: opTimeline, detail: string(kind) + " " + ref})
	if r.fault == failCall {
		return nil, injected("list by "+string(kind), ref)
	}
	if p.inv.sim.mutant == TimelineWrongIndex {
		kind = ledger.ByDestination
	}
	rows, err := p.inv.sim.store.ListByRef(ctx, kind, ref, since, limit)
	for i := range rows {
		rows[i] = p.inv.sim.read(p.inv, rows[i], "store.ListByRef")
	}
	return rows, err
}

// wrote records a write that landed in this call (the row now holds
// eventID and did not before) for the invariant checks, the stream, and the
// authorization of a send.
func (s *sim) wrote(inv *invocation, before ledger.Entry, existed bool, key, eventID string) {
	after, ok := s.peek(key)
	if !ok || !after.Holds(eventID) || existed && before.Holds(eventID) {
		return
	}
	w := writeFact{inv: inv, before: before, existed: existed, after: after}
	inv.wrote[key] = s.step
	if (after.State.Terminal() || after.State == ledger.Quarantined) && (!existed || before.State != after.State) {
		inv.ended[key] = s.step
	}
	s.facts.writes = append(s.facts.writes, w)
	s.streamed(before, existed, after)
	if !existed && (after.State == ledger.Claimed || after.State == ledger.Held) {
		s.claimedStep[key] = s.step // its challenge was noted as its subject's newest before
	}
	if _, ok := s.claimedAt[key]; !ok && after.State == ledger.Claimed {
		s.claimedAt[key] = s.now
	}
	if after.Attempts > before.Attempts {
		inv.begun[key] = s.step
		inv.unsent[key] = nothingTaken(before)
		auth := inv.issuedAt()
		inv.auth[key] = auth
		if inv.fn == fnReconcile {
			inv.lease[key] = after.NextCheckAt // the retry's next look: its call must be over by then
		}
		_, inv.evidenced[key] = before.ProviderEvidence()
		if margin := s.w.policy.ExpiryMargin; !auth.Add(margin).Before(after.ExpiresAt) {
			s.fail(invLateAttempt, fmt.Sprintf("%s started attempt %d of %s at %s by its clock; expires_at − margin is %s",
				inv, after.Attempts, s.label(key), s.rel(auth), s.rel(after.ExpiresAt.Add(-margin))), key)
		}
	}
	// The stream filter of dispatch: the changes the trigger rule names (a new claimed row, or
	// held → claimed).
	from := ledger.None
	if existed {
		from = before.State
	}
	if ledger.TriggersDispatch(from, after.State) {
		img := s.decoded(after)
		s.checkChain(img, "as its stream record's image")
		s.emit(&trigger{fn: fnDispatch, source: "stream", key: key, image: &img, due: s.now})
		if s.faultPhase && s.c.coin(4, "forged stream record") {
			s.forgeRecord(img)
		}
	}
}

type contentPort struct{ inv *invocation }

func (p *contentPort) Put(ctx context.Context, key string, sealed []byte, expiresAt time.Time) (bool, error) {
	r := p.inv.yield(&call{op: opContentPut, key: rowKey(key)})
	if r.fault == failCall {
		return false, injected("put content", rowKey(key))
	}
	ok, err := p.inv.sim.content.Put(ctx, key, sealed, expiresAt)
	switch r.fault {
	case lostResponse:
		return false, lost("put content", rowKey(key))
	case crashAfter:
		p.inv.crash()
	}
	p.inv.answerLate(rowKey(key), false)
	return ok, err
}

func (p *contentPort) Get(ctx context.Context, key string) ([]byte, error) {
	r := p.inv.yield(&call{op: opContentGet, key: rowKey(key)})
	if r.fault == failCall {
		return nil, injected("get content", rowKey(key))
	}
	b, err := p.inv.sim.content.Get(ctx, key)
	p.inv.answerLate(rowKey(key), false)
	return b, err
}

func (p *contentPort) Delete(ctx context.Context, key string) error {
	r := p.inv.yield(&call{op: opContentDelete, key: rowKey(key)})
	if r.fault == failCall {
		return injected("delete content", rowKey(key))
	}
	err := p.inv.sim.content.Delete(ctx, key)
	switch r.fault {
	case lostResponse:
		return lost("delete content", rowKey(key))
	case crashAfter:
		p.inv.crash()
	}
	return err
}

// rowKey is the dedupe key of a content key (dedupe key ":" content hash).
func rowKey(contentKey string) string {
	if len(contentKey) > 64 {
		return contentKey[:64]
	}
	return contentKey
}

type openerPort struct{ inv *invocation }

func (p *openerPort) Open(ctx context.Context, key string, sealed []byte) (ledger.Message, error) {
	r := p.inv.yield(&call{op: opOpen, key: key})
	if r.fault == failCall {
		if p.inv.sim.mutant == DecryptFailureAsUnavailable {
			// The adapter reads a failed KMS call as content that cannot
			// be authenticated.
			return ledger.Message{}, fmt.Errorf("decrypt %s: %w: %w", key, ledger.ErrContentUnavailable, errInjected)
		}
		return ledger.Message{}, injected("decrypt", key)
	}
	if p.inv.sim.w.kms {
		return (&envelope.Opener{KMS: kmsPort{inv: p.inv, key: key}, KeyARN: kmsKeyARN, Dictionaries: simDictionaries}).Open(ctx, key, sealed)
	}
	return ledgertest.PlainOpener{}.Open(ctx, key, sealed)
}

type budgetPort struct{ inv *invocation }

func (p *budgetPort) Reserve(ctx context.Context, ch ledger.Channel, now, notAfter time.Time) (time.Time, error) {
	r := p.inv.yield(&call{op: opReserve, detail: string(ch)})
	if r.fault == failCall {
		return time.Time{}, injected("reserve", string(ch))
	}
	s := p.inv.sim
	at, err := s.budget.Reserve(ctx, ch, now, notAfter)
	if err == nil && s.w.rates[ch] > 0 {
		s.budgetTat[ch] = later(s.budgetTat[ch], at.Add(ledger.Interval(s.w.rates[ch])))
	}
	switch r.fault {
	case lostResponse:
		return time.Time{}, lost("reserve", string(ch))
	case crashAfter:
		p.inv.crash()
	}
	p.inv.answerLate("", false)
	return at, err
}

// schedulerPort is the dispatch queue: a message delivered at the asked
// time (SQS delays are whole seconds up to 15 minutes; a later wake-up is
// delivered early and dispatch schedules it again).
type schedulerPort struct{ inv *invocation }

func (p *schedulerPort) Schedule(ctx context.Context, key string, at time.Time) error {
	s, inv := p.inv.sim, p.inv
	r := inv.yield(&call{op: opSchedule, key: key, detail: "at " + s.rel(at)})
	if r.fault == failCall {
		return injected("schedule", key)
	}
	d := max(at.Sub(inv.clock()), 0).Truncate(time.Second)
	due := s.now.Add(min(d, maxQueueDelay))
	s.emit(&trigger{fn: fnDispatch, source: "queue", key: key, due: due, at: at})
	switch r.fault {
	case lostResponse:
		return lost("schedule", key)
	case crashAfter:
		inv.crash()
	}
	return nil
}

// transportPort is one channel's transport as seen from one invocation.
type transportPort struct {
	inv *invocation
	p   *provider
}

func (t *transportPort) Capabilities() ledger.Capabilities {
	events := t.p.spec.events
	if t.inv.sim.mutant == ReconcileWithoutEvents && t.inv.fn == fnReconcile {
		events = false
	}
	return ledger.Capabilities{IdempotencyWindow: t.p.spec.window, Lookup: t.p.spec.cap == capLookup, Events: events}
}

func (t *transportPort) Send(ctx context.Context, m ledger.Send) (ledger.Ack, error) {
	s, inv := t.inv.sim, t.inv
	// What the use case handed the call: its context's deadline by the
	// caller's clock, read before the call parks (the clock moves while it
	// is parked; a slow call returns past a deadline).
	inv.callEnd, inv.callBounded, inv.callMeasured = inv.contextDeadline(ctx)
	r := inv.yield(&call{op: opSend, key: m.IdempotencyKey, detail: fmt.Sprintf("attempt %d", m.Attempt)})
	cut, bounded := m.Deadline, !m.Deadline.IsZero()
	if !inv.callMeasured {
		s.stats.Faults["context deadline not measured"]++
	}
	if s.on(ClassContext) && inv.callMeasured {
		// The transport honours its call's context, as the SDK's and an
		// HTTP client do, and reads nothing else: a context that ends too
		// late lets the call run too long.
		cut, bounded = inv.callEnd, inv.callBounded
		if bounded && cut.After(m.Deadline) && !cut.After(m.Deadline.Add(ctxSlack)) {
			cut = m.Deadline // the real time between the clock's reading and the context
		}
	}
	if s.mutant == SendNoDeadline {
		bounded = false // the adapter detaches the call from its deadline
	}
	if bounded && !inv.clock().Before(cut) {
		// The call's context ended on its way (its deadline is a duration
		// on the worker's clock): it never reaches the provider, and the
		// worker cannot tell that from a lost answer.
		if s.on(ClassContext) {
			s.stats.Paths[pathContextCut]++
			if inv.fn == fnReconcile && cut.Before(m.Deadline) {
				s.stats.Paths[pathRetryLeaseCut]++
			}
		}
		s.facts.sends = append(s.facts.sends, s.sendFact(inv, m, r.behavior, sendResult{err: context.DeadlineExceeded}))
		return ledger.Ack{}, fmt.Errorf("send: %w", context.DeadlineExceeded)
	}
	res := t.p.send(m, r.behavior, s.now)
	s.facts.sends = append(s.facts.sends, s.sendFact(inv, m, r.behavior, res))
	if rs := t.p.msgs[m.IdempotencyKey]; res.recorded && t.p.spec.events {
		s.planEvents(t.p.ch, m, rs[len(rs)-1].ack)
	}
	if r.fault == crashAfter {
		inv.crash()
	}
	if r.behavior == acceptLate {
		inv.yield(&call{op: opAwait, key: m.IdempotencyKey, d: r.late, detail: "answer in " + r.late.String()})
	}
	var rej *ledger.Rejection
	if s.mutant == RefusalQuotesRecipient && errors.As(res.err, &rej) {
		return ledger.Ack{}, &ledger.Rejection{Reason: rej.Reason + " (" + m.Message.To + ")"}
	}
	if s.mutant == ResetAsRejection && errors.Is(res.err, errReset) {
		// The adapter reads a connection reset as the provider's refusal.
		return ledger.Ack{}, &ledger.Rejection{Reason: "connection reset by provider"}
	}
	return res.ack, res.err
}

func (t *transportPort) Lookup(ctx context.Context, key string) (ledger.Ack, bool, error) {
	r := t.inv.yield(&call{op: opLookup, key: key})
	if r.fault == failCall {
		return ledger.Ack{}, false, injected("lookup", key)
	}
	ack, ok := t.p.lookup(key, t.inv.sim.now)
	if !ok && t.inv.sim.mutant == LookupByChallenge {
		// The lookup matches the challenge's tag, not the dedupe key: the
		// other channel's message of the same challenge answers for it.
		s := t.inv.sim
		info := s.w.rows[key]
		for _, ch := range info.challenge.channels {
			if ch != info.channel {
				other := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: info.challenge.id, Channel: ch}.Key()
				ack, ok = s.providers[ch].lookup(other, s.now)
			}
		}
	}
	return ack, ok, nil
}

// answerLate is the latency of a database call of inv that took effect
// (ClassDeadline): in a world with database latency, during the faults, the
// answer may come back long after, while the clock runs and other
// invocations step. begins says the call was a write that started an
// attempt (a begin write answering late).
func (inv *invocation) answerLate(key string, begins bool) {
	s := inv.sim
	if !s.w.dbLatency || !s.faultPhase || !s.c.coin(2, "database latency") {
		return
	}
	d := dbLatencies[s.c.pick(len(dbLatencies), "answers after")]
	s.stats.Faults["database answer late"]++
	if begins {
		s.stats.Paths[pathBeginLate]++
	}
	inv.yield(&call{op: opAwait, key: key, d: d, detail: "database answers in " + d.String()})
}

// sleep is the in-process wait for a send-rate budget slot.
func (inv *invocation) sleep(ctx context.Context, d time.Duration) error {
	inv.yield(&call{op: opSleep, d: d, detail: d.String()})
	inv.woke = inv.sim.step
	return ctx.Err()
}
