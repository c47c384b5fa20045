package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// chooser is the source of every choice a run makes. Each choice shrinks
// toward 0: the first candidate, no fault, the smallest world.
type chooser interface {
	// pick returns a number in [0, n).
	pick(n int, label string) int
	// coin returns true with probability 2^-k.
	coin(k int, label string) bool
}

// function is a Lambda function of the stack, or the operator.
type function int

const (
	fnClaim function = iota
	fnDispatch
	fnReconcile
	fnExpire
	fnEvents // the provider events function: SES and SMS events, through RecordProviderEvent
	fnOperator
	numFunctions
)

var functionNames = [numFunctions]string{
	string(settings.Claim), string(settings.Dispatch), string(settings.Reconcile), string(settings.Expire), string(settings.Events),
	string(settings.Operator),
}

func (f function) String() string { return functionNames[f] }

// simOperatorRole is the STS assumed-role ARN prefix of the simulated operator's sessions, as
// the operator function records it (operator:<userArn>).
const simOperatorRole = "arn:aws:sts::111122223333:assumed-role/LedgerOperator"

// functionTimeouts are the deployed timeouts (infra/functions.go): an invocation
// that outlives its timeout is killed at its next port call. The operator is
// a person at a terminal.
var functionTimeouts = [numFunctions]time.Duration{
	fnClaim: 30 * time.Second, fnDispatch: time.Minute,
	fnReconcile: 50 * time.Second, fnExpire: 50 * time.Second, fnEvents: 30 * time.Second, fnOperator: 10 * time.Minute,
}

// Periods of the scheduled functions. Reconcile runs its sweep and the
// re-drive pass twice a minute, as the deployed reconcile does.
var periods = map[function]time.Duration{
	fnReconcile: 30 * time.Second, fnExpire: time.Minute, fnOperator: 5 * time.Minute,
}

// Retries of failed deliveries, as the event sources do them.
const (
	intentVisibility = 3 * time.Minute // six times the claim timeout; no DLQ in the simulation
	streamRetryDelay = time.Second
	streamTries      = 4 // then the stream record is given up
	queueVisibility  = 6 * time.Minute
	queueReceives    = 5 // then the dispatch queue message is dead-lettered
	maxQueueDelay    = 15 * time.Minute
	eventVisibility  = time.Minute // the provider events queue's redelivery of a failed event
	sweepLimit       = 10
)

// capability is what a transport can do (docs/design.md, "Transports and the reconcile policy").
type capability int

const (
	capNone   capability = iota // no idempotency key, no lookup: SES, End User Messaging SMS
	capKey                      // honors an idempotency key for a window
	capLookup                   // lookup by correlation (provider events)
)

type transportSpec struct {
	cap       capability
	window    time.Duration // capKey
	lookupLag time.Duration // capLookup: how long a message takes to show in lookups
	// events: the provider publishes events (Send, Delivery, Bounce,
	// Complaint, Reject) carrying the key and the attempt's proof, which
	// reach the events function (Capabilities.Events).
	events bool
	// mood biases the provider's answers during the fault phase, so that
	// deep paths (throttled again and again, answers lost again and again)
	// are reached often enough to be explored.
	mood mood
	// streak, if set, is when a streak of throttling ends (from the
	// epoch): until then the provider answers every send that reaches it
	// not sent, faults or no faults (ClassSent).
	streak time.Duration
}

// mood is how a provider tends to answer during the fault phase.
type mood int

const (
	moodNormal     mood = iota
	moodThrottling      // throttles one send in two
	moodFlaky           // loses one answer in two (never reached, ack lost, late)
	moodLost            // loses every answer: retry after retry under the same key
	numMoods
)

func (t transportSpec) String() string {
	var s string
	switch t.cap {
	case capKey:
		s = "key window " + t.window.String()
	case capLookup:
		s = "lookup (lag " + t.lookupLag.String() + ")"
	default:
		s = "no key, no lookup"
	}
	if t.events {
		s += ", provider events"
	}
	if t.streak > 0 {
		s += ", throttles every send until +" + t.streak.String()
	}
	switch t.mood {
	case moodThrottling:
		s += ", throttling"
	case moodFlaky:
		s += ", flaky"
	case moodLost:
		s += ", every answer lost"
	}
	return s
}

type challenge struct {
	n        int
	id       string
	workflow ledger.Workflow
	channels []ledger.Channel
	lifetime time.Duration
	// subject is the challenge's subject_ref ("" for none); to holds the
	// address of each channel. Challenges share subjects and addresses,
	// so that the send limits bind and newer challenges supersede older.
	subject string
	to      map[ledger.Channel]string
	// arrival is when its intents reach the queue (newer challenges are
	// asked for while older ones wait); it expires lifetime later.
	arrival time.Duration
	// age is how long before its arrival the challenge was issued
	// (ClassLifetime); v1: its intents are of wire version 1, which carry
	// no issued_at (the claim records its own time).
	age time.Duration
	v1  bool
	// boundGap, if not negative, is how far below the policy's maximum
	// lifetime past its arrival the challenge expires.
	boundGap time.Duration
}

// expiresAt is the challenge's expires_at.
func (ch *challenge) expiresAt() time.Time { return ledgertest.Epoch.Add(ch.arrival + ch.lifetime) }

// issuedAt is the challenge's issued_at: when its intents are published.
// Lifetimes differ, so a later challenge may expire sooner than an
// earlier one: supersession must order by this, not by the expiry.
func (ch *challenge) issuedAt() time.Time { return ledgertest.Epoch.Add(ch.arrival - ch.age) }

// mark is the challenge as supersession orders it.
func (ch *challenge) mark() ledger.Challenge {
	return ledger.Challenge{ID: ch.id, IssuedAt: ch.issuedAt(), ExpiresAt: ch.expiresAt()}
}

// message is one intent on the intent queue.
type message struct {
	id     int
	intent ledger.Intent
	sealed []byte
	label  string // "c1/email"
	kind   string // "original", "redelivery", "changed content", "tampered copy"
	at     time.Duration
	// seal is the intent's intent_mac in a KMS world (ClassKMS; "" for a
	// version-1 intent); of, for a tampered copy, the genuine message
	// whose seal and envelope it carries.
	seal string
	of   *message
}

// rowInfo describes the row of one identity.
type rowInfo struct {
	label     string
	challenge *challenge
	channel   ledger.Channel
}

// world is what a seed draws before the first step.
type world struct {
	policy     ledger.Policy
	challenges []*challenge
	messages   []*message
	transports map[ledger.Channel]transportSpec
	rates      map[ledger.Channel]float64
	limits     [numFunctions]int
	faultSteps int
	jitterSeed uint64
	secrets    []string
	rows       map[string]rowInfo
	keys       []string // every identity's key, in challenge and channel order
	// sendLimits is the send-limit policy (zero: off); allowed is its SMS
	// allow-list (nil: none), as the world reads it (limits.go).
	sendLimits ledger.Limits
	allowed    map[string]bool
	kinds      []string
	// asksAgain: every challenge is one player's, asked for seconds after
	// the one before, against a slow send-rate budget (limits.go).
	asksAgain bool
	// without names the classes whose worlds are not drawn.
	without []string
	// dbLatency: during the faults, database calls (the ledger, the
	// content store, the counters, the budget) may answer long after they
	// took effect (ClassDeadline).
	dbLatency bool
	// kms: the claim checks seals and the senders open content through
	// the simulated KMS, which fails (ClassKMS, kms.go).
	kms bool
}

// on reports whether the world draws class c's worlds.
func (w *world) on(c string) bool { return !slices.Contains(w.without, c) }

// Choices offered to the draws; index 0 is where shrinking goes.
var (
	lifetimes        = []time.Duration{10 * time.Minute, 3 * time.Minute, 50 * time.Second, 20 * time.Second, 70 * time.Second}
	redeliveryDelays = []time.Duration{0, 40 * time.Second, 4 * time.Minute}
	// The 5 and 6 minute windows are where measuring from the first
	// attempt or the last decides: the retry budget's last attempt falls
	// inside one and outside the other.
	windows        = []time.Duration{24 * time.Hour, 3 * time.Minute, 5 * time.Minute, 6 * time.Minute}
	lookupLags     = []time.Duration{0, 20 * time.Second}
	rates          = []float64{0, 1, 0.2}
	attemptBudgets = []int{3, 6}
)

// The fault phase lasts a multiple of faultStepUnit steps, at most
// maxFaultSteps.
const (
	faultStepUnit = 40
	maxFaultSteps = 240
)

func simPolicy() ledger.Policy {
	p := ledger.DefaultPolicy()
	p.Version = "policy-sim"
	return p
}

// drawWorld draws one world from c. It is long because every draw is made
// here, in one fixed order: a seed must draw the same world whatever is added.
func drawWorld(c chooser, without []string) *world {
	w := &world{
		without:    without,
		policy:     simPolicy(),
		transports: map[ledger.Channel]transportSpec{},
		rates:      map[ledger.Channel]float64{},
		rows:       map[string]rowInfo{},
	}
	w.drawLimits(c)
	n := 1 + c.pick(4, "challenges")
	for i := range n {
		ch := &challenge{n: i + 1, id: fmt.Sprintf("chal-%06d", i+1)}
		switch c.pick(5, "workflow") {
		case 0:
			ch.workflow, ch.channels = ledger.Workflow{Kind: ledger.Single}, []ledger.Channel{ledger.Email}
		case 1:
			ch.workflow, ch.channels = ledger.Workflow{Kind: ledger.Single}, []ledger.Channel{ledger.SMS}
		case 2:
			ch.workflow, ch.channels = ledger.Workflow{Kind: ledger.Dual}, []ledger.Channel{ledger.Email, ledger.SMS}
		case 3:
			ch.channels = []ledger.Channel{ledger.Email, ledger.SMS}
			ch.workflow = ledger.Workflow{Kind: ledger.Fallback, Order: ch.channels}
		default:
			ch.channels = []ledger.Channel{ledger.SMS, ledger.Email}
			ch.workflow = ledger.Workflow{Kind: ledger.Fallback, Order: ch.channels}
		}
		ch.lifetime = lifetimes[c.pick(len(lifetimes), "lifetime")]
		w.drawParties(c, ch)
		w.challenges = append(w.challenges, ch)
		for _, chn := range ch.channels {
			label := fmt.Sprintf("c%d/%s", ch.n, chn)
			in, sealed, msg := w.intent(ch, chn, "3", "")
			w.rows[in.Key()] = rowInfo{label: label, challenge: ch, channel: chn}
			w.keys = append(w.keys, in.Key())
			w.secrets = append(w.secrets, msg.To, msg.Body)
			w.add(&message{intent: in, sealed: sealed, label: label, kind: "original", at: ch.arrival})
			if c.coin(1, "redelivery") {
				at := ch.arrival + redeliveryDelays[c.pick(len(redeliveryDelays), "redelivery at")]
				w.add(&message{intent: in, sealed: sealed, label: label, kind: "redelivery", at: at})
			}
			if c.coin(2, "changed content") {
				in2, sealed2, msg2 := w.intent(ch, chn, "4", " (template 4)")
				w.secrets = append(w.secrets, msg2.Body)
				at := ch.arrival + redeliveryDelays[c.pick(len(redeliveryDelays), "changed content at")]
				w.add(&message{intent: in2, sealed: sealed2, label: label, kind: "changed content", at: at})
			}
		}
	}
	w.secrets = append(w.secrets, ledgertest.Canary)
	for _, chn := range ledger.Channels {
		t := transportSpec{cap: capability(c.pick(3, "capability "+string(chn)))}
		switch t.cap {
		case capKey:
			t.window = windows[c.pick(len(windows), "window")]
			t.events = c.coin(1, "events")
		case capLookup:
			t.lookupLag = lookupLags[c.pick(len(lookupLags), "lookup lag")]
		default:
			// SES and End User Messaging SMS: no key, no lookup, events.
			t.events = c.coin(1, "events")
		}
		t.mood = mood(c.pick(int(numMoods), "mood"))
		if t.cap == capKey && t.mood != moodLost && c.coin(1, "lost answers") {
			t.mood = moodLost // retry after retry: late in the window, past it, up to the budget
		}
		w.transports[chn] = t
		if r := rates[c.pick(len(rates), "send rate "+string(chn))]; r > 0 {
			w.rates[chn] = r
		}
		if w.asksAgain && w.limitsOn() {
			w.rates[chn] = rates[len(rates)-1]
		}
	}
	if c.coin(2, "deep retries") {
		// One world in four retries deep: every challenge lives ten
		// minutes and every provider honors a key and loses every answer,
		// so retries run to the end of the window and the attempt budget.
		for _, ch := range w.challenges {
			ch.lifetime = lifetimes[0]
		}
		for _, m := range w.messages {
			m.intent.ExpiresAt = ledgertest.Epoch.Add(w.rows[m.intent.Key()].challenge.arrival + lifetimes[0])
		}
		for _, chn := range ledger.Channels { // in order: a map's would draw differently on each run
			t := w.transports[chn]
			if t.cap != capKey {
				t.cap, t.window, t.lookupLag = capKey, windows[c.pick(len(windows), "deep window")], 0
			}
			t.mood = moodLost
			w.transports[chn] = t
		}
	}
	w.limits = [numFunctions]int{
		fnClaim:     1 + c.pick(2, "claim concurrency"),
		fnDispatch:  1 + c.pick(3, "dispatch concurrency"),
		fnReconcile: 1 + c.pick(2, "reconcile concurrency"),
		fnExpire:    1 + c.pick(2, "expire concurrency"),
		fnEvents:    1 + c.pick(2, "events concurrency"),
		fnOperator:  1,
	}
	// The retry budget: the default, or a longer one under which a window
	// measured from the wrong attempt lets retries run past it.
	w.policy.MaxAttempts = attemptBudgets[c.pick(len(attemptBudgets), "attempt budget")]
	w.faultSteps = faultStepUnit * (1 + c.pick(maxFaultSteps/faultStepUnit, "fault steps"))
	w.jitterSeed = uint64(c.pick(1<<16, "jitter seed"))
	w.drawLater(c)
	return w
}

// drawLater draws what the classes of issue 32 add to a world (classes.go),
// after everything else, so that a class switched off draws the world it
// drew before. Index 0 of each choice is where shrinking goes.
func (w *world) drawLater(c chooser) {
	if w.on(ClassSent) {
		for _, chn := range ledger.Channels {
			// A streak of throttling, more often where a player asks again
			// (an older challenge throttled while a newer one is claimed).
			odds := 2
			if w.asksAgain && w.sendLimits.Supersede {
				odds = 1
			}
			if c.coin(odds, "throttle streak "+string(chn)) {
				t := w.transports[chn]
				t.streak = streakEnds[c.pick(len(streakEnds), "streak ends")]
				w.transports[chn] = t
			}
		}
	}
	if w.on(ClassDeadline) {
		w.dbLatency = c.coin(1, "database latency")
	}
	old := w.on(ClassLifetime) && c.coin(1, "old intents")
	if old {
		for _, ch := range w.challenges {
			ch.age = intentAges[c.pick(len(intentAges), "issued before its arrival")]
			ch.boundGap = -1
			if c.coin(1, "lifetime at the bound") {
				ch.boundGap = boundGaps[c.pick(len(boundGaps), "below the bound by")]
			}
			ch.v1 = c.coin(2, "version 1")
		}
	}
	if w.on(ClassPolicy) && c.coin(1, "drawn policy") {
		w.drawPolicy(c)
	}
	defer w.drawKMS(c) // last: a tampered copy carries the intent as drawn
	if old {
		for _, ch := range w.challenges {
			if ch.boundGap >= 0 {
				ch.lifetime = w.policy.MaxChallengeLifetime - ch.boundGap
			}
		}
		for _, m := range w.messages {
			ch := w.rows[m.intent.Key()].challenge
			m.intent.IssuedAt, m.intent.ExpiresAt = ch.issuedAt(), ch.expiresAt()
			if ch.v1 {
				m.intent.IssuedAt = time.Time{}
			}
		}
	}
}

// drawPolicy draws the policy of a run (ClassPolicy) at and near the edges
// of Policy.Validate's relations: the margin down to the guard plus a
// millisecond, RetryMax equal to RetryBase, a lease shorter than
// reconcile's timeout. Index 0 of each choice is the default.
func (w *world) drawPolicy(c chooser) {
	p := &w.policy
	p.SendGuard = sendGuards[c.pick(len(sendGuards), "send guard")]
	switch c.pick(3, "expiry margin") {
	case 0:
	case 1:
		p.ExpiryMargin = 10 * time.Second
	default:
		p.ExpiryMargin = p.SendGuard + time.Millisecond // the edge of ExpiryMargin > SendGuard
	}
	p.Lease = leases[c.pick(len(leases), "lease")]
	b := retryBackoffs[c.pick(len(retryBackoffs), "retry backoff")]
	p.RetryBase, p.RetryMax = b[0], b[1]
	p.RecheckAfter = rechecks[c.pick(len(rechecks), "recheck after")]
	p.MaxChallengeLifetime = maxLifetimes[c.pick(len(maxLifetimes), "maximum lifetime")]
	if err := p.Validate(); err != nil {
		panic("sim: a drawn policy is invalid: " + err.Error())
	}
}

// The choices of a drawn policy (ClassPolicy).
var (
	sendGuards    = []time.Duration{5 * time.Second, time.Second, 2 * time.Second}
	leases        = []time.Duration{2 * time.Minute, 40 * time.Second, 20 * time.Second}
	retryBackoffs = [][2]time.Duration{{2 * time.Second, time.Minute}, {time.Second, time.Second}, {5 * time.Second, 30 * time.Second}}
	rechecks      = []time.Duration{time.Minute, 10 * time.Second}
	// Above 30 minutes: the margin's setting read as minutes (mutant
	// ExpireMarginMinutes) must still make a policy the expire function
	// can be built with.
	maxLifetimes = []time.Duration{time.Hour, 45 * time.Minute}
)

// intentAges are how long before its arrival a challenge may be issued
// (ClassLifetime): a queue that held it, a producer that retried late.
var intentAges = []time.Duration{0, 50 * time.Minute, 3 * time.Hour}

// boundGaps are how far below MAX_CHALLENGE_LIFETIME past its arrival a
// challenge at the bound expires: the margin, a second (a claimant whose
// clock runs a second behind still claims it), none (such a claimant
// refuses it).
var boundGaps = []time.Duration{30 * time.Second, time.Second, 0}

// dbLatencies are how long after it took effect a database call may answer.
var dbLatencies = []time.Duration{300 * time.Millisecond, 3 * time.Second, 12 * time.Second}

// streakEnds are when a throttle streak ends, from the epoch.
var streakEnds = []time.Duration{45 * time.Second, 2 * time.Minute, 4 * time.Minute}

func (w *world) add(m *message) {
	m.id = len(w.messages) + 1
	w.messages = append(w.messages, m)
}

// intent builds the intent of one channel of ch, with its secret-bearing
// message sealed as ledgertest.PlainOpener reads it.
func (w *world) intent(ch *challenge, chn ledger.Channel, templateVersion, bodySuffix string) (ledger.Intent, []byte, ledger.Message) {
	m := ledgertest.Message(ch.n, chn)
	m.To = ch.to[chn]
	m.Body += bodySuffix
	in := ledger.Intent{
		Identity:        ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: ch.id, Channel: chn},
		Workflow:        ch.workflow,
		DestinationRef:  fmt.Sprintf("acct-%06d:%s", ch.n, chn),
		SubjectRef:      ch.subject,
		IssuedAt:        ch.issuedAt(),
		ExpiresAt:       ch.expiresAt(),
		TemplateID:      "reset-" + string(chn),
		TemplateVersion: templateVersion,
		PolicyVersion:   "policy-1",
	}
	in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	return in, ledgertest.Seal(m), m
}

// describe is the world in a few lines, for reports.
func (w *world) describe() string {
	var b strings.Builder
	for _, ch := range w.challenges {
		wf := string(ch.workflow.Kind)
		if ch.workflow.Kind == ledger.Fallback {
			wf += fmt.Sprintf(" %s→%s", ch.workflow.Order[0], ch.workflow.Order[1])
		}
		issued := ""
		if ch.age > 0 {
			issued = fmt.Sprintf(", issued %s before its arrival", ch.age)
		}
		if ch.v1 {
			issued += ", version-1 intents (no issued_at)"
		}
		fmt.Fprintf(&b, "    c%d %s, lifetime %s%s, %s%s\n", ch.n, ch.id, ch.lifetime, issued, wf, ch.describeParties())
	}
	for _, m := range w.messages {
		if m.kind != "original" {
			fmt.Fprintf(&b, "    intent %s %s at +%s\n", m.label, m.kind, m.at)
		}
	}
	for _, chn := range ledger.Channels {
		rate := "no send-rate budget"
		if r := w.rates[chn]; r > 0 {
			rate = fmt.Sprintf("budget %g/s", r)
		}
		fmt.Fprintf(&b, "    %s transport: %s; %s\n", chn, w.transports[chn], rate)
	}
	if p, d := w.policy, simPolicy(); p.SendGuard != d.SendGuard || p.ExpiryMargin != d.ExpiryMargin || p.Lease != d.Lease ||
		p.RetryBase != d.RetryBase || p.RetryMax != d.RetryMax || p.RecheckAfter != d.RecheckAfter || p.MaxChallengeLifetime != d.MaxChallengeLifetime {
		fmt.Fprintf(&b, "    policy drawn: guard %s, margin %s, lease %s, retry backoff %s to %s, recheck %s, maximum lifetime %s\n",
			p.SendGuard, p.ExpiryMargin, p.Lease, p.RetryBase, p.RetryMax, p.RecheckAfter, p.MaxChallengeLifetime)
	}
	fmt.Fprintf(&b, "    %s\n", w.describeLimits())
	if w.dbLatency {
		fmt.Fprintf(&b, "    database calls may answer %v after they take effect\n", dbLatencies)
	}
	fmt.Fprintf(&b, "    concurrency: claim %d, dispatch %d, reconcile %d, expire %d; fault phase %d steps\n",
		w.limits[fnClaim], w.limits[fnDispatch], w.limits[fnReconcile], w.limits[fnExpire], w.faultSteps)
	return b.String()
}
