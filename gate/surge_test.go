package gate

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/resetledger/resetledger/e2e"
	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Defaults. R is the rate the emulator keeps up with on a two-core machine
// (with other work on it): at 10 sends/s per channel the handlers stay
// ahead of the budget; at 15 and 25 they fell behind it, so the drain
// measured the emulator, not the ledger. The full-size run (5,000 messages
// per channel) then drains in at least 500 s, the 1,000-intent run in make
// test in about 50 s. See RELIABILITY.md ("Surge").
const (
	defaultIntents = 1000
	defaultRate    = 10.0
	// providerBurst is how many sends above its rate a provider takes at
	// once: a small burst, so budget-paced sends that arrive a little late
	// and bunch are throttled, as a strict provider would.
	providerBurst = 2
	// surgeExpiryMargin is EXPIRY_MARGIN for the run (the default is 30 s): the
	// short challenges live tens of seconds. sendGuard is SEND_GUARD (the
	// default is 5 s): a send that starts at the margin has their
	// difference to finish before the deadline cuts it, which a busy
	// emulator's SES call needs (with a margin under the guard, a send
	// could start a millisecond before its deadline, be cut, and end
	// quarantined: its outcome unknown after its challenge expired).
	surgeExpiryMargin = 3 * time.Second
	sendGuard         = time.Second
	// shortShare is the share of the minimum drain a short challenge lives,
	// up to shortMax: the few reached early are sent, the others expire
	// (reconcile's re-drive takes claimed rows soonest-expiring first, so a
	// longer life would see nearly all of them sent).
	shortShare = 0.4
	shortMax   = 20 * time.Second
	// Bounds of the criteria.
	maxRateRatio  = 1.1
	maxDrainRatio = 1.25
	rateWindow    = 10 * time.Second
)

type config struct {
	Intents int
	Rate    float64
	// Limits turns the send limits on (SURGE_LIMITS, default on; "off"
	// measures what they cost).
	Limits bool
	// Repeats is the share of subjects that ask three times (SURGE_REPEATS,
	// default 0.1; 0 with the limits off). See repeat_test.go.
	Repeats float64
	// Quiet (SURGE_PACE=quiet) publishes the same intents at a pace instead
	// of in a burst: R intents per second in all, half of each channel's
	// budget, so every send finds its budget idle, and no challenge is
	// short-lived. It measures what the same traffic costs in a quiet
	// hour, the figure a burst's cost is compared with (make surge-quiet).
	Quiet bool
	// Shape is what each intent carries (SURGE_SHAPE): "production" (the
	// default: internal/testkit/shapes' 8 KB HTML email and 160-character SMS, UUID
	// challenge ids, 64-character references) or "small" (short test
	// messages and ids, the shape of the figures before issue 44).
	Shape string
}

// pace is the quiet mode's intents per second, all channels together.
func (c config) pace() float64 { return c.Rate }

func loadConfig(t *testing.T) config {
	t.Helper()
	c := config{Intents: defaultIntents, Rate: defaultRate, Limits: true, Shape: "production"}
	switch v := os.Getenv("SURGE_SHAPE"); v {
	case "", "production":
	case "small":
		c.Shape = v
	default:
		t.Fatalf("SURGE_SHAPE=%q: want production or small", v)
	}
	switch v := os.Getenv("SURGE_LIMITS"); v {
	case "", "on":
	case "off":
		c.Limits = false
	default:
		t.Fatalf("SURGE_LIMITS=%q: want on or off", v)
	}
	switch v := os.Getenv("SURGE_PACE"); v {
	case "", "burst":
	case "quiet":
		c.Quiet = true
	default:
		t.Fatalf("SURGE_PACE=%q: want burst or quiet", v)
	}
	if v := os.Getenv("SURGE_INTENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 {
			t.Fatalf("SURGE_INTENTS=%q: want an integer of at least 20", v)
		}
		c.Intents = n
	}
	if v := os.Getenv("SURGE_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 || r > 1000 {
			t.Fatalf("SURGE_RATE=%q: want sends per second per channel, above 0", v)
		}
		c.Rate = r
	}
	c.Repeats = loadRepeats(t, c.Limits)
	return c
}

// intentPlan is one published intent: planned before the burst (planBurst),
// its key, challenge id and times filled in when it is published.
type intentPlan struct {
	Index     int
	Challenge int
	Channel   ledger.Channel
	Short     bool
	// Subject is the intent's subject_ref; Ask is which ask of a repeat
	// subject it is (1 to 3), 0 for a subject that asks once.
	Subject     string
	Ask         int
	Key         string
	ChallengeID string
	Published   time.Time
	ExpiresAt   time.Time
}

// TestSurge publishes Intents intents in one burst (half email, half SMS;
// a tenth of the challenges short-lived; a share of the subjects asking
// three times) through the real handlers, with both providers throttling
// above the budget R, waits until every row has ended, and checks the
// criteria of the package documentation.
func TestSurge(t *testing.T) {
	if raceDetector {
		// The handlers run in this process: under the race detector they
		// are several times slower, and the drain would measure that.
		t.Skip("the surge measures throughput; it runs without -race (make surge-check in make test, make surge)")
	}
	cfg := loadConfig(t)
	minDrain, shortTTL, longTTL := surgeDurations(cfg)

	meter := &ddbMeter{}
	sdkWarnings := &sdkLog{}
	sesAccepted := &acceptLog{}
	sesLimit := &pipelinetest.Limiter{Rate: cfg.Rate, Burst: providerBurst}
	smsLimit := &pipelinetest.Limiter{Rate: cfg.Rate, Burst: providerBurst}
	hold := &olderHold{}
	env := surgeEnv(cfg, longTTL)
	p := pipelinetest.NewWithOptions(t, pipelinetest.Options{
		Env:    env,
		Limits: cfg.Limits,
		FunctionAPIOptions: []func(*middleware.Stack) error{
			meter.register,
			sesAccepted.register,
			pipelinetest.SESThrottle(func() bool { return sesLimit.Allow(time.Now()) }),
		},
		FunctionConfig: func(c *aws.Config) { c.Logger = sdkWarnings },
		WrapProvider:   func(h http.Handler) http.Handler { return hold.wrap(pipelinetest.Throttle429(smsLimit, time.Now)(h)) },
		SweepLimit:     500, // the deployed default (SWEEP_LIMIT)
		SkipStreamRaw:  true,
		OutputTail:     256 << 10,
	})
	meter.Budget, meter.Interval = p.BudgetTable, ledger.Interval(cfg.Rate)
	meter.Tables = map[string]string{p.LedgerTable: "ledger", p.ContentTable: "content", p.BudgetTable: "budget", p.LimitsTable: "limits"}
	emuLog := markEmulatorLog(t, p.Endpoint)

	tp := &topology{p: p, ClaimPollers: 10, StreamShards: 4, QueuePollers: 8, Tick: 30 * time.Second}
	ctx, stop := context.WithCancel(p.Ctx)
	defer stop()
	tp.start(ctx)

	plans := planBurst(cfg.Intents, cfg.Repeats)
	begin, pubErrs, published := publishBurst(ctx, p, cfg, plans, hold, minDrain, shortTTL, longTTL)
	publishedAt := drainSurge(t, ctx, stop, p, tp, cfg, published, begin, minDrain)
	wall := time.Since(begin)
	stop()
	tp.wait()
	close(pubErrs)
	for err := range pubErrs {
		t.Errorf("%v", err)
	}

	r := analyze(t, p, cfg, plans, sesAccepted.all(), meter.snapshot(), hold)
	r.Wall, r.Published, r.ShortTTL, r.LongTTL = wall, publishedAt, shortTTL, longTTL
	r.SESDenied, r.SMSDenied = sesLimit.Denied(), smsLimit.Denied()
	r.SESErrors = sesAccepted.errors()
	r.SDKLog = sdkWarnings.snapshot()
	r.Topology = tp
	r.Ops = readOutput(p.Out.String())
	r.print(os.Stdout)

	if emuLog != nil {
		problems, err := emuLog.Problems()
		if err != nil {
			t.Errorf("emulator log: %v", err)
		}
		for _, pr := range problems {
			t.Errorf("emulator logged a fault during the surge:\n%s", pr)
		}
	}
	r.check(t)
	fmt.Println(r.finalLine())
}

// surgeDurations is how long the surge takes at least to drain at the
// provider's rate (or to publish, when quiet), and the short and long
// lifetimes its challenges get.
func surgeDurations(cfg config) (minDrain, shortTTL, longTTL time.Duration) {
	perChannel := (cfg.Intents + 1) / 2
	minDrain = time.Duration(float64(perChannel) / cfg.Rate * float64(time.Second))
	shortTTL = surgeExpiryMargin + min(shortMax, time.Duration(shortShare*float64(minDrain)))
	longTTL = max(10*time.Minute, 3*minDrain+2*time.Minute)
	if cfg.Quiet {
		// Published over Intents / pace; sent as they come.
		minDrain = time.Duration(float64(cfg.Intents) / cfg.pace() * float64(time.Second))
		longTTL = max(10*time.Minute, minDrain+5*time.Minute)
		shortTTL = longTTL
	}
	return minDrain, shortTTL, longTTL
}

// surgeEnv is the functions' settings for the surge.
func surgeEnv(cfg config, longTTL time.Duration) map[string]string {
	rate := strconv.FormatFloat(cfg.Rate, 'f', -1, 64)
	env := map[string]string{
		"SEND_RATE_EMAIL": rate, "SEND_RATE_SMS": rate,
		"EXPIRY_MARGIN": surgeExpiryMargin.String(), "SEND_GUARD": sendGuard.String(),
		// The challenges of a long surge live longer than a reset link
		// should: the claim's bound is raised to cover them.
		settings.MaxChallengeLifetime.Env: (longTTL + time.Duration(repeatAsks+1)*askSpacing + time.Minute).String(),
	}
	if cfg.Limits {
		// Normal traffic must pass the limits: every intent has its own
		// address, and a subject asks at most three times (repeat
		// subjects), so the destination and subject limits, the SMS
		// allow-list (the numbers are US ones) and supersession stay at
		// their defaults. The SMS caps are circuit breakers sized for an
		// hour of ordinary traffic (200 a country, 1,000 in all): a surge
		// of this many SMS within minutes is what they stop, so they are
		// raised to the surge's size, as an operator expecting it would.
		perHour := fmt.Sprintf("%d/1h", cfg.Intents)
		env[settings.LimitSMSCountry.Env], env[settings.LimitSMSGlobal.Env] = perHour, perHour
	}
	return env
}

// publishBurst publishes every planned intent as fast as 16 producers can,
// recording on each plan when it was published; a repeat ask the hold keeps
// back is published once the provider refused an older ask. published
// closes when every intent is; pubErrs holds the publishes that failed.
func publishBurst(ctx context.Context, p *pipelinetest.Pipeline, cfg config, plans []intentPlan, hold *olderHold,
	minDrain, shortTTL, longTTL time.Duration) (begin time.Time, pubErrs chan error, published chan struct{}) {
	pubErrs = make(chan error, cfg.Intents)
	var pubWG sync.WaitGroup
	next := make(chan int, cfg.Intents)
	begin = time.Now()
	go feed(ctx, next, cfg)
	publish := func(i int) {
		pl := &plans[i]
		ttl := longTTL
		if pl.Short {
			ttl = shortTTL
		}
		n := p.Notification(pl.Challenge, pl.Channel, ttl)
		n.SubjectRef = pl.Subject
		if cfg.Shape == "production" {
			n = p.ProductionNotification(pl.Challenge, pl.Channel, ttl)
			n.SubjectRef = shapes.Ref64(pl.Subject, 0)
		}
		if pl.Ask > 0 {
			// Each ask expires later than the one before, whatever
			// order the producers publish them in.
			n.ExpiresAt = begin.Add(longTTL + time.Duration(pl.Ask)*askSpacing)
		}
		pl.ChallengeID, pl.Published, pl.ExpiresAt = n.ChallengeID, time.Now(), n.ExpiresAt
		pl.Key = ledger.Identity{Purpose: ledger.PurposePasswordReset, ChallengeID: n.ChallengeID, Channel: pl.Channel}.Key()
		hold.publishing(*pl, false)
		var err error
		for try := 0; try < 3; try++ {
			if _, err = p.Producer.Publish(p.Ctx, n); err == nil {
				break
			}
		}
		hold.publishing(*pl, true)
		if err != nil {
			pubErrs <- fmt.Errorf("publish %d: %w", i, err)
		}
	}
	for range 16 {
		pubWG.Go(func() {
			for i := range next {
				if pl := plans[i]; hold.holds(pl) && pl.Ask == repeatAsks {
					// Published once the provider refused an older ask.
					pubWG.Go(func() {
						hold.waitRefused(ctx, pl, minDrain)
						publish(i)
					})
					continue
				}
				publish(i)
			}
		})
	}
	published = make(chan struct{})
	go func() { pubWG.Wait(); close(published) }()
	return begin, pubErrs, published
}

// drainSurge reads the stream and routes its records, on the test's
// goroutine, until the surge is drained, and fails the test past its
// deadline. It returns when publishing had ended, measured from begin.
func drainSurge(t *testing.T, ctx context.Context, stop context.CancelFunc, p *pipelinetest.Pipeline, tp *topology, cfg config,
	published <-chan struct{}, begin time.Time, minDrain time.Duration) time.Duration {
	// The stream reader runs here, on the test's goroutine, and so does the
	// check for the end: published, the intents queue empty, and no row
	// left in an open state that still moves (quarantined rows stay).
	store := dynamostore.New(p.DB, p.LedgerTable, dynamostore.DefaultShards)
	deadline := begin.Add(3*minDrain + 3*time.Minute)
	var publishedAt time.Duration
	lastCheck := time.Now()
run:
	for {
		ev, err := p.StreamRecords()
		if err != nil {
			tp.streamReadErrors.Add(1)
		}
		tp.route(ev)
		if time.Since(lastCheck) >= 2*time.Second {
			lastCheck = time.Now()
			select {
			case <-published:
				if publishedAt == 0 {
					publishedAt = time.Since(begin)
				}
				if done, err := drained(ctx, p, store); err != nil {
					tp.harnessError(err)
				} else if done {
					break run
				}
			default:
			}
			if time.Now().After(deadline) {
				stop()
				tp.wait()
				open, _ := openRows(p.Ctx, store)
				t.Fatalf("not drained after %s: open rows %v; published %d, claimed %d", time.Since(begin).Round(time.Second), open, cfg.Intents, tp.claimedCount())
			}
		}
		if len(ev.Records) == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	return publishedAt
}

// feed hands the intents' indexes to the publishers: all at once for a
// burst, at cfg.pace() a second in quiet mode.
func feed(ctx context.Context, next chan<- int, cfg config) {
	defer close(next)
	if !cfg.Quiet {
		for i := range cfg.Intents {
			next <- i
		}
		return
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.pace()))
	defer tick.Stop()
	for i := range cfg.Intents {
		next <- i
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// drained reports whether the run is over: the intents queue is empty and
// no row is in a state that still moves on its own.
func drained(ctx context.Context, p *pipelinetest.Pipeline, store *dynamostore.Store) (bool, error) {
	out, err := p.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &p.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	}})
	if err != nil {
		return false, err
	}
	if out.Attributes["ApproximateNumberOfMessages"] != "0" || out.Attributes["ApproximateNumberOfMessagesNotVisible"] != "0" {
		return false, nil
	}
	for _, st := range moving {
		rows, err := store.ListOpen(ctx, st, time.Time{}, 1)
		if err != nil || len(rows) > 0 {
			return false, err
		}
	}
	return true, nil
}

// moving are the open states a row leaves without an operator.
var moving = []ledger.State{ledger.Held, ledger.Claimed, ledger.Dispatching, ledger.Deferred, ledger.Unknown}

func openRows(ctx context.Context, store *dynamostore.Store) (map[ledger.State]int, error) {
	out := map[ledger.State]int{}
	for _, st := range append(slices.Clone(moving), ledger.Quarantined) {
		rows, err := store.ListOpen(ctx, st, time.Time{}, 0)
		if err != nil {
			return out, err
		}
		out[st] = len(rows)
	}
	return out, nil
}

// markEmulatorLog marks the log of the ministack that localstack/ministack.sh
// started for endpoint, or returns nil (with a note) when there is none to
// read, e.g. LocalStack.
func markEmulatorLog(t *testing.T, endpoint string) *e2e.EmulatorLog {
	t.Helper()
	path, err := e2e.EmulatorLogPath("..", endpoint)
	if err == nil {
		var mark e2e.EmulatorLog
		if mark, err = e2e.MarkEmulatorLog(path); err == nil {
			return &mark
		}
	}
	t.Logf("emulator log not checked: %v", err)
	return nil
}

// scanLedger reads every ledger row.
func scanLedger(ctx context.Context, p *pipelinetest.Pipeline) (map[string]ledger.Entry, error) {
	rows := map[string]ledger.Entry{}
	in := &dynamodb.ScanInput{TableName: &p.LedgerTable, ConsistentRead: aws.Bool(true)}
	for {
		out, err := p.DB.Scan(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			e, err := dynamostore.DecodeItem(it)
			if err != nil {
				return nil, err
			}
			rows[e.Key] = e
		}
		if len(out.LastEvaluatedKey) == 0 {
			return rows, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// opsView is what the functions' output says about the run: metric totals
// and warning and error lines by message.
type opsView struct {
	Metrics map[string]float64
	Lines   map[string]int
	// Dispatches counts dispatch deliveries by source and outcome.
	Dispatches map[string]int
}

// readOutput sums the EMF metrics the functions emitted and counts their
// warning and error log lines by level and message.
func readOutput(out string) opsView {
	v := opsView{Metrics: map[string]float64{}, Lines: map[string]int{}, Dispatches: map[string]int{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if _, ok := rec["_aws"]; ok {
			for _, name := range []string{metrics.NotSent, metrics.BudgetDeferrals, metrics.Redriven, metrics.WakeFailures, metrics.Retries, metrics.ExpiredUnsent} {
				if f, ok := rec[name].(float64); ok {
					v.Metrics[name] += f
				}
			}
			if f, ok := rec[metrics.BudgetWait].(float64); ok {
				v.Metrics["BudgetWaits"]++
				v.Metrics[metrics.BudgetWait] += f
			}
			continue
		}
		if msg, _ := rec["msg"].(string); msg == "dispatch handled" {
			src, _ := rec["source"].(string)
			if src == "" {
				src = "stream"
			}
			out, _ := rec["outcome"].(string)
			v.Dispatches[src+" "+out]++
			continue
		}
		if lvl, _ := rec["level"].(string); lvl == "WARN" || lvl == "ERROR" {
			msg, _ := rec["msg"].(string)
			v.Lines[lvl+": "+msg]++
		}
	}
	return v
}

// report is what the run showed.
type report struct {
	Cfg                      config
	Wall, Published          time.Duration
	ShortTTL, LongTTL        time.Duration
	Intents, Rows            int
	ByState                  map[ledger.State]int
	Accepted                 map[ledger.Channel]int
	ExpiredReasons           map[string]int
	ExpiredShort, ExpiredAll int
	AcceptedShort            int
	Duplicates               int
	Missing                  int
	// Limited counts rows a send limit stopped, by rule: normal traffic
	// must have none. Superseded rows are not among them: Superseded counts
	// them, SupersededSlots those that had booked a send slot, by channel,
	// and Repeats says whether each was right.
	Limited         int
	LimitedBy       map[ledger.Rule]int
	Superseded      int
	SupersededSlots map[ledger.Channel]int
	Repeats         repeatFigures
	// Violations are rows that break a criterion, described.
	Violations []string
	// SESCaptureDuplicates counts emails the emulator captured more than
	// once for one recipient (a cross-check of Duplicates for email).
	SESCaptureDuplicates, SESCaptured int
	Attempts                          []int
	Latency                           []time.Duration
	RateMax                           map[ledger.Channel]int
	RateMaxAt                         map[ledger.Channel]time.Time
	RateRatio                         float64
	Drain, MinDrain                   time.Duration
	DrainRatio                        float64
	FirstPublish, LastEnd             time.Time
	Deferrals                         map[string]int // deferral events by code
	SESDenied, SMSDenied              int
	SESErrors                         map[string]int
	SDKLog                            map[string]int
	// AttemptsAll is the number of transport attempts over every row.
	AttemptsAll int
	// LateWakeUps counts attempts that started more than a second after the
	// slot their row held (so it booked another).
	LateWakeUps int
	DynamoDB    meterSnapshot
	DLQ         int
	Topology    *topology
	// Sends are the provider-side acceptance times by channel.
	Sends map[ledger.Channel][]time.Time
	Ops   opsView
}

func analyze(t *testing.T, p *pipelinetest.Pipeline, cfg config, plans []intentPlan, sesAcc []acceptance, ddb meterSnapshot, hold *olderHold) *report {
	t.Helper()
	rows, err := scanLedger(p.Ctx, p)
	if err != nil {
		t.Fatalf("scan ledger: %v", err)
	}
	r := &report{
		Cfg: cfg, Intents: len(plans), Rows: len(rows), ByState: map[ledger.State]int{}, Accepted: map[ledger.Channel]int{},
		ExpiredReasons: map[string]int{}, RateMax: map[ledger.Channel]int{}, RateMaxAt: map[ledger.Channel]time.Time{},
		Deferrals: map[string]int{}, DynamoDB: ddb, DLQ: p.DLQDepth(), LimitedBy: map[ledger.Rule]int{},
		SupersededSlots: map[ledger.Channel]int{},
	}
	sends, byChannel := r.countSends(t, p, sesAcc)

	r.FirstPublish = plans[0].Published
	known := map[string]bool{}
	for _, pl := range plans {
		known[pl.Key] = true
		if pl.Published.Before(r.FirstPublish) {
			r.FirstPublish = pl.Published
		}
		e, ok := rows[pl.Key]
		if !ok {
			r.Missing++
			r.violate("intent %d (%s): no ledger row", pl.Index, pl.Channel)
			continue
		}
		r.judgeRow(pl, e, sends[pl.Key])
	}
	for k := range sends {
		if !known[k] {
			r.violate("provider took a message under a key no intent has: %s", k)
		}
	}
	for _, ch := range []ledger.Channel{ledger.Email, ledger.SMS} {
		n, at := maxInWindow(byChannel[ch], rateWindow)
		r.RateMax[ch], r.RateMaxAt[ch] = n, at
		r.RateRatio = max(r.RateRatio, float64(n)/(rateWindow.Seconds()*cfg.Rate))
		// A row superseded at the wake-up for its booked slot leaves that
		// slot unused: the budget booked it before the newer challenge was
		// claimed, and it is part of the minimum.
		slots := r.Accepted[ch] + r.SupersededSlots[ch]
		r.MinDrain = max(r.MinDrain, time.Duration(float64(slots)/cfg.Rate*float64(time.Second)))
	}
	r.Repeats = analyzeRepeats(plans, rows, sends)
	hold.figures(&r.Repeats, rows)
	r.Sends = byChannel
	r.Drain = r.LastEnd.Sub(r.FirstPublish)
	if r.MinDrain > 0 {
		r.DrainRatio = r.Drain.Seconds() / r.MinDrain.Seconds()
	}
	return r
}

// violate records a violation, the first 20 of them.
func (r *report) violate(format string, a ...any) {
	if len(r.Violations) < 20 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, a...))
	}
}

// countSends gathers the provider-side acceptances by key and by channel,
// and counts the duplicates among them and among the emails SES captured.
func (r *report) countSends(t *testing.T, p *pipelinetest.Pipeline, sesAcc []acceptance) (sends map[string][]time.Time, byChannel map[ledger.Channel][]time.Time) {
	t.Helper()
	sends = map[string][]time.Time{}
	byChannel = map[ledger.Channel][]time.Time{}
	for _, a := range sesAcc {
		sends[a.Key] = append(sends[a.Key], a.At)
		byChannel[ledger.Email] = append(byChannel[ledger.Email], a.At)
	}
	for _, m := range p.Provider.Messages() {
		sends[m.IdempotencyKey] = append(sends[m.IdempotencyKey], m.ReceivedAt)
		byChannel[ledger.SMS] = append(byChannel[ledger.SMS], m.ReceivedAt)
	}
	for _, ts := range sends {
		r.Duplicates += len(ts) - 1
	}
	if captured, err := p.SESCaptured(); err != nil {
		t.Errorf("SES capture: %v", err)
	} else {
		perTo := map[string]int{}
		for _, m := range captured {
			for _, to := range m.To {
				perTo[to]++
			}
		}
		r.SESCaptured = len(captured)
		for _, n := range perTo {
			r.SESCaptureDuplicates += n - 1
		}
	}
	return sends, byChannel
}

// judgeRow counts plan pl's row e, which the provider took at the times got,
// and records what it violates: stopped by a limit, sent twice or after its
// expiry, accepted without a send, expired after a send, or another end.
func (r *report) judgeRow(pl intentPlan, e ledger.Entry, got []time.Time) {
	r.ByState[e.State]++
	r.AttemptsAll += e.Attempts
	last := e.Last()
	if e.State.Terminal() && last.At.After(r.LastEnd) {
		r.LastEnd = last.At
	}
	for i, ev := range e.History {
		if ev.To == ledger.Deferred {
			r.Deferrals[ev.Code]++
		}
		// A row deferred to a booked slot that started its attempt more
		// than a second (slotGrace) after it had to book a new one.
		if ev.To == ledger.Deferred && ev.Code == ledger.BudgetCode && i+1 < len(e.History) {
			if nx := e.History[i+1]; nx.To == ledger.Dispatching && nx.At.Sub(ev.NextAttemptAt) > time.Second {
				r.LateWakeUps++
			}
		}
	}
	rule, stopped := ledger.LimitRule(e)
	switch {
	case rule == ledger.RuleSuperseded:
		// Judged by analyzeRepeats.
		r.Superseded++
		if bookedSlot(e) {
			r.SupersededSlots[pl.Channel]++
		}
	case stopped:
		r.Limited++
		r.LimitedBy[rule]++
		r.violate("%s: stopped by the %s limit: %s", e.Key, rule, e.Reason)
	}
	if stopped && len(got) > 0 {
		r.violate("%s: %s, but the provider took it %d time(s)", e.Key, e.State, len(got))
	}
	switch {
	case stopped:
		// Counted and reported above.
	case e.State == ledger.Accepted:
		r.Accepted[pl.Channel]++
		if pl.Short {
			r.AcceptedShort++
		}
		r.Attempts = append(r.Attempts, e.Attempts)
		r.Latency = append(r.Latency, last.At.Sub(pl.Published))
		if len(got) == 0 {
			r.violate("%s: accepted in the ledger, but the provider recorded no send", e.Key)
		}
		for _, at := range got {
			if !at.Before(e.ExpiresAt) {
				r.violate("%s: provider took it at %s, after its expiry %s", e.Key, at.Format(time.RFC3339Nano), e.ExpiresAt.Format(time.RFC3339Nano))
			}
		}
		if !last.At.Before(e.ExpiresAt) {
			r.violate("%s: accepted at %s, after its expiry", e.Key, last.At.Format(time.RFC3339Nano))
		}
	case e.State == ledger.Expired:
		r.ExpiredAll++
		if pl.Short {
			r.ExpiredShort++
		}
		reason := e.Reason
		if code, ok := strings.CutPrefix(reason, ledger.NotSentReason("")); ok {
			reason = ledger.NotSentReason("<" + code + ">")
		}
		r.ExpiredReasons[reason]++
		if !notSentReason(e.Reason) {
			r.violate("%s: expired with a reason that does not say it was not sent: %q", e.Key, e.Reason)
		}
		if len(got) > 0 {
			r.violate("%s: expired, but the provider took it %d time(s)", e.Key, len(got))
		}
	default:
		r.violate("%s: ended %s (%q)", e.Key, e.State, e.Reason)
	}
	if err := e.Verify(); err != nil {
		r.violate("%v", err)
	}
}

// notSentReason reports whether an expiry reason says the message was not
// sent because the challenge expired first.
func notSentReason(reason string) bool {
	switch reason {
	case "challenge already expired when the intent arrived", "challenge expired before dispatch",
		"challenge expired while claimed; never dispatched":
		return true
	}
	return strings.HasPrefix(reason, ledger.NotSentReason("")) && len(reason) > len(ledger.NotSentReason(""))
}

func (r *report) accepted() int { return r.Accepted[ledger.Email] + r.Accepted[ledger.SMS] }

func (r *report) finalLine() string {
	per := func(x float64) float64 {
		if r.accepted() == 0 {
			return 0
		}
		return x / float64(r.accepted())
	}
	d := r.DynamoDB
	limits, pace := "off", "burst"
	if r.Cfg.Limits {
		limits = "on"
	}
	if r.Cfg.Quiet {
		pace = "quiet"
	}
	rp := r.Repeats
	return fmt.Sprintf("surge: intents=%d accepted=%d expired_not_sent=%d limited=%d quarantined=%d unknown=%d duplicates=%d rate_ratio=%.3f drain_ratio=%.3f"+
		" wcu=%.2f rcu=%.2f requests=%.2f redriven=%d limits=%s pace=%s shape=%s repeat_subjects=%d superseded=%d older_sent_before_newer=%d older_sent_in_race=%d older_sent_waiting=%d newest_sent=%d",
		r.Intents, r.accepted(), r.ExpiredAll, r.Limited, r.ByState[ledger.Quarantined], r.ByState[ledger.Unknown], r.Duplicates, r.RateRatio, r.DrainRatio,
		per(d.WCU+d.ConditionFailedWCU), per(d.RCU), per(float64(d.Total())), int(r.Ops.Metrics[metrics.Redriven]), limits, pace, r.Cfg.Shape,
		rp.Subjects, r.Superseded, rp.OlderSent, rp.InRace, rp.SentWaiting, rp.NewestSent)
}

// check fails t for every criterion the run missed.
func (r *report) check(t *testing.T) {
	t.Helper()
	if r.Duplicates > 0 || r.SESCaptureDuplicates > 0 {
		t.Errorf("duplicate sends: %d provider-side, %d in the emulator's SES capture", r.Duplicates, r.SESCaptureDuplicates)
	}
	if n := r.ByState[ledger.Quarantined]; n > 0 {
		t.Errorf("%d rows quarantined", n)
	}
	if r.Limited > 0 {
		t.Errorf("%d rows stopped by a send limit (%v): an address per intent and at most three asks per subject must pass every limit", r.Limited, r.LimitedBy)
	}
	if n := r.ByState[ledger.Unknown]; n > 0 {
		t.Errorf("%d rows unknown", n)
	}
	if other := r.Intents - r.Missing - r.accepted() - r.ExpiredAll - r.Superseded; other > 0 || r.Missing > 0 {
		t.Errorf("%d intents without a row, %d rows neither accepted, expired nor superseded: %v", r.Missing, other, r.ByState)
	}
	for _, v := range r.Violations {
		t.Errorf("violation: %s", v)
	}
	r.Repeats.check(t, !r.Cfg.Quiet)
	if r.SESCaptured != r.Accepted[ledger.Email] {
		t.Errorf("the emulator captured %d emails; %d email rows are accepted", r.SESCaptured, r.Accepted[ledger.Email])
	}
	if r.RateRatio > maxRateRatio {
		t.Errorf("rate ratio %.3f > %.2f: the providers took %v in a 10 s window (budget %.0f)", r.RateRatio, maxRateRatio, r.RateMax, 10*r.Cfg.Rate)
	}
	switch {
	case r.MinDrain == 0:
		t.Errorf("no physical minimum drain: the run measured nothing")
	case r.Cfg.Quiet:
		// Paced: the drain is the pace's, not the budget's.
		t.Logf("note: drain ratio %.3f (quiet pace: the publishing, not the budget, sets the drain)", r.DrainRatio)
	case r.DrainRatio > maxDrainRatio && os.Getenv("SURGE_DRAIN_CHECK") == "1":
		t.Errorf("drain ratio %.3f > %.2f: drained in %s, physical minimum %s", r.DrainRatio, maxDrainRatio, r.Drain.Round(time.Millisecond), r.MinDrain.Round(time.Millisecond))
	case r.DrainRatio > maxDrainRatio:
		// A speed, not a correctness property: on a busy machine the drain
		// is slower with a correct system. make surge asserts it.
		t.Logf("note: drain ratio %.3f > %.2f (reported, not asserted here; make surge asserts it)", r.DrainRatio, maxDrainRatio)
	}
	if r.ExpiredShort == 0 && !r.Cfg.Quiet {
		t.Errorf("no short challenge expired during the run: the run does not show expiry under a surge")
	}
	if r.ExpiredAll > r.ExpiredShort {
		t.Errorf("%d long-lived challenges expired", r.ExpiredAll-r.ExpiredShort)
	}
	if r.DLQ > 0 {
		t.Errorf("%d intents dead-lettered", r.DLQ)
	}
	if len(r.DynamoDB.Unreported) > 0 {
		t.Logf("note: DynamoDB requests that reported no consumed capacity: %v", r.DynamoDB.Unreported)
	}
}

func (r *report) print(w io.Writer) {
	acc := r.accepted()
	per := func(x float64) string {
		if acc == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", x/float64(acc))
	}
	tp := r.Topology
	fmt.Fprintf(w, "\nsurge: %d intents (%d email, %d SMS, %s shape), R = %g sends/s per channel, provider burst %d, EXPIRY_MARGIN %s, SEND_GUARD %s\n",
		r.Intents, (r.Intents+1)/2, r.Intents/2, r.Cfg.Shape, r.Cfg.Rate, providerBurst, surgeExpiryMargin, sendGuard)
	if r.Cfg.Quiet {
		fmt.Fprintf(w, "  quiet pace (SURGE_PACE=quiet): %g intents/s in all; every challenge lives %s\n", r.Cfg.pace(), r.LongTTL.Round(time.Second))
	}
	fmt.Fprintf(w, "  short challenges (10%%) live %s, the others %s; published in %s; drained in %s (wall %s)\n",
		r.ShortTTL.Round(time.Second), r.LongTTL.Round(time.Second), r.Published.Round(time.Millisecond), r.Drain.Round(time.Millisecond), r.Wall.Round(time.Second))
	fmt.Fprintf(w, "  topology: %d claim pollers, %d stream shards, %d dispatch-queue pollers, reconcile and expire every %s\n\n",
		tp.ClaimPollers, tp.StreamShards, tp.QueuePollers, tp.Tick)
	row := func(k string, v any) { fmt.Fprintf(w, "  %-52s %v\n", k, v) }
	row("accepted (email / SMS)", fmt.Sprintf("%d (%d / %d)", acc, r.Accepted[ledger.Email], r.Accepted[ledger.SMS]))
	row("  of them short-lived", r.AcceptedShort)
	row("expired not sent", fmt.Sprintf("%d (short-lived %d)", r.ExpiredAll, r.ExpiredShort))
	for _, reason := range slices.Sorted(maps.Keys(r.ExpiredReasons)) {
		row("  "+reason, r.ExpiredReasons[reason])
	}
	limits := "off (SURGE_LIMITS=off)"
	if r.Cfg.Limits {
		limits = fmt.Sprintf("on: %d stopped %v", r.Limited, r.LimitedBy)
	}
	row("send limits (one address per intent)", limits)
	r.printRepeats(row)
	row("quarantined / unknown / rejected", fmt.Sprintf("%d / %d / %d", r.ByState[ledger.Quarantined], r.ByState[ledger.Unknown], r.ByState[ledger.Rejected]))
	row("duplicate sends (provider-side; SES capture)", fmt.Sprintf("%d; %d", r.Duplicates, r.SESCaptureDuplicates))
	row("attempts per accepted message p50 / p99 / max", fmt.Sprintf("%d / %d / %d", percentile(r.Attempts, 50), percentile(r.Attempts, 99), percentile(r.Attempts, 100)))
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	row("enqueue→accepted p50 / p95 / p99", fmt.Sprintf("%s / %s / %s", ms(percentile(r.Latency, 50)), ms(percentile(r.Latency, 95)), ms(percentile(r.Latency, 99))))
	row("provider throttled (SES 429 / webhook 429)", fmt.Sprintf("%d / %d", r.SESDenied, r.SMSDenied))
	for _, code := range slices.Sorted(maps.Keys(r.Deferrals)) {
		row("deferrals: "+code, r.Deferrals[code])
	}
	row("fullest 10 s window (email / SMS)", fmt.Sprintf("%d / %d of %.0f", r.RateMax[ledger.Email], r.RateMax[ledger.SMS], 10*r.Cfg.Rate))
	row("rate ratio", fmt.Sprintf("%.3f", r.RateRatio))
	row("drain / physical minimum", fmt.Sprintf("%s / %s = %.3f", ms(r.Drain), ms(r.MinDrain), r.DrainRatio))
	row("  (minimum: accepted and superseded rows' booked slots, email / SMS)", fmt.Sprintf("%d+%d / %d+%d",
		r.Accepted[ledger.Email], r.SupersededSlots[ledger.Email], r.Accepted[ledger.SMS], r.SupersededSlots[ledger.SMS]))
	r.printCosts(w, row, per)
	row("stream batches / redelivered / records given up", fmt.Sprintf("%d / %d / %d", tp.streamBatches.Load(), tp.streamRetries.Load(), tp.streamGivenUp.Load()))
	row("dispatch-queue messages / batches / failed", fmt.Sprintf("%d / %d / %d", tp.queueMessages.Load(), tp.queueBatches.Load(), tp.queueFailures.Load()))
	row("claims reported failed (redelivered)", tp.claimFailures.Load())
	row("reconcile / expire runs (sweep errors)", fmt.Sprintf("%d / %d (%d)", tp.reconcileRuns.Load(), tp.expireRuns.Load(), tp.sweepErrors.Load()))
	row("re-driven rows (metric)", r.Ops.Metrics[metrics.Redriven])
	row("in-process budget waits (count, mean)", fmt.Sprintf("%.0f, %s", r.Ops.Metrics["BudgetWaits"], meanMS(r.Ops.Metrics)))
	row("harness errors (SQS after retries; stream reads)", fmt.Sprintf("%d; %d", tp.harnessErrors.Load(), tp.streamReadErrors.Load()))
	if tp.lastHarnessErr != nil {
		row("  last", tp.lastHarnessErr)
	}
	row("intents dead-lettered", r.DLQ)
	r.timeline(w)
	for _, l := range slices.Sorted(maps.Keys(r.Ops.Lines)) {
		row("log "+l, r.Ops.Lines[l])
	}
	fmt.Fprintln(w)
}

// printCosts prints the DynamoDB requests and capacity per accepted message,
// the budget's slots, the dispatch deliveries, and the SES and SDK errors and
// retries.
func (r *report) printCosts(w io.Writer, row func(string, any), per func(float64) string) {
	d := r.DynamoDB
	row("DynamoDB requests per accepted message", per(float64(d.Total())))
	var ops []string
	for _, op := range d.Ops() {
		ops = append(ops, fmt.Sprintf("%s %s", op, per(float64(d.Requests[op]))))
	}
	row("  by operation", strings.Join(ops, ", "))
	row("  by operation and table", byTable(d.ByTable, per))
	row("DynamoDB WCU per accepted message", fmt.Sprintf("%s (of which failed conditions %s)", per(d.WCU+d.ConditionFailedWCU), per(d.ConditionFailedWCU)))
	row("  by operation and table (index writes included)", byTable(d.WCUByTable, per))
	fmt.Fprintln(w, "    (capacity as the emulator reports it for ReturnConsumedCapacity=INDEXES, by DynamoDB's item-size rules,")
	fmt.Fprintln(w, "    index writes included; failed conditional writes and BatchGetItem sized here from the items)")
	row("DynamoDB RCU per accepted message", per(d.RCU))
	row("DynamoDB conditional writes that failed", d.ConditionFailed)
	row("budget slots booked / transport attempts / unused", fmt.Sprintf("%d / %d / %d", d.Bookings, r.AttemptsAll, d.Bookings-r.AttemptsAll))
	row("  unused because the wake-up came > 1 s late", r.LateWakeUps)
	for _, k := range slices.Sorted(maps.Keys(r.Ops.Dispatches)) {
		row("dispatch deliveries: "+k, r.Ops.Dispatches[k])
	}
	for _, k := range slices.Sorted(maps.Keys(r.SESErrors)) {
		row("SES error: "+k, r.SESErrors[k])
	}
	row("DynamoDB requests failed after SDK retries", sumValues(d.Failed))
	var retries []string
	for _, svc := range slices.Sorted(maps.Keys(d.Operations)) {
		if n := d.Attempts[svc] - d.Operations[svc]; n > 0 {
			retries = append(retries, fmt.Sprintf("%s %d of %d", svc, n, d.Operations[svc]))
		}
	}
	row("SDK retries (functions' calls)", strings.Join(retries, ", "))
	for _, k := range slices.Sorted(maps.Keys(r.SDKLog)) {
		row("SDK log: "+k, r.SDKLog[k])
	}
}

// timeline prints, per 10 s from the first publish, the sends each
// provider took and the send slots booked in the budget for that time.
func (r *report) timeline(w io.Writer) {
	bucket := func(ts []time.Time) map[int]int {
		out := map[int]int{}
		for _, t := range ts {
			out[int(t.Sub(r.FirstPublish)/rateWindow)]++
		}
		return out
	}
	es, ss := bucket(r.Sends[ledger.Email]), bucket(r.Sends[ledger.SMS])
	eb, sb := bucket(r.DynamoDB.Slots[string(ledger.Email)]), bucket(r.DynamoDB.Slots[string(ledger.SMS)])
	last := int(r.Drain / rateWindow)
	fmt.Fprintf(w, "  timeline per 10 s (sends/slots booked; email | SMS):\n   ")
	for b := 0; b <= last; b++ {
		fmt.Fprintf(w, " %d/%d|%d/%d", es[b], eb[b], ss[b], sb[b])
	}
	fmt.Fprintln(w)
}

func meanMS(m map[string]float64) string {
	if m["BudgetWaits"] == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", m[metrics.BudgetWait]/m["BudgetWaits"])
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// byTable lists figures by "Operation(table)", largest first, each per
// accepted message.
func byTable[V int | float64](m map[string]V, per func(float64) string) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+" "+per(float64(m[k])))
	}
	return strings.Join(parts, ", ")
}
