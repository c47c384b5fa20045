package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// How time passes: every step takes tick; when nothing can run, the clock
// moves to the next event (a timer, a delayed message, a sleeping
// invocation).
const tick = 10 * time.Millisecond

// Liveness bounds, counted from the end of the fault phase.
const (
	maxLiveSteps = 20000
	liveWindow   = time.Hour // past the later of the phase's end and the last expiry
)

// fault is what the scheduler does to one port call.
type fault int

const (
	noFault      fault = iota
	crashBefore        // the invocation dies before the call leaves it
	crashAfter         // the call takes effect, then the invocation dies
	failCall           // the call fails; nothing happened
	lostResponse       // the call takes effect; the caller gets an error
	slowCall           // the call returns only after a deadline of its row passed
	timedOut           // the invocation outlived its function timeout (a crash before the call)
)

var faultNames = [...]string{"", "crash before", "crash after", "failed call", "lost response", "slow call", "timed out"}

func (f fault) String() string { return faultNames[f] }

// op is a port call.
type op int

const (
	opStart op = iota // not a call: the invocation begins
	opGet
	opCreate
	opApply
	opListOpen
	opContentPut
	opContentGet
	opContentDelete
	opOpen
	opSend
	opAwait // waiting for a late answer of a send
	opLookup
	opReserve
	opSchedule
	opSleep
	opAdmit    // limits: count a message
	opNote     // limits: record a claim's challenge as its subject's newest
	opNewest   // limits: read a subject's newest challenge
	opTimeline // limits: list a subject's newest rows (a refused admission's reclaim)
	opKMS      // KMS: VerifyMac (claim), Decrypt (the opener)
	opFirst    // dispatch's first reads: the row, the newest challenge and the content in one batch
)

var opNames = [...]string{"start", "store.Get", "store.Create", "store.Apply", "store.ListOpen", "content.Put",
	"content.Get", "content.Delete", "opener.Open", "transport.Send", "(awaiting answer)", "transport.Lookup",
	"budget.Reserve", "scheduler.Schedule", "sleep", "limits.Admit", "limits.Note", "limits.Newest", "store.ListByRef", "kms",
	"store.FirstReads"}

func (o op) String() string { return opNames[o] }

// faults returns the faults that apply to a call of o.
func (o op) faults() []fault {
	switch o {
	case opStart:
		return nil
	case opCreate, opApply, opContentPut, opContentDelete, opSchedule:
		return []fault{crashBefore, crashAfter, failCall, lostResponse, slowCall}
	case opReserve, opAdmit, opNote:
		return []fault{crashBefore, crashAfter, failCall, lostResponse}
	case opSend:
		return []fault{crashBefore, crashAfter, slowCall}
	case opSleep, opAwait:
		return []fault{crashBefore}
	case opListOpen, opTimeline:
		return []fault{crashBefore, failCall}
	}
	return []fault{crashBefore, failCall, slowCall}
}

// call is the port call an invocation is parked at.
type call struct {
	op     op
	key    string
	detail string
	d      time.Duration // opSleep, opAwait: how long the invocation waits
}

// resumeMsg tells a parked invocation how its call goes.
type resumeMsg struct {
	kill     bool // the run is over: exit without reporting
	fault    fault
	behavior behavior
	late     time.Duration
}

// report is what an invocation tells the scheduler when it stops running.
type report struct {
	inv      *invocation
	call     *call // parked at this call
	done     bool
	crashed  bool
	panicked any
	stack    string
	logLine  string
	err      error
}

// trigger is one event waiting to start an invocation.
type trigger struct {
	seq    int
	fn     function
	due    time.Time
	source string // intent, stream, queue, schedule
	msg    *message
	key    string
	image  *ledger.Entry // stream record's new image
	forged string        // how the stream record was forged; "" for a real one
	pev    *provEvent    // a provider event for the events function
	at     time.Time     // a queue message's due time, as the scheduler asked
	tries  int
}

// invocation is one running function invocation.
type invocation struct {
	sim      *sim
	id       int
	fn       function
	trig     *trigger
	worker   ledger.Worker
	skew     time.Duration
	deadline time.Time
	resume   chan resumeMsg
	// imageRead: under ImageAsRow, the first read answered with the image.
	imageRead bool

	call      *call
	parkedAt  time.Time
	seq       int
	notBefore time.Time
	// auth holds, per key, the invocation's clock when it issued the write
	// that started its latest attempt (the authorization of a send).
	auth map[string]time.Time
	// evidenced holds the keys whose row held provider evidence when this
	// invocation's write started its latest attempt.
	evidenced map[string]bool
	// frozen, if set, is what the use case's next reading of its clock
	// reads, if it comes before its next port call (mutant BeginStaleClock).
	frozen time.Time
	// clockReal is the real time of the use case's latest reading of its
	// Clock port: a context deadline the use case sets right after is real
	// time too (contextDeadline). staleAt, if set, is what that port reads
	// after its next staleSkip readings, until the next port call (mutant
	// DeadlineBeforeWrite).
	clockReal time.Time
	// firstClock is the use case's first reading of its clock (a claim's
	// time).
	firstClock time.Time
	staleAt    time.Time
	staleSkip  int
	// staleOnce: only one reading is stale (mutant RetryLeaseBeforeWrite).
	staleOnce bool
	// lease holds, per key, the next look the invocation's latest retry
	// record granted (a reconcile retry's call must be over by it).
	lease map[string]time.Time
	// ended holds the rows a write of the invocation ended (terminal or
	// quarantined), with the step of the write.
	ended map[string]int
	// wrote holds, per row, the step of the invocation's latest write
	// that landed (checkGivenBack).
	wrote map[string]int
	// callEnd is the context deadline of the invocation's latest transport
	// call, by its clock (callBounded: it had one).
	callEnd      time.Time
	callBounded  bool
	callMeasured bool
	// newestStep is the step of the invocation's latest read of a newest
	// challenge; begun holds, per key, the step of the write that started
	// its latest attempt.
	newestStep int
	begun      map[string]int
	// woke is the step at which the invocation's latest wait for a
	// send-rate slot ended. first is what its first reads answered for
	// a subject stream (firstReadsPort; nil: none read).
	woke  int
	first *firstNewest
	// unsent holds, per key, whether nothing of its row could have reached
	// the provider before the write that started its latest attempt
	// (nothingTaken).
	unsent map[string]bool
	// verdict is what KMS answered the invocation's last VerifyMac; opened
	// holds, per row, whether its last Decrypt of the row's data key
	// succeeded (ClassKMS).
	verdict kmsVerdict
	opened  map[string]bool
}

func (inv *invocation) String() string { return fmt.Sprintf("%s/%d", inv.fn, inv.id) }

func (inv *invocation) clock() time.Time { return inv.sim.now.Add(inv.skew) }

// portClock is the Clock port of the invocation's use case: its clock, and
// the real time of the reading, from which a context deadline set right
// after it is mapped onto the simulated clock (contextDeadline).
func (inv *invocation) portClock() time.Time {
	inv.clockReal = time.Now()
	if inv.firstClock.IsZero() {
		inv.firstClock = inv.clock()
	}
	if f := inv.frozen; !f.IsZero() {
		inv.frozen = time.Time{}
		return f
	}
	if st := inv.staleAt; !st.IsZero() {
		if inv.staleSkip > 0 {
			inv.staleSkip--
			return inv.clock()
		}
		if inv.staleOnce {
			inv.staleAt = time.Time{}
		}
		return st
	}
	return inv.clock()
}

// contextDeadline is when ctx ends by inv's clock. context.WithTimeout
// sets a real-time deadline: the use case's last reading of its clock
// (portClock) plus the timeout, give or take the real time between the
// reading and the context. The simulated clock does not move within a
// step, so the context ends the timeout after the clock the world runs on
// now (not a frozen or stale reading); every simulated time is a whole
// millisecond, so the timeout is rounded to one. measured is false when
// more than ctxMeasurable of real time passed since the reading (the
// process was descheduled): the timeout cannot be told to the
// millisecond, and the caller falls back to the deadline handed beside
// the context and judges nothing.
func (inv *invocation) contextDeadline(ctx context.Context) (end time.Time, bounded, measured bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false, true
	}
	if time.Since(inv.clockReal) > ctxMeasurable {
		return time.Time{}, true, false
	}
	left := dl.Sub(inv.clockReal).Round(time.Millisecond)
	return inv.sim.now.Add(inv.skew).Add(left), true, true
}

// ctxMeasurable is how much real time may pass between a use case's
// reading of its clock and its transport call for the call's context
// deadline to be measured to the millisecond (contextDeadline).
const ctxMeasurable = time.Millisecond

// issuedAt is the invocation's clock when it issued its current call.
func (inv *invocation) issuedAt() time.Time { return inv.parkedAt.Add(inv.skew) }

// yield parks the invocation at c until the scheduler resumes it. It does
// not return if the scheduler crashes or kills it.
func (inv *invocation) yield(c *call) resumeMsg {
	inv.frozen, inv.staleAt = time.Time{}, time.Time{}
	inv.sim.reports <- report{inv: inv, call: c}
	r := <-inv.resume
	if r.kill {
		panic(unwind{})
	}
	if r.fault == crashBefore || r.fault == timedOut {
		inv.crash()
	}
	return r
}

// crash ends the invocation where it stands.
func (inv *invocation) crash() {
	inv.sim.reports <- report{inv: inv, crashed: true}
	panic(unwind{})
}

// unwind is the panic that ends an invocation where it stands (a crash, or
// the end of the run); its deferred calls run, as they would on a crash.
type unwind struct{}

func (inv *invocation) main(body func(ctx context.Context) (string, error)) {
	defer func() {
		switch p := recover(); p.(type) {
		case nil, unwind:
		default:
			inv.sim.reports <- report{inv: inv, panicked: p, stack: string(debug.Stack())}
		}
	}()
	if r := <-inv.resume; r.kill {
		return
	}
	line, err := body(context.Background())
	inv.sim.reports <- report{inv: inv, done: true, logLine: line, err: err}
}

// pool runs invocations on goroutines that outlive them: a goroutine's
// stack, grown by one invocation, serves the next.
var pool = make(chan func())

func goPooled(f func()) {
	select {
	case pool <- f:
	default:
		go func() {
			for {
				f()
				f = <-pool
			}
		}()
	}
}

// action is one thing the scheduler can do next.
type action struct {
	inv     *invocation // resume it
	trig    *trigger    // or start an invocation for it
	readyAt time.Time
	seq     int
}

// sim is one run.
type sim struct {
	w      *world
	c      chooser
	mutant Mutant
	// without names the classes switched off (Config.Without).
	without []string
	// with names the opt-in classes switched on (Config.With).
	with []string

	store     *memstore.Store
	content   *memstore.Content
	budget    *memstore.Budget
	limiter   *memstore.Limits   // the send-limit counters and newest challenges
	progress  *memstore.Progress // the dispatch marks (how far dispatch read the stream and the queue)
	providers map[ledger.Channel]*provider
	proofs    *attemptproof.Local
	jitter    *rand.Rand
	// realEvents holds every event a provider really published (by
	// eventSig); delivered holds, per key, the permanent delivery failure
	// the events function recorded and when (see invHandOver).
	realEvents map[string]ledger.ProviderEvent
	delivered  map[string]bounceFact
	// called holds, per key, the attempt of the latest transport call.
	called map[string]int
	// The world's own account of the send limits (limits.go): when each
	// message was first counted (by the admitting worker's clock), which
	// messages raised each counter, which reached a provider, per counter
	// as the world counts it, and when each row was claimed (a step).
	admittedAt  map[string]time.Time
	countedIn   map[string]map[string]bool
	received    map[string]bool
	receivedIn  map[[2]string]map[string]time.Time // per rule and key: the messages the providers took, by admission time
	claimedStep map[string]int
	lastNoted   map[ledger.SubjectStream]ledger.Challenge // mutant SupersedeLastNoted
	// refusals holds, per message, the older challenges of its stream that
	// held counts in the counter its latest refused admission found full
	// and that a reclaim could then supersede (reclaimable).
	refusals map[string][]string
	// The world's own account of liveness (ClassSent, liveness.go): which
	// keys lost a dispatch-queue message, when each row was first claimed
	// (the true clock), the send-rate budget's next free time per channel as
	// the world saw its bookings, and what the rows waited for when the
	// faults stopped.
	lostWake  map[string]bool
	claimedAt map[string]time.Time
	budgetTat map[ledger.Channel]time.Time
	owedFrom  map[string]time.Time
	// waitingAt0 holds the rows that waited unsent (claimed or deferred,
	// nothing taken) when the faults stopped.
	waitingAt0 map[string]bool
	// verified holds, per row, the history the simulator's verifier last
	// verified (chain.go).
	verified map[string][]ledger.Event
	// digestRecs are the stream records of every write that landed, for
	// the signed digests (checkDigests).
	digestRecs []digest.Record
	// dataKeys are the data keys the simulated KMS made, by ciphertext;
	// sealRetried holds the intent messages a claim retried after a KMS
	// failure of their seal check (ClassKMS).
	dataKeys    map[string]dataKey
	sealRetried map[int]bool

	now        time.Time
	step       int
	seq        int
	faultPhase bool
	liveStep   int
	liveStart  time.Time
	liveUntil  time.Time

	invs     []*invocation
	nextInv  int
	triggers []*trigger
	timers   [numFunctions]time.Time
	reports  chan report
	ids      int
	consumed map[int]bool // intent messages claimed, or dead-lettered
	// deadLettered holds the keys an intent of which the claim function
	// dead-lettered as invalid (ClassLifetime).
	deadLettered map[string]bool
	// lastAdmit holds, per message, the latest admission that counted it
	// (checkGivenBack).
	lastAdmit map[string]admitFact

	facts     facts
	emits     []*trigger
	violation *violation
	trace     []traceStep
	stats     Stats
}

func newSim(c chooser, cfg Config) *sim {
	w := drawWorld(c, cfg.Without)
	s := &sim{
		w: w, c: c, mutant: cfg.Mutant, without: cfg.Without, with: cfg.With,
		store: &memstore.Store{}, content: &memstore.Content{},
		providers:  map[ledger.Channel]*provider{},
		proofs:     newProofs(),
		realEvents: map[string]ledger.ProviderEvent{},
		delivered:  map[string]bounceFact{},
		called:     map[string]int{},
		limiter:    &memstore.Limits{},
		admittedAt: map[string]time.Time{}, countedIn: map[string]map[string]bool{}, received: map[string]bool{},
		receivedIn: map[[2]string]map[string]time.Time{}, claimedStep: map[string]int{}, lastNoted: map[ledger.SubjectStream]ledger.Challenge{},
		refusals: map[string][]string{},
		lostWake: map[string]bool{}, claimedAt: map[string]time.Time{}, budgetTat: map[ledger.Channel]time.Time{}, owedFrom: map[string]time.Time{},
		waitingAt0: map[string]bool{}, verified: map[string][]ledger.Event{},
		jitter:     rand.New(rand.NewPCG(w.jitterSeed, 0x5eed)),
		now:        ledgertest.Epoch,
		faultPhase: true,
		reports:    make(chan report),
		consumed:   map[int]bool{}, deadLettered: map[string]bool{}, lastAdmit: map[string]admitFact{},
		progress: &memstore.Progress{},
		dataKeys: map[string]dataKey{}, sealRetried: map[int]bool{},
		stats: Stats{Faults: map[string]int{}, Answers: map[string]int{}, Paths: map[string]int{}},
	}
	for _, ch := range ledger.Channels {
		s.providers[ch] = newProvider(ch, w.transports[ch])
	}
	if s.mutant == FixedWindowCounters {
		s.limiter.ItemsOf = func(c ledger.Count, now time.Time) []ledger.Counter { return ledger.Counters(c, now)[:1] }
	}
	if len(w.rates) > 0 {
		s.budget = &memstore.Budget{Rates: w.rates}
	}
	s.sealMessages()
	for _, m := range w.messages {
		s.enqueue(&trigger{fn: fnClaim, source: "intent", msg: m, due: s.now.Add(m.at)})
	}
	for f, p := range periods {
		s.timers[f] = s.now.Add(p)
	}
	return s
}

// run runs the schedule to the end and returns the first violation.
func (s *sim) run() *violation {
	defer s.shutdown()
	for s.violation == nil {
		s.fireTimers()
		if s.faultPhase && s.step >= s.w.faultSteps {
			s.endFaults()
		}
		if s.settled() {
			break
		}
		if !s.faultPhase && (s.step-s.liveStep > maxLiveSteps || s.now.After(s.liveUntil)) {
			s.failLiveness()
			break
		}
		acts := s.actions()
		if len(acts) == 0 {
			s.idle()
			continue
		}
		s.step++
		s.stats.Steps++
		a := acts[0]
		if s.faultPhase {
			a = acts[s.c.pick(len(acts), "next")]
		}
		if a.trig != nil {
			s.start(a.trig)
		} else {
			s.resume(a.inv)
		}
		s.check()
		s.flushEmits()
		s.now = s.now.Add(tick)
		if s.faultPhase && s.c.coin(6, "clock jump") {
			s.jump()
		}
	}
	if s.violation == nil && !s.faultPhase && s.on(ClassSent) {
		s.checkSent()
	}
	if s.violation == nil {
		s.checkChains()
	}
	if s.violation == nil {
		s.checkDigests()
	}
	s.finalStats()
	return s.violation
}

func (s *sim) endFaults() {
	s.faultPhase = false
	s.liveStep, s.liveStart = s.step, s.now
	last := s.now
	for _, ch := range s.w.challenges {
		if e := ch.expiresAt(); e.After(last) {
			last = e
		}
	}
	s.liveUntil = last.Add(liveWindow)
	s.note(nil, "faults stop", "", "the schedule is fair from here")
	s.owedAtFaultsEnd()
}

// settled reports whether the run is over: every intent claimed, no
// invocation running, and every row in a terminal state.
func (s *sim) settled() bool {
	if len(s.invs) > 0 {
		return false
	}
	for _, t := range s.triggers {
		if t.fn == fnClaim {
			return false
		}
	}
	for _, k := range s.w.keys {
		e, ok := s.peek(k)
		if !ok && s.deadLettered[k] {
			continue // every intent of it dead-lettered: no row
		}
		if !ok || !e.State.Terminal() {
			return false
		}
	}
	return true
}

func (s *sim) nextSeq() int { s.seq++; return s.seq }

func (s *sim) enqueue(t *trigger) {
	t.seq = s.nextSeq()
	s.triggers = append(s.triggers, t)
}

// actions lists what can run now, oldest first.
func (s *sim) actions() []action {
	var acts []action
	var running [numFunctions]int
	for _, inv := range s.invs {
		running[inv.fn]++
		if inv.call != nil && !inv.notBefore.After(s.now) {
			acts = append(acts, action{inv: inv, readyAt: later(inv.parkedAt, inv.notBefore), seq: inv.seq})
		}
	}
	for _, t := range s.triggers {
		if !t.due.After(s.now) && running[t.fn] < s.w.limits[t.fn] {
			acts = append(acts, action{trig: t, readyAt: t.due, seq: t.seq})
		}
	}
	slices.SortFunc(acts, func(a, b action) int {
		if c := a.readyAt.Compare(b.readyAt); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	return acts
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// idle moves the clock to the next event when nothing can run.
func (s *sim) idle() {
	var next time.Time
	consider := func(t time.Time) {
		if t.After(s.now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, inv := range s.invs {
		consider(inv.notBefore)
	}
	for _, t := range s.triggers {
		consider(t.due)
	}
	for f := range periods {
		consider(s.timers[f])
	}
	s.now = next
}

// fireTimers enqueues the scheduled invocations that are due; a schedule
// never fires twice to catch up after a clock jump.
func (s *sim) fireTimers() {
	for _, f := range []function{fnReconcile, fnExpire, fnOperator} {
		if s.now.Before(s.timers[f]) {
			continue
		}
		p := periods[f]
		for !s.now.Before(s.timers[f]) {
			s.timers[f] = s.timers[f].Add(p)
		}
		s.emit(&trigger{fn: f, source: "schedule", due: s.now})
	}
	s.flushEmits()
}

// emit queues a trigger for flushEmits, which may drop or duplicate it.
func (s *sim) emit(t *trigger) { s.emits = append(s.emits, t) }

func (s *sim) flushEmits() {
	for _, t := range s.emits {
		if s.faultPhase && s.c.coin(3, "trigger fault") {
			if s.c.pick(2, "drop or duplicate") == 0 {
				s.stats.Faults["trigger dropped"]++
				s.note(nil, "trigger dropped", t.key, t.fn.String()+" "+t.source)
				continue
			}
			s.stats.Faults["trigger duplicated"]++
			s.note(nil, "trigger duplicated", t.key, t.fn.String()+" "+t.source)
			d := *t
			s.enqueue(&d)
		}
		if s.faultPhase && t.source == "stream" && s.on(ClassDeadline) && s.c.coin(3, "stream record late") {
			// A stream record delivered long after its write: dispatch works
			// from a stale image.
			late := streamLate[s.c.pick(len(streamLate), "stream record late by")]
			s.stats.Faults["stream record late"]++
			s.note(nil, "stream record late", t.key, "by "+late.String())
			t.due = t.due.Add(late)
		}
		if s.faultPhase && t.source == "queue" && s.on(ClassSent) && s.c.coin(2, "queue message fault") {
			// The dispatch queue loses a message (a wake-up, a hand-back), or
			// delivers it late.
			if s.c.pick(2, "lost or late") == 0 {
				s.stats.Faults["queue message lost"]++
				s.lostWake[t.key] = true
				s.note(nil, "queue message lost", t.key, "dispatch queue")
				continue
			}
			late := queueLate[s.c.pick(len(queueLate), "queue message late by")]
			s.stats.Faults["queue message late"]++
			s.note(nil, "queue message late", t.key, "by "+late.String())
			t.due = t.due.Add(late)
		}
		s.enqueue(t)
	}
	s.emits = s.emits[:0]
}

// streamLate are how late the ledger stream may deliver a record.
var streamLate = []time.Duration{10 * time.Second, 45 * time.Second, 3 * time.Minute}

// queueLate are how late the dispatch queue may deliver a message.
var queueLate = []time.Duration{5 * time.Second, 40 * time.Second, 3 * time.Minute}

var skews = []time.Duration{0, time.Second, -time.Second}

// start begins an invocation for t and runs it to its first port call.
func (s *sim) start(t *trigger) {
	s.triggers = slices.DeleteFunc(s.triggers, func(x *trigger) bool { return x == t })
	s.nextInv++
	inv := &invocation{
		sim: s, id: s.nextInv, fn: t.fn, trig: t,
		deadline:  s.now.Add(functionTimeouts[t.fn]),
		resume:    make(chan resumeMsg),
		auth:      map[string]time.Time{},
		evidenced: map[string]bool{},
		begun:     map[string]int{},
		unsent:    map[string]bool{},
		lease:     map[string]time.Time{},
		ended:     map[string]int{},
		wrote:     map[string]int{},
		opened:    map[string]bool{},
	}
	inv.worker = ledger.Worker(fmt.Sprintf("%s/inv-%d", t.fn, inv.id))
	if t.fn == fnOperator {
		// The operator's decisions go through the operator function, which records the caller
		// AWS authenticated: an operator session of the LedgerOperator role.
		inv.worker = ledger.Worker(fmt.Sprintf("operator:%s/sim-%d", simOperatorRole, inv.id))
	}
	if s.faultPhase {
		inv.skew = skews[s.c.pick(len(skews), "skew")]
	}
	// Built first: a use case its constructor refuses (a policy the
	// simulator got wrong) panics before the invocation is running.
	body := s.body(inv, s.ports(inv))
	s.invs = append(s.invs, inv)
	s.traceStart(inv)
	goPooled(func() { inv.main(body) })
	inv.resume <- resumeMsg{}
	s.await(inv)
}

// resume lets the parked invocation inv make its call, with the fault the
// scheduler draws for it.
func (s *sim) resume(inv *invocation) {
	c := inv.call
	var r resumeMsg
	slow := ""
	if s.faultPhase && !s.now.After(inv.deadline) {
		if fs := c.op.faults(); len(fs) > 0 && s.c.coin(4, "fault") {
			r.fault = fs[s.c.pick(len(fs), "fault kind")]
		} else if c.op == opApply && (strings.HasSuffix(c.detail, "→dispatching") || strings.Contains(c.detail, "(retry) attempt")) &&
			s.c.coin(3, "slow begin") {
			// The write that starts an attempt (dispatch's move to
			// dispatching, reconcile's retry record) answering late is where
			// a send can start after its deadline: explored more often.
			r.fault = slowCall
		} else if c.op == opSend && s.w.dbLatency && s.c.coin(3, "slow send") {
			// A send whose request takes long to reach the provider: where
			// the send deadline decides (ClassDeadline), explored more often.
			r.fault = slowCall
		}
		if r.fault == slowCall {
			if slow = s.slow(inv, c.key); slow != "" {
				s.stats.Faults[r.fault.String()]++
			}
			r.fault = noFault
		}
		if c.op == opSend && (r.fault == noFault || r.fault == crashAfter) {
			switch m := s.w.transports[s.w.rows[c.key].channel].mood; {
			case m == moodThrottling && s.c.coin(1, "throttled"):
				r.behavior = throttle
			case m == moodLost:
				r.behavior = flakyAnswers[s.c.pick(2, "lost how")] // never late: every answer is lost
			case m == moodFlaky && s.c.coin(1, "answer lost"):
				r.behavior = flakyAnswers[s.c.pick(len(flakyAnswers), "lost how")]
			case s.c.coin(2, "provider answer"):
				r.behavior = behavior(1 + s.c.pick(int(numBehaviors)-1, "answer"))
			}
			if r.behavior == acceptLate {
				r.late = lateAnswers[s.c.pick(len(lateAnswers), "late by")]
			}
		}
	}
	if c.op == opSend && r.fault != crashBefore && r.fault != timedOut && r.behavior != failBeforeReach && s.streaking(c.key) {
		r.behavior = throttle
	}
	if s.now.After(inv.deadline) {
		r.fault = timedOut
	}
	if r.fault != noFault {
		s.stats.Faults[r.fault.String()]++
	}
	if c.op == opSend {
		s.stats.Answers[r.behavior.String()]++
	}
	s.traceResume(inv, c, r, slow)
	inv.call = nil
	inv.resume <- r
	s.await(inv)
}

// await waits for inv to park at its next call or end.
func (s *sim) await(inv *invocation) {
	r := <-s.reports
	if r.inv != inv {
		panic("sim: a report from an invocation that was not running")
	}
	switch {
	case r.call != nil:
		inv.call, inv.parkedAt, inv.seq = r.call, s.now, s.nextSeq()
		inv.notBefore = time.Time{}
		if r.call.op == opSleep || r.call.op == opAwait {
			inv.notBefore = s.now.Add(r.call.d)
		}
	case r.panicked != nil:
		s.remove(inv)
		s.fail(invPanic, fmt.Sprintf("%s panicked: %v\n%s", inv, r.panicked, r.stack))
	case r.crashed:
		s.remove(inv)
		s.note(inv, "crashed", "", inv.String())
		s.retry(inv.trig)
	default:
		s.remove(inv)
		s.finish(inv, r)
	}
}

func (s *sim) remove(inv *invocation) {
	s.invs = slices.DeleteFunc(s.invs, func(x *invocation) bool { return x == inv })
}

// finish handles an invocation that returned.
func (s *sim) finish(inv *invocation, r report) {
	s.facts.ends = append(s.facts.ends, endFact{inv: inv, line: r.logLine, err: r.err})
	s.note(inv, "returned", "", r.logLine)
	if s.sealRefused(inv, r.err) || s.claimRefused(inv, r.err) {
		return
	}
	if inv.fn == fnClaim && r.err != nil && inv.verdict != verdictNone && inv.verdict != verdictValid {
		s.sealRetried[inv.trig.msg.id] = true
	}
	if r.err == nil {
		s.checkGivenBack(inv)
		if inv.fn == fnClaim {
			s.consumed[inv.trig.msg.id] = true
		}
		return
	}
	s.retry(inv.trig)
}

// retry redelivers the trigger of a failed or crashed invocation the way
// its event source does.
func (s *sim) retry(t *trigger) {
	t.tries++
	switch {
	case t.fn == fnClaim:
		t.due = s.now.Add(intentVisibility)
	case t.source == "stream" && t.tries < streamTries:
		t.due = s.now.Add(streamRetryDelay)
	case t.source == "stream":
		s.stats.GivenUp++
		s.note(nil, "stream record given up", t.key, "")
		return
	case t.source == "queue" && t.tries < queueReceives:
		t.due = s.now.Add(queueVisibility)
	case t.source == "queue":
		s.stats.DeadLettered++
		s.note(nil, "dispatch message dead-lettered", t.key, "")
		return
	case t.fn == fnEvents && t.tries < queueReceives:
		t.due = s.now.Add(eventVisibility)
	case t.fn == fnEvents:
		s.note(nil, "provider event dead-lettered", t.key, "")
		return
	default:
		return // schedules fire again by themselves
	}
	s.enqueue(t)
}

var jumpOffsets = []time.Duration{time.Millisecond, 0, -time.Millisecond, time.Second}

// streaking reports whether key's provider is in a throttle streak now.
func (s *sim) streaking(key string) bool {
	st := s.w.transports[s.w.rows[key].channel].streak
	return st > 0 && s.now.Before(ledgertest.Epoch.Add(st))
}

// deadline is a time at which the protocol's decisions about a row change.
type deadline struct {
	at   time.Time
	what string
}

// deadlines lists the deadlines after now of the open row key: its expiry
// with and without the margin, its lease, next check, next attempt, and the
// end of its settle period and key window.
func (s *sim) deadlines(key string) []deadline {
	e, ok := s.peek(key)
	if !ok || e.State.Terminal() {
		return nil
	}
	var ds []deadline
	add := func(t time.Time, what string) {
		if !t.IsZero() && t.After(s.now) {
			ds = append(ds, deadline{t, what + " of " + s.label(key)})
		}
	}
	p := s.w.policy
	add(e.ExpiresAt.Add(-p.ExpiryMargin), "expires_at − margin")
	if s.on(ClassDeadline) {
		add(e.ExpiresAt.Add(-p.SendGuard), "send deadline")
	}
	add(e.ExpiresAt, "expires_at")
	add(e.RedriveAt, "re-drive time")
	add(e.LeaseUntil, "lease end")
	add(e.NextCheckAt, "next check")
	add(e.NextAttemptAt, "next attempt")
	if !e.FirstAttemptAt.IsZero() {
		add(e.FirstAttemptAt.Add(p.SettlePeriod), "settle period end")
		if spec := s.w.transports[e.Identity.Channel]; spec.cap == capKey {
			add(e.FirstAttemptAt.Add(spec.window), "key window end")
		}
	}
	return ds
}

// jumpTo moves the clock to one of ds (the earliest six, soonest first),
// give or take a millisecond or a second, and says where it went.
func (s *sim) jumpTo(ds []deadline) string {
	if len(ds) == 0 {
		return ""
	}
	slices.SortStableFunc(ds, func(a, b deadline) int { return a.at.Compare(b.at) })
	ds = ds[:min(len(ds), 6)]
	d := ds[s.c.pick(len(ds), "jump to")]
	off := jumpOffsets[s.c.pick(len(jumpOffsets), "jump offset")]
	to := d.at.Add(off)
	if !to.After(s.now) {
		return ""
	}
	s.now = to
	rel := ""
	switch {
	case off > 0:
		rel = off.String() + " past "
	case off < 0:
		rel = (-off).String() + " before "
	default:
		rel = "at "
	}
	return fmt.Sprintf("%s (%s%s)", s.rel(to), rel, d.what)
}

// jump moves the clock past a deadline of any open row, or an invocation's
// timeout.
func (s *sim) jump() {
	var ds []deadline
	for _, k := range s.w.keys {
		ds = append(ds, s.deadlines(k)...)
	}
	for _, inv := range s.invs {
		if inv.deadline.After(s.now) {
			ds = append(ds, deadline{inv.deadline, "timeout of " + inv.String()})
		}
	}
	from := s.now
	if what := s.jumpTo(ds); what != "" {
		s.stats.Faults["clock jump"]++
		s.note(nil, "clock jump", "", fmt.Sprintf("%s → %s", s.rel(from), what))
	}
}

// slow is a call of inv on key that returns only after one of its row's
// deadlines passed: the clock moves there before the call takes effect. A
// call slower than the invocation's timeout is a timeout, drawn elsewhere:
// only deadlines inside it count.
func (s *sim) slow(inv *invocation, key string) string {
	ds := slices.DeleteFunc(s.deadlines(key), func(d deadline) bool { return !d.at.Before(inv.deadline) })
	if what := s.jumpTo(ds); what != "" {
		return "slow call, returns at " + what
	}
	// No deadline of the row within reach: the call just takes a while.
	if s.now.Add(slowLatency).Before(inv.deadline) {
		s.now = s.now.Add(slowLatency)
		return "slow call, returns " + slowLatency.String() + " later"
	}
	return ""
}

// slowLatency is how long a slow call takes when no deadline of its row is
// within the invocation's timeout.
const slowLatency = 2 * time.Second

// shutdown ends every invocation still parked.
func (s *sim) shutdown() {
	for _, inv := range s.invs {
		inv.resume <- resumeMsg{kill: true}
	}
	s.invs = nil
}

// peek reads a row as it is stored, without a port call.
func (s *sim) peek(key string) (ledger.Entry, bool) {
	e, err := s.store.Get(context.Background(), key)
	return e, err == nil
}

func (s *sim) newID() string {
	s.ids++
	return fmt.Sprintf("ev-%06d", s.ids)
}

func (s *sim) rel(t time.Time) string { return "+" + t.Sub(ledgertest.Epoch).String() }
