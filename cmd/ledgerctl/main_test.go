package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// fixture is a ledger on the emulator, populated through the ledger's use cases,
// and a way to run ledgerctl against it in-process.
type fixture struct {
	t              *testing.T
	cfg            aws.Config
	db             *dynamodb.Client
	table, content string
	clock          *ledgertest.Clock
	cases          *ledgertest.UseCases
	store          *dynamostore.Store

	mu       sync.Mutex
	behavior map[string]ledgertest.Behavior // by dedupe key; Accept if absent
	crash    map[string]bool                // Send panics: the worker "dies" mid-send

	afterPage func(page int) error
	// url is the operator function's URL in front of handler.Operate over
	// this fixture's table (resolve posts to it); made on first use.
	url *functionURL
	// env overrides the variables ledgerctl runs with ("" unsets one).
	env map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := emulator.Config(t)
	// A fresh connection per request: under load ministack closes idle
	// keep-alive connections, and the SDK's retry of a conditional write
	// whose first attempt landed would fail its condition.
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { tr.DisableKeepAlives = true })
	f := &fixture{
		t: t, cfg: cfg, db: dynamodb.NewFromConfig(cfg),
		table: emulator.UniqueName(t, "ledgerctl"), content: emulator.UniqueName(t, "ledgerctl-content"),
		clock: ledgertest.NewClock(), behavior: map[string]ledgertest.Behavior{}, crash: map[string]bool{},
	}
	ctx := context.Background()
	if err := dynamostore.CreateTables(ctx, f.db, f.table, f.content); err != nil {
		t.Fatal(err)
	}
	emulator.KeepExpired(t, f.db, f.content) // the clock is ledgertest.Epoch, days ago
	t.Cleanup(func() {
		for _, name := range []string{f.table, f.content} {
			_, _ = f.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
		}
	})
	script := func(s ledger.Send) ledgertest.Behavior {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.crash[s.IdempotencyKey] {
			panic("worker crashed mid-send")
		}
		return f.behavior[s.IdempotencyKey]
	}
	f.store = dynamostore.New(f.db, f.table, dynamostore.DefaultShards)
	f.cases = &ledgertest.UseCases{Ports: assemble.Ports{
		Store:   f.store,
		Content: dynamostore.NewContent(f.db, f.content),
		Opener:  ledgertest.PlainOpener{},
		Transports: map[ledger.Channel]ledger.Transport{
			ledger.Email: &ledgertest.Transport{Script: script},
			ledger.SMS:   &ledgertest.Transport{Script: script},
		},
		Clock:  f.clock.Now,
		Policy: ledger.DefaultPolicy(),
	}}
	return f
}

// claim claims challenge i on ch (with workflow kind wf) and returns its key.
func (f *fixture) claim(i int, ch ledger.Channel, wf ledger.WorkflowKind) string {
	f.t.Helper()
	in, sealed := ledgertest.Intent(i, ch, f.clock.Now(), time.Hour)
	in.Workflow.Kind = wf
	res, err := f.cases.Claim(context.Background(), in, sealed, ledger.Worker("claim/req-"+in.ChallengeID))
	if err != nil {
		f.t.Fatalf("claim %d %s: %v", i, ch, err)
	}
	return res.Entry.Key
}

// dispatch runs the dispatch use case on key with transport behavior b.
func (f *fixture) dispatch(key string, b ledgertest.Behavior) ledger.Outcome {
	f.t.Helper()
	f.mu.Lock()
	f.behavior[key] = b
	f.mu.Unlock()
	res, err := f.cases.Dispatch(context.Background(), key, "dispatch/req-1")
	if err != nil {
		f.t.Fatalf("dispatch %s: %v", key, err)
	}
	return res.Outcome
}

// crashDispatch leaves key in dispatching, as a worker that died mid-send.
func (f *fixture) crashDispatch(key string) {
	f.t.Helper()
	f.mu.Lock()
	f.crash[key] = true
	f.mu.Unlock()
	func() {
		defer func() { _ = recover() }()
		_, _ = f.cases.Dispatch(context.Background(), key, "dispatch/req-crash")
	}()
	if e := f.get(key); e.State != ledger.Dispatching {
		f.t.Fatalf("crashed dispatch left %s, want dispatching", e.State)
	}
}

func (f *fixture) get(key string) ledger.Entry {
	f.t.Helper()
	e, err := f.store.Get(context.Background(), key)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func (f *fixture) reconcile() {
	f.t.Helper()
	rep, err := f.cases.Reconcile(context.Background(), "reconcile/req-1", 100)
	if err == nil {
		err = rep.Err()
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// run runs ledgerctl in-process with the fixture's table and clock.
func (f *fixture) run(args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	return f.runAs(f.cfg, args...)
}

// runAs runs ledgerctl as run does, with the SDK configuration cfg (other
// credentials, another endpoint).
func (f *fixture) runAs(cfg aws.Config, args ...string) (stdout, stderr string, code int) {
	f.t.Helper()
	var out, errb bytes.Buffer
	if f.url == nil {
		f.url = newFunctionURL(f)
	}
	f.url.knows(cfg)
	env := map[string]string{"LEDGER_TABLE": f.table, "CONTENT_TABLE": f.content, operatorURLEnv: f.url.srv.URL + "/"}
	for k, v := range f.env {
		env[k] = v
	}
	a := newApp(&out, &errb, func(k string) string { return env[k] })
	a.loadConfig = func(context.Context) (aws.Config, error) { return cfg, nil }
	a.now = f.clock.Now
	a.isTerminal = func(io.Writer) bool { return false }
	a.afterPage = f.afterPage
	code = a.run(context.Background(), args)
	assertNoSecret(f.t, out.String()+errb.String())
	return out.String(), errb.String(), code
}

// assertNoSecret fails if output holds a reset token, body or address of
// the fixture messages.
func assertNoSecret(t *testing.T, out string) {
	t.Helper()
	for _, secret := range []string{ledgertest.Canary, "@example.test", "+1555000", "game.example.test"} {
		if strings.Contains(out, secret) {
			t.Errorf("output contains secret-bearing text %q:\n%s", secret, out)
		}
	}
}

func wantCode(t *testing.T, got, want int, stdout, stderr string) {
	t.Helper()
	if got != want {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got, want, stdout, stderr)
	}
}

// chal is the challenge id of ledgertest.Intent(i, ...).
func chal(i int) string { return fmt.Sprintf("chal-%06d", i) }
