package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/logging"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/producer"
)

func itoa(n int) string { return strconv.Itoa(n) }

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s: want a positive integer", name)
	}
	return n
}

// Scenario timing on the functions' clock. Normal challenges live an hour,
// "expiring" ones five minutes; the clock jumps ten minutes before the first
// delivery, so those expire while they wait in the queue.
const (
	liveTTL      = time.Hour
	shortTTL     = 5 * time.Minute
	queueWait    = 10 * time.Minute
	expiryMargin = 30 * time.Second
	lease        = 2 * time.Minute
	webhookWait  = time.Second
	maxReceives  = 5 // as infra/stack.go
	streamTries  = 4 // first delivery plus the event source's retries
	queueWorkers = 3
	streamWorker = 4
)

// plan is one logical message (identity) of the scenario.
type plan struct {
	n         producer.Notification
	key       string
	challenge int
	workflow  ledger.WorkflowKind
	expiring  bool
	fault     fault
	redeliver string // "", "concurrent" or "late"
	mismatch  bool
	changed   producer.Notification
}

type poison struct {
	kind, body, msgID string
}

type challenge struct {
	workflow ledger.WorkflowKind
	keys     []string // in workflow order
}

// TestGate runs the release-gate scenario: GATE_INTENTS intents (default
// 200) through claim, dispatch, reconcile and expire with every fault of
// RELIABILITY.md injected, then accounts for each one. Each phase is a
// method of gateRun; the accounting phases add to one list of failures,
// which fails the test after the table is printed.
func TestGate(t *testing.T) {
	g := newGateRun(t)
	g.planScenario()
	g.publishAll()
	g.sweep()
	ev := g.collectEvidence()
	acc := newAccounting()
	for _, pl := range g.plans {
		g.accountPlan(acc, ev, pl)
	}
	g.accountFallbacks(acc, ev)
	g.accountPoisons(acc, ev)
	g.privacySweep(acc, ev)
	fmt.Print(g.table(acc, ev))
	if len(acc.failures) > 0 {
		failures := acc.failures
		if len(failures) > 40 {
			failures = append(failures[:40], fmt.Sprintf("... and %d more", len(failures)-40))
		}
		t.Fatalf("release gate failed:\n%s", strings.Join(failures, "\n"))
	}
}

// gateRun is one run of the release-gate scenario: its settings, the
// pipeline under test, the plan and what the delivery phases counted.
type gateRun struct {
	t       *testing.T
	total   int
	seed    uint64
	started time.Time
	inj     *injector
	p       *pipelinetest.Pipeline
	rng     *rand.Rand
	audit   *dynamostore.Store

	plans      []*plan
	byKey      map[string]*plan
	challenges []challenge
	poisons    []*poison

	published int
	stream    *streamStats
	rounds    int
	sweepErrs int

	tPublished, tDelivered, tSwept time.Duration
}

// newGateRun reads the settings (GATE_INTENTS, GATE_SEED,
// GATE_DDB_FAULT_RATE) and starts the pipeline with the injector's faults.
func newGateRun(t *testing.T) *gateRun {
	g := &gateRun{t: t, total: envInt(t, "GATE_INTENTS", 200), seed: uint64(envInt(t, "GATE_SEED", 20260701)), stream: &streamStats{}}
	ddbRate, _ := strconv.ParseFloat(os.Getenv("GATE_DDB_FAULT_RATE"), 64)
	if ddbRate == 0 {
		ddbRate = 0.05
	}
	g.started = time.Now()
	g.inj = newInjector(g.seed, ddbRate, webhookWait+300*time.Millisecond)
	// The send limits are on, as deployed: each challenge has an address of
	// its own per channel, so no limit stops a row and the faults reach the
	// counters' calls too. The SMS caps, circuit breakers sized for an hour
	// of ordinary traffic, are raised to the run's size.
	perHour := fmt.Sprintf("%d/1h", g.total)
	g.p = pipelinetest.NewWithOptions(t, pipelinetest.Options{
		Env: map[string]string{
			"EXPIRY_MARGIN": expiryMargin.String(), "LEASE_DURATION": lease.String(), "RECHECK_AFTER": "1ms",
			"WEBHOOK_TIMEOUT": webhookWait.String(), "WEBHOOK_KEY_WINDOW": "0s",
			settings.LimitSMSCountry.Env: perHour, settings.LimitSMSGlobal.Env: perHour,
		},
		Limits:             true,
		FunctionAPIOptions: g.inj.apiOptions(),
		FunctionConfig: func(c *aws.Config) {
			// The default retry policy (3 attempts, retry token bucket), with
			// the backoff cut to 20 ms so the run does not sleep for minutes.
			c.Logger = logging.Nop{} // the injected 500s leave unread bodies the SDK would warn about
			c.Retryer = func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond })
			}
		},
		WrapProvider: g.inj.provider,
		MaxReceives:  maxReceives,
		SweepLimit:   500,
	})
	g.inj.now = g.p.Now
	g.rng = rand.New(rand.NewPCG(g.seed, 7))
	g.audit = dynamostore.New(g.p.DB, g.p.LedgerTable, dynamostore.DefaultShards)
	return g
}

// planScenario draws the plan: 2% poison, the rest over challenges of four
// workflows (email only, SMS only, dual, fallback), a tenth of them expiring
// in the queue, with faults, redeliveries and changed content spread over
// the identities.
func (g *gateRun) planScenario() {
	nPoison := max(3, g.total*2/100)
	valid := g.total - nPoison
	fallbackOrder := []ledger.Channel{ledger.Email, ledger.SMS}
	for c := 1; len(g.plans) < valid; c++ {
		wf, chans := ledger.Single, []ledger.Channel{ledger.Email}
		switch r := g.rng.IntN(8); {
		case r == 0: // email only
		case r == 1:
			chans = []ledger.Channel{ledger.SMS}
		case r < 5:
			wf, chans = ledger.Dual, fallbackOrder
		default:
			wf, chans = ledger.Fallback, fallbackOrder
		}
		if valid-len(g.plans) < len(chans) {
			wf, chans = ledger.Single, chans[:1]
		}
		expiring := g.rng.Float64() < 0.10
		ch := challenge{workflow: wf}
		for _, channel := range chans {
			workflow := ledger.Workflow{Kind: wf}
			if wf == ledger.Fallback {
				workflow.Order = fallbackOrder
			}
			pl := g.planMessage(c, channel, workflow, expiring)
			g.inj.transport[pl.key] = pl.fault
			g.plans = append(g.plans, pl)
			ch.keys = append(ch.keys, pl.key)
		}
		g.challenges = append(g.challenges, ch)
	}
	g.byKey = map[string]*plan{}
	for _, pl := range g.plans {
		g.byKey[pl.key] = pl
	}
	g.poisons = make([]*poison, nPoison)
	for i := range g.poisons {
		g.poisons[i] = poisonIntent(i, g.p)
	}
}

// planMessage plans one message of challenge c in workflow: its
// notification, the fault of its first send, whether it is redelivered and
// whether a copy with changed content follows it.
func (g *gateRun) planMessage(c int, channel ledger.Channel, workflow ledger.Workflow, expiring bool) *plan {
	ttl := liveTTL
	if expiring {
		ttl = shortTTL
	}
	n := g.p.Notification(c, channel, ttl)
	n.Workflow = workflow
	wf := workflow.Kind
	key := ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: channel}.Key()
	pl := &plan{n: n, key: key, challenge: c, workflow: wf, expiring: expiring}
	switch r := g.rng.Float64(); {
	case wf == ledger.Fallback && channel == ledger.Email && r < 0.35:
		pl.fault = faultReject // so that some fallbacks move on to SMS
	case r < 0.02:
		pl.fault = faultReject
	case r < 0.045:
		pl.fault = faultAckLost
	case r < 0.07:
		if channel == ledger.SMS {
			pl.fault = faultSlow
		} else {
			pl.fault = faultAckLost
		}
	case r < 0.12:
		pl.fault = faultKill
	}
	switch r := g.rng.Float64(); {
	case r < 0.15:
		pl.redeliver = "concurrent"
	case r < 0.30:
		pl.redeliver = "late"
	}
	if g.rng.Float64() < 0.02 {
		pl.mismatch = true
		pl.changed = n
		pl.changed.TemplateVersion = "4"
		pl.changed.Message.Body += " (reworded)"
	}
	return pl
}

// pub is one message to publish: a notification, or a poison body.
type pub struct {
	n   *producer.Notification
	raw *poison
}

// publishAll publishes the originals, concurrent redeliveries, mismatches
// and poison shuffled together, advances the clock by queueWait, and
// delivers the queue and the stream in rounds; late redeliveries are
// published in round two.
func (g *gateRun) publishAll() {
	var first, late []pub
	for _, pl := range g.plans {
		first = append(first, pub{n: &pl.n})
		switch pl.redeliver {
		case "concurrent":
			first = append(first, pub{n: &pl.n})
		case "late":
			late = append(late, pub{n: &pl.n})
		}
		if pl.mismatch {
			first = append(first, pub{n: &pl.changed})
		}
	}
	for _, ps := range g.poisons {
		first = append(first, pub{raw: ps})
	}
	g.rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	g.publish(first)
	g.published = len(first) + len(late)
	g.tPublished = time.Since(g.started)

	g.p.Advance(queueWait)
	for g.rounds = 1; g.rounds <= maxReceives+3; g.rounds++ {
		if g.rounds == 2 {
			g.publish(late)
		}
		held := pumpQueueRound(g.t, g.p, queueWorkers)
		pumpStreamRound(g.t, g.p, g.stream, g.rng)
		if held == 0 && g.rounds >= 2 && queueEmpty(g.t, g.p) {
			break
		}
	}
	// Messages whose receive response the emulator dropped are in flight
	// with nobody processing them; they come back after the visibility
	// timeout, as they would for a Lambda poller.
	for extra := 0; extra < 3 && !queueEmpty(g.t, g.p) && g.p.WaitInFlight(); extra++ {
		pumpQueueRound(g.t, g.p, queueWorkers)
		pumpStreamRound(g.t, g.p, g.stream, g.rng)
	}
	g.tDelivered = time.Since(g.started)
}

// publish sends batch to the intents queue from eight goroutines; a poison
// body is sent raw and its message id remembered.
func (g *gateRun) publish(batch []pub) {
	p := g.p
	var wg sync.WaitGroup
	errs := make(chan error, len(batch))
	work := make(chan pub)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range work {
				if m.raw != nil {
					out, err := p.SQS.SendMessage(p.Ctx, &sqs.SendMessageInput{QueueUrl: &p.QueueURL, MessageBody: &m.raw.body})
					if err != nil {
						errs <- err
						continue
					}
					m.raw.msgID = *out.MessageId
					continue
				}
				if _, err := p.Producer.Publish(p.Ctx, *m.n); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, m := range batch {
		work <- m
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		g.t.Fatalf("publish: %v", err)
	}
}

// sweep runs the scheduled sweeps: past the lease, reconcile until nothing
// is due; then past every expiry, expire until nothing is claimed or held;
// then the stream records of late claims, if any.
func (g *gateRun) sweep() {
	p := g.p
	p.Advance(lease + time.Second)
	g.sweepUntil(p.Reconcile.Handle, func() int {
		return g.openRows(ledger.Dispatching, p.Now()) + g.openRows(ledger.Unknown, p.Now())
	}, func() { p.Advance(time.Second) })
	p.Advance(2 * liveTTL)
	g.sweepUntil(p.Expire.Handle, func() int {
		return g.openRows(ledger.Claimed, p.Now()) + g.openRows(ledger.Held, time.Time{})
	}, func() {})
	pumpStreamRound(g.t, p, g.stream, g.rng)
	g.tSwept = time.Since(g.started)
}

// sweepUntil runs handle (a scheduled function) up to 20 times, until left
// reports no row left for it, calling between after every run that left
// some. A failed run is counted, not fatal.
func (g *gateRun) sweepUntil(handle func(context.Context, events.CloudWatchEvent) error, left func() int, between func()) {
	for i := 0; i < 20; i++ {
		if err := handle(g.p.Ctx, events.CloudWatchEvent{}); err != nil {
			g.sweepErrs++
		}
		if left() == 0 {
			break
		}
		between()
	}
}

// openRows returns how many rows (0 or 1: it asks for one) are open in state
// and due by dueBy (any, if zero).
func (g *gateRun) openRows(state ledger.State, dueBy time.Time) int {
	rows, err := g.audit.ListOpen(g.p.Ctx, state, dueBy, 1)
	if err != nil {
		g.t.Fatal(err)
	}
	return len(rows)
}

// evidence is what the run left behind: the ledger rows, the DLQ, the
// reasons the claim function logged, the emails the emulator's SES captured,
// the SMS the provider recorded and the times the transports were called.
type evidence struct {
	rows      map[string]ledger.Entry
	dlq       []dlqMsg
	dlqByKey  map[string][]dlqMsg
	dlqPoison int
	reasons   map[string]string
	captured  int
	emails    map[string]int
	sendTimes map[string][]time.Time
}

// collectEvidence reads the evidence; a dead-lettered body that decodes as
// an intent is filed under its dedupe key, any other is poison.
func (g *gateRun) collectEvidence() *evidence {
	ev := &evidence{
		rows:      readRows(g.t, g.p, g.audit, g.plans),
		dlq:       drainDLQ(g.t, g.p),
		dlqByKey:  map[string][]dlqMsg{},
		reasons:   logReasons(g.p.Out.String()),
		sendTimes: g.inj.sendTimes(),
	}
	ev.captured, ev.emails = capturedEmails(g.t, g.p)
	for _, m := range ev.dlq {
		dec, err := intent.Decode([]byte(m.body))
		in := dec.Intent
		if err != nil {
			ev.dlqPoison++
			continue
		}
		ev.dlqByKey[in.Key()] = append(ev.dlqByKey[in.Key()], m)
	}
	return ev
}

// sent returns how many times the provider took pl's message: emails the
// emulator's SES captured for its address, or SMS the provider recorded for
// its key.
func (g *gateRun) sent(ev *evidence, pl *plan) int {
	if pl.n.Channel == ledger.Email {
		return ev.emails[pl.n.Message.To]
	}
	return g.p.Provider.Recorded(pl.key)
}

// accounting is the gate's verdict: a bucket per outcome, the counts the
// table prints, and every failure found.
type accounting struct {
	failures                                  []string
	buckets                                   map[string]int
	totalSent, dupes, lateSends, fallbackBoth int
	leftover                                  map[string]int
}

func newAccounting() *accounting {
	return &accounting{buckets: map[string]int{}, leftover: map[string]int{}}
}

func (acc *accounting) fail(format string, a ...any) {
	acc.failures = append(acc.failures, fmt.Sprintf(format, a...))
}

// accountPlan files one planned message in a bucket: dead-lettered (with
// its logged reason) when it has no row, else its row's state; and checks
// it was sent at most once, only in a state that allows it, before its
// expiry, never inside the expiry margin, with its recorded content.
func (g *gateRun) accountPlan(acc *accounting, ev *evidence, pl *plan) {
	k := g.sent(ev, pl)
	acc.totalSent += k
	if k > 1 {
		acc.dupes++
		acc.fail("duplicate: %s/%s recorded %d times by the provider", pl.n.ChallengeID, pl.n.Channel, k)
	}
	row, ok := ev.rows[pl.key]
	if !ok {
		g.accountDeadLettered(acc, ev, pl, k)
		return
	}
	if err := row.Verify(); err != nil {
		acc.fail("history: %v", err)
	}
	acc.buckets[g.stateBucket(acc, ev, pl, row, k)]++
	if pl.expiring && k > 0 {
		acc.fail("expired challenge %s/%s was sent", pl.n.ChallengeID, pl.n.Channel)
	}
	for _, at := range ev.sendTimes[pl.key] {
		if !at.Before(row.ExpiresAt) {
			acc.lateSends++
			acc.fail("late send: %s/%s at %s, expires %s", pl.n.ChallengeID, pl.n.Channel, at.Format(time.RFC3339), row.ExpiresAt.Format(time.RFC3339))
		}
	}
	for _, e := range row.History {
		if e.To == ledger.Dispatching && !e.At.Add(expiryMargin).Before(row.ExpiresAt) {
			acc.fail("dispatch of %s/%s began inside the expiry margin", pl.n.ChallengeID, pl.n.Channel)
		}
	}
	if pl.mismatch && row.Mismatches == 0 && len(ev.dlqByKey[pl.key]) == 0 {
		acc.fail("mismatch for %s/%s was not recorded", pl.n.ChallengeID, pl.n.Channel)
	}
	if pl.n.Channel == ledger.SMS && k > 0 {
		for _, m := range g.p.Provider.Messages() {
			if m.IdempotencyKey == pl.key && m.ContentHash != row.ContentHash {
				acc.fail("%s/%s sent content %s but the row records %s", pl.n.ChallengeID, pl.n.Channel, m.ContentHash, row.ContentHash)
			}
		}
	}
}

// accountDeadLettered files a planned message without a row: it must be in
// the DLQ with a logged reason, and never sent.
func (g *gateRun) accountDeadLettered(acc *accounting, ev *evidence, pl *plan, k int) {
	ms := ev.dlqByKey[pl.key]
	if len(ms) == 0 {
		acc.fail("lost: %s/%s has no row and is not in the DLQ", pl.n.ChallengeID, pl.n.Channel)
		acc.buckets["LOST"]++
		return
	}
	reason := ev.reasons[ms[0].id]
	if reason == "" {
		reason = "no reason logged"
		acc.fail("dead-lettered without a reason: %s/%s", pl.n.ChallengeID, pl.n.Channel)
	}
	acc.buckets["dead-lettered: "+reasonClass(reason)]++
	if k != 0 {
		acc.fail("dead-lettered %s/%s was sent %d times", pl.n.ChallengeID, pl.n.Channel, k)
	}
}

// stateBucket names the bucket of a row that ended in its state after k
// sends, and checks the sends fit the state: one (with an ack id) for
// accepted, none for rejected, expired, suppressed and held.
func (g *gateRun) stateBucket(acc *accounting, ev *evidence, pl *plan, row ledger.Entry, k int) string {
	b := string(row.State)
	switch row.State {
	case ledger.Accepted:
		if k != 1 {
			acc.fail("accepted %s/%s but the provider recorded %d", pl.n.ChallengeID, pl.n.Channel, k)
		}
		if row.AckID == "" {
			acc.fail("accepted %s/%s without an ack id", pl.n.ChallengeID, pl.n.Channel)
		}
		if strings.Contains(row.Reason, "after the lease") {
			b += " (ack after lease)"
		}
	case ledger.Rejected, ledger.Expired, ledger.Suppressed:
		if k != 0 {
			acc.fail("%s %s/%s was sent %d times", row.State, pl.n.ChallengeID, pl.n.Channel, k)
		}
		if row.State == ledger.Expired {
			b += expiredWhen(row.Reason)
		}
	case ledger.Unknown, ledger.Quarantined:
		b += fmt.Sprintf(" (%d sent)", k)
	case ledger.Held:
		// Only while the earlier channel is open; the sweeps settle the rest.
		if k != 0 {
			acc.fail("held %s/%s was sent %d times", pl.n.ChallengeID, pl.n.Channel, k)
		}
		if prev := ev.rows[ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: pl.n.ChallengeID, Channel: ledger.Email}.Key()]; prev.State.Terminal() {
			acc.fail("%s/%s still held although email ended %s", pl.n.ChallengeID, pl.n.Channel, prev.State)
		}
	default:
		acc.fail("unaccounted: %s/%s ended %s", pl.n.ChallengeID, pl.n.Channel, row.State)
	}
	return b
}

// expiredWhen names, from an expired row's reason, when it expired.
func expiredWhen(reason string) string {
	switch {
	case strings.Contains(reason, "while held"):
		return " (while held for the email)"
	case strings.Contains(reason, "never dispatched"):
		return " (claimed, never dispatched)"
	case strings.Contains(reason, "before dispatch"):
		return " (before dispatch)"
	}
	return " (in the queue)"
}

// accountFallbacks checks every fallback challenge: at most one channel
// sent, and SMS claimed at all only after the email's rejection was
// recorded (held only while the email is open).
func (g *gateRun) accountFallbacks(acc *accounting, ev *evidence) {
	for _, c := range g.challenges {
		if c.workflow != ledger.Fallback {
			continue
		}
		n := 0
		for _, k := range c.keys {
			if g.sent(ev, g.byKey[k]) > 0 {
				n++
			}
		}
		id := g.byKey[c.keys[0]].n.ChallengeID
		email, sms := ev.rows[c.keys[0]], ev.rows[c.keys[1]]
		if n > 1 {
			acc.fallbackBoth++
			acc.fail("fallback %s sent on both channels", id)
		}
		switch sms.State {
		case "", ledger.Suppressed, ledger.Expired:
		case ledger.Held:
			if email.State.Terminal() {
				acc.fail("fallback %s: SMS still held although email ended %s", id, email.State)
			}
		default:
			// Claimed at all: only after the email's rejection was recorded.
			rejectedAt, claimedAt := eventTime(email, ledger.Rejected), eventTime(sms, ledger.Claimed)
			if email.State != ledger.Rejected || claimedAt.Before(rejectedAt) {
				acc.fail("fallback %s: SMS is %s (claimed %s) while email is %s (rejected %s)", id,
					sms.State, claimedAt.Format(time.RFC3339Nano), email.State, rejectedAt.Format(time.RFC3339Nano))
			}
		}
	}
}

// accountPoisons checks every poison message is in the DLQ with a logged
// reason.
func (g *gateRun) accountPoisons(acc *accounting, ev *evidence) {
	for _, ps := range g.poisons {
		found := false
		for _, m := range ev.dlq {
			if m.id == ps.msgID || m.body == ps.body {
				found = true
			}
		}
		if !found {
			acc.fail("poison %q is not in the DLQ", ps.kind)
			acc.buckets["LOST"]++
			continue
		}
		if ev.reasons[ps.msgID] == "" {
			acc.fail("poison %q dead-lettered without a logged reason", ps.kind)
		}
		acc.buckets["poison dead-lettered: "+ps.kind]++
	}
}

// privacySweep checks no secret reached any table, log or queue, no
// plaintext reached the content table, and counts the sealed blobs left
// there by the state of their row.
func (g *gateRun) privacySweep(acc *accounting, ev *evidence) {
	g.p.AssertNoSecrets()
	for _, item := range g.p.ScanTable(g.p.ContentTable) {
		if strings.Contains(item, ledgertest.Canary) || strings.Contains(item, "example.test") || strings.Contains(item, "reset?token") {
			acc.fail("plaintext in the content table: %.80s", item)
		}
		m := contentPK.FindStringSubmatch(item)
		if m == nil {
			acc.leftover["unparsable"]++
			continue
		}
		switch row, ok := ev.rows[m[1]]; {
		case !ok:
			acc.leftover["no row"]++
		case row.ContentHash != m[2]:
			acc.leftover["orphan (other content hash)"]++
		default:
			acc.leftover[string(row.State)]++
		}
	}
}

// table is the accounting table the gate prints.
func (g *gateRun) table(acc *accounting, ev *evidence) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nRELEASE GATE  %d intents (%d valid over %d challenges, %d poison), %d messages published, seed %d\n",
		g.total, len(g.plans), len(g.challenges), len(g.poisons), g.published, g.seed)
	fmt.Fprintf(&sb, "injected plan: %s\n", planSummary(g.plans))
	fmt.Fprintf(&sb, "injected faults (as they fired):\n%s", fmtCounts(g.inj))
	fmt.Fprintf(&sb, "stream: %d batches, %d delivered twice concurrently, %d batch retries, %d records given up; queue rounds %d; sweep runs failed %d\n",
		g.stream.batches, g.stream.doubled, g.stream.retries, g.stream.givenUp, g.rounds, g.sweepErrs)
	fmt.Fprintf(&sb, "%-52s %6s\n", "bucket", "count")
	var names []string
	sum := 0
	for k, v := range acc.buckets {
		names = append(names, k)
		sum += v
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&sb, "%-52s %6d\n", k, acc.buckets[k])
	}
	fmt.Fprintf(&sb, "%-52s %6d   (intents %d)\n", "TOTAL", sum, g.total)
	fmt.Fprintf(&sb, "provider-recorded messages %d (emails %d, SMS %d); DLQ holds %d (poison %d)\n",
		acc.totalSent, ev.captured, len(g.p.Provider.Messages()), len(ev.dlq), ev.dlqPoison)
	fmt.Fprintf(&sb, "duplicates %d, late sends %d, fallback on both channels %d, lost %d, sealed blobs left (TTL-bound) %v\n",
		acc.dupes, acc.lateSends, acc.fallbackBoth, acc.buckets["LOST"], acc.leftover)
	fmt.Fprintf(&sb, "timings: published %s, delivered %s, swept %s, total %s\n",
		g.tPublished.Round(time.Millisecond), g.tDelivered.Round(time.Millisecond), g.tSwept.Round(time.Millisecond), time.Since(g.started).Round(time.Millisecond))
	return sb.String()
}

var contentPK = regexp.MustCompile(`pk=([0-9a-f]{64}):([0-9a-f]{64}) `)

func planSummary(plans []*plan) string {
	c := map[string]int{}
	for _, pl := range plans {
		if pl.workflow == ledger.Single {
			c["workflow single "+string(pl.n.Channel)]++
		} else {
			c["workflow "+string(pl.workflow)]++
		}
		if pl.expiring {
			c["expire in queue"]++
		}
		if pl.fault != faultNone {
			c[string(pl.fault)]++
		}
		if pl.redeliver != "" {
			c["redelivered ("+pl.redeliver+")"]++
		}
		if pl.mismatch {
			c["changed content hash"]++
		}
	}
	var keys []string
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c[k]))
	}
	return strings.Join(parts, ", ")
}

// eventTime returns when e's history first entered state to (zero if never).
func eventTime(e ledger.Entry, to ledger.State) time.Time {
	for _, ev := range e.History {
		if ev.To == to && ev.From != to {
			return ev.At
		}
	}
	return time.Time{}
}

// reasonClass shortens a logged reason to a bucket name.
func reasonClass(reason string) string {
	if strings.Contains(reason, "injected") {
		return "store errors on every receive"
	}
	if len(reason) > 40 {
		reason = reason[:40]
	}
	return reason
}

func poisonIntent(i int, p *pipelinetest.Pipeline) *poison {
	switch i % 3 {
	case 0:
		return &poison{kind: "malformed JSON", body: fmt.Sprintf(`{"schema_version":1,"purpose":"password-reset","challenge_id":"poison-%d","channel":"email","token":"%s`, i, ledgertest.Canary)}
	case 1:
		return &poison{kind: "schema-invalid", body: fmt.Sprintf(`{"schema_version":1,"purpose":"password-reset","challenge_id":"poison-%d","channel":"fax","workflow":{"kind":"single"},"destination_ref":"%s"}`, i, ledgertest.Canary)}
	}
	return &poison{kind: "unknown version", body: fmt.Sprintf(`{"schema_version":4,"challenge_id":"poison-%d","body":"%s"}`, i, ledgertest.Canary)}
}

// pumpQueueRound delivers what the queue holds to the claim handler from
// several goroutines at once, as concurrent Lambda pollers would. Failed
// records stay invisible until the round ends (the visibility timeout),
// then become visible again; it returns how many were held.
func pumpQueueRound(t *testing.T, p *pipelinetest.Pipeline, workers int) int {
	t.Helper()
	var mu sync.Mutex
	var held []string
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				out, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{
					QueueUrl: &p.QueueURL, MaxNumberOfMessages: 10, VisibilityTimeout: pipelinetest.ReceiveVisibility,
					MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
				})
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				if len(out.Messages) == 0 {
					return
				}
				var ev events.SQSEvent
				for _, m := range out.Messages {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, Attributes: m.Attributes})
				}
				resp, err := p.Claim.Handle(p.Ctx, ev)
				if err != nil {
					mu.Lock()
					firstErr = fmt.Errorf("claim failed the whole batch: %w", err)
					mu.Unlock()
					return
				}
				failed := map[string]bool{}
				for _, f := range resp.BatchItemFailures {
					failed[f.ItemIdentifier] = true
				}
				var del []sqstypes.DeleteMessageBatchRequestEntry
				for i, m := range out.Messages {
					if failed[*m.MessageId] {
						mu.Lock()
						held = append(held, *m.ReceiptHandle)
						mu.Unlock()
						continue
					}
					del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
				}
				if len(del) > 0 {
					if _, err := p.SQS.DeleteMessageBatch(p.Ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &p.QueueURL, Entries: del}); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	for _, h := range held {
		if _, err := p.SQS.ChangeMessageVisibility(p.Ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: &p.QueueURL, ReceiptHandle: aws.String(h), VisibilityTimeout: 0}); err != nil {
			t.Fatal(err)
		}
	}
	return len(held)
}

func queueEmpty(t *testing.T, p *pipelinetest.Pipeline) bool {
	t.Helper()
	out, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &p.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

type streamStats struct {
	mu                                 sync.Mutex
	batches, doubled, retries, givenUp int
}

// pumpStreamRound delivers the new claims on the ledger stream to the
// dispatch handler in batches of ten from several workers; a tenth of the
// batches is delivered twice at once (duplicate invocations). A batch that
// reports a failure is redelivered from the failed record on, up to
// streamTries times, as the event source would; then it is given up (the
// on-failure destination) and the expire sweep closes its rows.
func pumpStreamRound(t *testing.T, p *pipelinetest.Pipeline, st *streamStats, rng *rand.Rand) {
	t.Helper()
	ev := p.ReadStream()
	var batches [][]events.DynamoDBEventRecord
	for i := 0; i < len(ev.Records); i += 10 {
		batches = append(batches, ev.Records[i:min(i+10, len(ev.Records))])
	}
	double := make([]bool, len(batches))
	for i := range double {
		double[i] = rng.Float64() < 0.10
	}
	deliver := func(recs []events.DynamoDBEventRecord) {
		for try := 1; len(recs) > 0; try++ {
			resp, err := p.Dispatch.Handle(p.Ctx, events.DynamoDBEvent{Records: recs})
			if err == nil && len(resp.BatchItemFailures) == 0 {
				return
			}
			st.mu.Lock()
			if try == streamTries {
				st.givenUp += len(recs)
				st.mu.Unlock()
				return
			}
			st.retries++
			st.mu.Unlock()
			if err == nil {
				seq := resp.BatchItemFailures[0].ItemIdentifier
				for i, r := range recs {
					if r.Change.SequenceNumber == seq {
						recs = recs[i:]
						break
					}
				}
			}
		}
	}
	work := make(chan int)
	var wg sync.WaitGroup
	for range streamWorker {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				st.mu.Lock()
				st.batches++
				st.mu.Unlock()
				if !double[i] {
					deliver(batches[i])
					continue
				}
				st.mu.Lock()
				st.doubled++
				st.mu.Unlock()
				var inner sync.WaitGroup
				for range 2 {
					inner.Add(1)
					go func() { defer inner.Done(); deliver(batches[i]) }()
				}
				inner.Wait()
			}
		}()
	}
	for i := range batches {
		work <- i
	}
	close(work)
	wg.Wait()
}

func readRows(t *testing.T, p *pipelinetest.Pipeline, st *dynamostore.Store, plans []*plan) map[string]ledger.Entry {
	t.Helper()
	rows := map[string]ledger.Entry{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	var firstErr error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range work {
				e, err := st.Get(context.Background(), k)
				mu.Lock()
				switch {
				case err == nil:
					rows[k] = e
				case !errors.Is(err, ledger.ErrNotFound):
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	for _, pl := range plans {
		work <- pl.key
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return rows
}

type dlqMsg struct{ id, body string }

func drainDLQ(t *testing.T, p *pipelinetest.Pipeline) []dlqMsg {
	t.Helper()
	// Count first (the DLQ no longer changes), then receive with a short
	// visibility until every message was seen: a receive whose response the
	// emulator dropped leaves its messages in flight until they reappear.
	attrs, err := p.SQS.GetQueueAttributes(p.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: &p.DLQURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(attrs.Attributes["ApproximateNumberOfMessages"])
	inFlight, _ := strconv.Atoi(attrs.Attributes["ApproximateNumberOfMessagesNotVisible"])
	seen := map[string]dlqMsg{}
	deadline := time.Now().Add(3 * pipelinetest.ReceiveVisibility * time.Second)
	for len(seen) < visible+inFlight && time.Now().Before(deadline) {
		r, err := p.SQS.ReceiveMessage(p.Ctx, &sqs.ReceiveMessageInput{QueueUrl: &p.DLQURL, MaxNumberOfMessages: 10, VisibilityTimeout: pipelinetest.ReceiveVisibility})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Messages) == 0 {
			time.Sleep(500 * time.Millisecond)
		}
		for _, m := range r.Messages {
			seen[*m.MessageId] = dlqMsg{id: *m.MessageId, body: *m.Body}
		}
	}
	out := make([]dlqMsg, 0, len(seen))
	for _, m := range seen {
		out = append(out, m)
	}
	return out
}

// capturedEmails returns how many emails the emulator's SES captured and
// how many went to each address.
func capturedEmails(t *testing.T, p *pipelinetest.Pipeline) (int, map[string]int) {
	t.Helper()
	captured, err := p.SESCaptured()
	if err != nil {
		t.Fatal(err)
	}
	emails := map[string]int{}
	for _, m := range captured {
		for _, to := range m.To {
			emails[to]++
		}
	}
	return len(captured), emails
}

// logReasons maps each SQS message id to the last reason or error the claim
// function logged for it.
func logReasons(out string) map[string]string {
	reasons := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "sqs_message_id") {
			continue
		}
		var rec struct {
			ID     string `json:"sqs_message_id"`
			Msg    string `json:"msg"`
			Reason string `json:"reason"`
			Error  string `json:"error"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil || rec.ID == "" {
			continue
		}
		switch {
		case rec.Reason != "":
			reasons[rec.ID] = rec.Reason
		case rec.Error != "":
			reasons[rec.ID] = rec.Error
		}
	}
	return reasons
}
