package webhooktransport_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/outcome/outcometest"
	"github.com/resetledger/resetledger/internal/webhooktransport"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/webhook"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

const (
	testTo     = "player.one@example.org"
	testBody   = "Hi!\nReset your password: https://game.example/reset?token=s3cr3t-t0ken-value\nIt expires in 10 minutes."
	testSecret = "whsec_ABCDEF0123456789-test-signing-secret"
)

// secret is testSecret as the transport and the provider take it.
var secret = []byte(testSecret)

func testSend(challenge string) ledger.Send {
	m := ledger.Message{To: testTo, Subject: "Reset your password", Body: testBody}
	return outcometest.Send(challenge, ledger.Email, "reset", m, time.Date(2030, 1, 1, 12, 10, 0, 0, time.UTC))
}

// setup starts a webhooktest.Provider behind an httptest server and a transport for it.
func setup(t *testing.T, pcfg webhooktest.ProviderConfig, mutate func(*webhooktransport.Config)) (*webhooktest.Provider, *webhooktransport.Transport, *httptest.Server) {
	t.Helper()
	if pcfg.Secrets == nil {
		pcfg.Secrets = webhooktest.Static(secret)
	}
	p := webhooktest.NewProvider(pcfg)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	cfg := config(srv.URL + "/v1/notify")
	if mutate != nil {
		mutate(&cfg)
	}
	tr, err := webhooktransport.New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, tr, srv
}

// config is DefaultConfig(url) with the test secret.
func config(url string) webhooktransport.Config {
	cfg := webhooktransport.DefaultConfig(url)
	cfg.Secret = secret
	return cfg
}

// assertClean fails if s repeats the address, the body (or a part of it),
// the reset link or the signing secret.
func assertClean(t *testing.T, s string) {
	t.Helper()
	outcometest.AssertClean(t, s, secrets...)
}

// secrets are what no error text may repeat.
var secrets = []string{testTo, "player.one", "s3cr3t-t0ken-value", "game.example", testSecret, "ABCDEF0123456789", "expires in 10 minutes", "\n"}

func TestConfigValidate(t *testing.T) {
	outcometest.ValidateConfigs(t, webhooktransport.ErrInvalidConfig, []outcometest.ConfigCase[webhooktransport.Config]{
		{Name: "https", Config: config("https://notify.example.com/v1/send"), OK: true},
		{Name: "loopback http", Config: config("http://127.0.0.1:8080/send"), OK: true},
		{Name: "other loopback http", Config: config("http://127.3.4.5:8080/send"), OK: true},
		{Name: "localhost http", Config: config("http://localhost:8080"), OK: true},
		{Name: "ipv6 loopback http", Config: config("http://[::1]:8080"), OK: true},
		{Name: "remote http", Config: config("http://notify.example.com/send"), OK: false},
		{Name: "remote http by address", Config: config("http://203.0.113.9/send"), OK: false},
		{Name: "host.docker.internal http", Config: config("http://host.docker.internal:9000"), OK: false},
		{Name: "a name under localhost", Config: config("http://localhost.evil.example/send"), OK: false},
		{Name: "unspecified address", Config: config("http://0.0.0.0:8080/send"), OK: false},
		{Name: "missing url", Config: webhooktransport.Config{Secret: secret}, OK: false},
		{Name: "relative url", Config: config("/send"), OK: false},
		{Name: "other scheme", Config: config("ftp://notify.example.com"), OK: false},
		{Name: "credentials in url", Config: config("https://user:" + testSecret + "@notify.example.com"), OK: false},
		{Name: "fragment", Config: config("https://notify.example.com/#x"), OK: false},
		{Name: "no secret", Config: webhooktransport.DefaultConfig("https://notify.example.com"), OK: false},
		{Name: "short secret", Config: webhooktransport.Config{URL: "https://notify.example.com", Secret: secret[:webhook.MinSecretLen-1]}, OK: false},
		{Name: "negative window", Config: webhooktransport.Config{URL: "https://notify.example.com", Secret: secret, KeyWindow: -time.Second}, OK: false},
		{Name: "negative timeout", Config: webhooktransport.Config{URL: "https://notify.example.com", Secret: secret, Timeout: -time.Second}, OK: false},
	}, secrets...)
	if _, err := webhooktransport.New(nil, config("https://notify.example.com")); !errors.Is(err, webhooktransport.ErrInvalidConfig) {
		t.Fatalf("New(nil) = %v, want ErrInvalidConfig", err)
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		name string
		cfg  webhooktransport.Config
		want ledger.Capabilities
	}{
		{"defaults", config("https://n.example.com"), ledger.Capabilities{IdempotencyWindow: 24 * time.Hour}},
		{"zero config honors no keys", webhooktransport.Config{URL: "https://n.example.com", Secret: secret}, ledger.Capabilities{}},
		{"lookup, no keys", webhooktransport.Config{URL: "https://n.example.com", Secret: secret, Lookup: true}, ledger.Capabilities{Lookup: true}},
		{"short window", webhooktransport.Config{URL: "https://n.example.com", Secret: secret, KeyWindow: time.Hour, Lookup: true}, ledger.Capabilities{IdempotencyWindow: time.Hour, Lookup: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := webhooktransport.New(http.DefaultClient, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := tr.Capabilities(); got != tt.want {
				t.Fatalf("Capabilities() = %+v, want %+v", got, tt.want)
			}
			if webhooktransport.TimeoutOf(tr) != webhooktransport.DefaultTimeout {
				t.Fatalf("Timeout = %s, want the default %s", webhooktransport.TimeoutOf(tr), webhooktransport.DefaultTimeout)
			}
		})
	}
	var _ ledger.Transport = (*webhooktransport.Transport)(nil)
	var _ ledger.Looker = (*webhooktransport.Transport)(nil)
}

func TestSendRequest(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, `{"id":"prov-1"}`)
	}))
	defer srv.Close()
	cfg := config(srv.URL + "/hooks/reset?tenant=game")
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg.Now = func() time.Time { return now }
	tr, err := webhooktransport.New(srv.Client(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := testSend("ch-1")
	ack, err := tr.Send(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if ack.ID != "prov-1" {
		t.Fatalf("ack = %q", ack.ID)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/hooks/reset" || got.URL.Query().Get("tenant") != "game" {
		t.Errorf("request line = %s %s", got.Method, got.URL)
	}
	for h, want := range map[string]string{
		"Idempotency-Key":       s.IdempotencyKey,
		"Content-Type":          "application/json",
		webhook.SignatureHeader: webhook.Sign(secret, now, http.MethodPost, "/hooks/reset?tenant=game", body),
	} {
		if v := got.Header.Get(h); v != want {
			t.Errorf("header %s = %q, want %q", h, v, want)
		}
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"idempotency_key": s.IdempotencyKey, "content_hash": s.ContentHash, "channel": "email",
		"attempt": float64(1), "expires_at": "2030-01-01T12:10:00Z",
		"to": testTo, "subject": "Reset your password", "body": testBody,
	}
	if len(fields) != len(want) {
		t.Errorf("body has fields %v, want exactly %v", fields, want)
	}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("body %s = %v, want %v", k, fields[k], v)
		}
	}
	// The signature, worked by hand: HMAC-SHA-256 over "<t>.POST.<target>.<body>".
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("1893499200.POST./hooks/reset?tenant=game."))
	m.Write(body)
	if want := "t=1893499200,v1=" + hex.EncodeToString(m.Sum(nil)); got.Header.Get(webhook.SignatureHeader) != want {
		t.Errorf("signature = %q, want %q", got.Header.Get(webhook.SignatureHeader), want)
	}
	if v, ok := got.Header["Authorization"]; ok {
		t.Errorf("Authorization = %q: the request is authenticated by its signature", v)
	}
}

func TestSendResponseMapping(t *testing.T) {
	echo := `{"error":{"message":"recipient ` + testTo + ` refused; body=` + strings.ReplaceAll(testBody, "\n", `\n`) + `; auth=` + testSecret + `"}}`
	tests := []responseCase{
		{"accept", webhooktest.Step{Action: webhooktest.Accept}, "ack", ""},
		{"reject 400 echoing secrets", webhooktest.Step{Action: webhooktest.Reject, Body: echo}, "rejected", "HTTP 400: recipient [redacted] refused; body= [redacted]"},
		{"reject plain text", webhooktest.Step{Action: webhooktest.Respond, Status: 422, Body: "invalid \x1b[31mrecipient\x00\r\n"}, "rejected", "HTTP 422: invalid [31mrecipient"},
		{"unauthorized", webhooktest.Step{Action: webhooktest.Respond, Status: 401}, "rejected", "HTTP 401: Unauthorized"},
		{"forbidden", webhooktest.Step{Action: webhooktest.Respond, Status: 403, Body: `{"message":"sender blocked"}`}, "rejected", "HTTP 403: sender blocked"},
		{"not found", webhooktest.Step{Action: webhooktest.Respond, Status: 404, Body: `{"detail":"no such route"}`}, "rejected", "HTTP 404: no such route"},
		{"too large", webhooktest.Step{Action: webhooktest.Respond, Status: 413, Body: strings.Repeat("too large ", 100)}, "rejected", "HTTP 413: too large"},
		{"request timeout 408", webhooktest.Step{Action: webhooktest.Respond, Status: 408}, "unknown", "webhook: outcome unknown: HTTP 408"},
		{"conflict 409", webhooktest.Step{Action: webhooktest.Respond, Status: 409, Body: echo}, "unknown", "webhook: outcome unknown: HTTP 409"},
		{"too early 425", webhooktest.Step{Action: webhooktest.Respond, Status: 425}, "unknown", "webhook: outcome unknown: HTTP 425"},
		{"rate limited 429", webhooktest.Step{Action: webhooktest.Respond, Status: 429, Body: echo}, "notsent", "HTTP 429"},
		{"server error 500", webhooktest.Step{Action: webhooktest.Respond, Status: 500, Body: echo}, "unknown", "webhook: outcome unknown: HTTP 500"},
		{"bad gateway 502", webhooktest.Step{Action: webhooktest.Respond, Status: 502}, "unknown", "webhook: outcome unknown: HTTP 502"},
		{"unavailable 503", webhooktest.Step{Action: webhooktest.Unavailable}, "notsent", "HTTP 503"},
		{"moved 301", webhooktest.Step{Action: webhooktest.Respond, Status: 301}, "rejected", "HTTP 301: redirect not followed"},
		{"found 302", webhooktest.Step{Action: webhooktest.Respond, Status: 302}, "unknown", "webhook: outcome unknown: HTTP 302"},
		{"see other 303", webhooktest.Step{Action: webhooktest.Respond, Status: 303}, "unknown", "webhook: outcome unknown: HTTP 303"},
		{"redirect 307", webhooktest.Step{Action: webhooktest.Respond, Status: 307}, "rejected", "HTTP 307: redirect not followed"},
		{"redirect 308", webhooktest.Step{Action: webhooktest.Respond, Status: 308}, "rejected", "HTTP 308: redirect not followed"},
		{"2xx without id", webhooktest.Step{Action: webhooktest.Respond, Status: 200, Body: `{"status":"ok"}`}, "unknown", "webhook: outcome unknown: HTTP 200 without a usable id"},
		{"2xx not json", webhooktest.Step{Action: webhooktest.Respond, Status: 202, Body: "queued"}, "unknown", "webhook: outcome unknown: HTTP 202 without a usable id"},
		{"accept then drop", webhooktest.Step{Action: webhooktest.AcceptThenDrop}, "unknown", "webhook: outcome unknown: connection closed before a complete response"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { sendAndCheckResponse(t, tt) })
	}
}

// responseCase is one scripted provider answer and what Send makes of it.
type responseCase struct {
	name     string
	step     webhooktest.Step
	outcome  string // ack, rejected, notsent, unknown
	wantText string // prefix of the rejection reason, NotSent code or error text
}

// sendAndCheckResponse sends once against the scripted answer and checks the
// outcome, and that an error repeats neither a secret nor the URL.
func sendAndCheckResponse(t *testing.T, tt responseCase) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, nil)
	p.Script(tt.step)
	s := testSend("ch-" + tt.name)
	ack, err := tr.Send(context.Background(), s)
	var rej *ledger.Rejection
	switch tt.outcome {
	case "ack":
		if err != nil {
			t.Fatalf("err = %v, want an ack", err)
		}
		msgs := p.Messages()
		if len(msgs) != 1 || ack.ID != msgs[0].ID || ack.ID == "" {
			t.Fatalf("ack %q, provider recorded %+v", ack.ID, msgs)
		}
		return
	case "rejected":
		if !errors.As(err, &rej) {
			t.Fatalf("err = %v, want *ledger.Rejection", err)
		}
		if !strings.HasPrefix(rej.Reason, tt.wantText) {
			t.Fatalf("reason = %q, want prefix %q", rej.Reason, tt.wantText)
		}
		if len(rej.Reason) > 200 {
			t.Fatalf("reason is %d bytes, want it capped", len(rej.Reason))
		}
	case "notsent":
		var ns *ledger.NotSent
		if !errors.As(err, &ns) || errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want *ledger.NotSent only", err)
		}
		if ns.Code != tt.wantText || ns.RetryAfter != 0 {
			t.Fatalf("NotSent = %+v, want code %q without a wait", ns, tt.wantText)
		}
		if n := p.Recorded(s.IdempotencyKey); n != 0 {
			t.Fatalf("provider recorded %d, want 0", n)
		}
	case "unknown":
		var ns *ledger.NotSent
		if errors.As(err, &rej) || errors.As(err, &ns) || !errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
			t.Fatalf("err = %v, want an unknown outcome", err)
		}
		if !strings.HasPrefix(err.Error(), tt.wantText) {
			t.Fatalf("err = %q, want prefix %q", err, tt.wantText)
		}
	}
	assertClean(t, err.Error())
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("error %q repeats the URL", err)
	}
}

func TestSendTimeoutIsUnknown(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, func(c *webhooktransport.Config) { c.Timeout = 150 * time.Millisecond })
	p.Script(webhooktest.Step{Action: webhooktest.Slow, Delay: 5 * time.Second})
	s := testSend("slow")
	start := time.Now()
	_, err := tr.Send(context.Background(), s)
	if !errors.Is(err, webhooktransport.ErrOutcomeUnknown) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want an unknown outcome caused by the deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Send took %s, want it bounded by webhooktransport.Config.Timeout", d)
	}
	if n := p.Recorded(s.IdempotencyKey); n != 1 {
		t.Fatalf("provider recorded %d, want 1 (accepted, answer too slow)", n)
	}
	assertClean(t, err.Error())
}

func TestSendCallerCancelIsUnknown(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{}, nil)
	p.Script(webhooktest.Step{Action: webhooktest.Slow, Delay: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := tr.Send(ctx, testSend("cancel"))
	if !errors.Is(err, webhooktransport.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want an unknown outcome caused by cancellation", err)
	}
}

func TestSendConnectionRefusedIsUnknown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	tr, err := webhooktransport.New(&http.Client{}, config("http://"+addr+"/send"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Send(context.Background(), testSend("refused"))
	if !errors.Is(err, webhooktransport.ErrOutcomeUnknown) || err.Error() != "webhook: outcome unknown: connection refused" {
		t.Fatalf("err = %v, want unknown: connection refused", err)
	}
}

// TestSameKeyRetryAfterDrop is the reconcile path for a key-honoring
// endpoint: the first attempt is accepted but its answer is lost; the retry
// under the same key inside the window gets the same id and no second
// message.
func TestSameKeyRetryAfterDrop(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, nil)
	p.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop})
	s := testSend("drop")
	if _, err := tr.Send(context.Background(), s); !errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
		t.Fatalf("first attempt: err = %v, want unknown", err)
	}
	if n := p.Recorded(s.IdempotencyKey); n != 1 {
		t.Fatalf("after the drop the provider recorded %d, want 1", n)
	}
	s.Attempt = 2
	ack, err := tr.Send(context.Background(), s)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	msgs := p.Messages()
	if len(msgs) != 1 || ack.ID != msgs[0].ID {
		t.Fatalf("retry ack %q, provider messages %+v: want the first message's id", ack.ID, msgs)
	}
	if n := p.Recorded(s.IdempotencyKey); n != 1 {
		t.Fatalf("after the retry the provider recorded %d, want still 1", n)
	}
	if n := p.Received(s.IdempotencyKey); n != 2 {
		t.Fatalf("provider received %d requests, want 2", n)
	}
}

// TestNoTransparentRetryOnReusedConnection guards webhooktransport.Send's non-replayable
// request: net/http would otherwise re-send a POST carrying Idempotency-Key
// when a kept-alive connection dies before the answer.
func TestNoTransparentRetryOnReusedConnection(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: false}, nil)
	// Warm a keep-alive connection, then have the next request's answer lost.
	if _, err := tr.Send(context.Background(), testSend("warm")); err != nil {
		t.Fatal(err)
	}
	p.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop}, webhooktest.Step{Action: webhooktest.Accept})
	s := testSend("reused")
	if _, err := tr.Send(context.Background(), s); !errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want unknown", err)
	}
	if n := p.Received(s.IdempotencyKey); n != 1 {
		t.Fatalf("provider received the POST %d times, want exactly 1 (no attempt the ledger did not record)", n)
	}
	if n := p.Recorded(s.IdempotencyKey); n != 1 {
		t.Fatalf("provider recorded %d, want 1", n)
	}
}

func TestProviderWithoutKeysRecordsEveryAttempt(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: false}, nil)
	s := testSend("twice")
	a1, err1 := tr.Send(context.Background(), s)
	a2, err2 := tr.Send(context.Background(), s)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if a1.ID == a2.ID || p.Recorded(s.IdempotencyKey) != 2 {
		t.Fatalf("ids %q/%q, recorded %d: a provider that ignores keys records each attempt", a1.ID, a2.ID, p.Recorded(s.IdempotencyKey))
	}
}

func TestProviderRejectsKeyReuseWithOtherContent(t *testing.T) {
	p, tr, _ := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, nil)
	s := testSend("mismatch")
	if _, err := tr.Send(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	s.ContentHash = strings.Repeat("0", 64)
	_, err := tr.Send(context.Background(), s)
	var rej *ledger.Rejection
	if !errors.As(err, &rej) || !strings.HasPrefix(rej.Reason, "HTTP 422") {
		t.Fatalf("err = %v, want a 422 rejection", err)
	}
	if p.Recorded(s.IdempotencyKey) != 1 {
		t.Fatalf("recorded %d, want 1", p.Recorded(s.IdempotencyKey))
	}
}

func TestProviderRefusesAnotherSecret(t *testing.T) {
	other := []byte("another-secret-of-at-least-32-bytes!")
	p, tr, _ := setup(t, webhooktest.ProviderConfig{}, func(c *webhooktransport.Config) { c.Secret = other })
	s := testSend("auth")
	_, err := tr.Send(context.Background(), s)
	var rej *ledger.Rejection
	if !errors.As(err, &rej) || !strings.HasPrefix(rej.Reason, "HTTP 401") {
		t.Fatalf("err = %v, want a 401 rejection", err)
	}
	if strings.Contains(err.Error(), string(other)) {
		t.Fatalf("error %q repeats the secret", err)
	}
	if p.Received(s.IdempotencyKey) != 0 || p.Recorded(s.IdempotencyKey) != 0 || p.Refused() != 1 {
		t.Fatal("a request signed with another secret reached the send path")
	}
}

func TestLookup(t *testing.T) {
	p, tr, srv := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, func(c *webhooktransport.Config) { c.Lookup = true })
	found := testSend("found")
	p.Script(webhooktest.Step{Action: webhooktest.AcceptThenDrop})
	if _, err := tr.Send(context.Background(), found); !errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
		t.Fatalf("send: %v", err)
	}
	ack, ok, err := tr.Lookup(context.Background(), found.IdempotencyKey)
	if err != nil || !ok || ack.ID != p.Messages()[0].ID {
		t.Fatalf("Lookup(found) = %+v, %v, %v; want the recorded id %q", ack, ok, err, p.Messages()[0].ID)
	}
	ack, ok, err = tr.Lookup(context.Background(), testSend("never-sent").IdempotencyKey)
	if err != nil || ok || ack.ID != "" {
		t.Fatalf("Lookup(missing) = %+v, %v, %v; want not found", ack, ok, err)
	}

	// webhooktransport.Lookup answers other than 200/404 are errors, not "not found".
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	trDown, _ := webhooktransport.New(down.Client(), webhooktransport.Config{URL: down.URL, Secret: secret, Lookup: true})
	if _, ok, err := trDown.Lookup(context.Background(), found.IdempotencyKey); !errors.Is(err, webhooktransport.ErrLookupFailed) || ok {
		t.Fatalf("Lookup(503) = %v, %v; want ErrLookupFailed", ok, err)
	}

	// webhooktransport.Lookup off: no request at all.
	off, _ := webhooktransport.New(srv.Client(), config(srv.URL))
	if _, _, err := off.Lookup(context.Background(), found.IdempotencyKey); !errors.Is(err, webhooktransport.ErrLookupUnsupported) {
		t.Fatalf("Lookup with webhooktransport.Config.Lookup off = %v, want ErrLookupUnsupported", err)
	}
}

func TestProviderMessagesEndpoint(t *testing.T) {
	_, tr, srv := setup(t, webhooktest.ProviderConfig{HonorKeys: true}, nil)
	s := testSend("listed")
	ack, err := tr.Send(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Get(srv.URL + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []webhooktest.RecordedMessage
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != ack.ID || got[0].IdempotencyKey != s.IdempotencyKey || got[0].ContentHash != s.ContentHash || got[0].Attempt != 1 || got[0].To != testTo {
		t.Fatalf("GET /messages = %+v", got)
	}
}

// TestSendNotSent runs each answer through real net/http: complete 429 and
// 503 answers are *ledger.NotSent with the wait their Retry-After asks for;
// answers that break off, time out, or carry another 5xx stay unknown. The
// server sees exactly one request per webhooktransport.Send.
func TestSendNotSent(t *testing.T) {
	clock := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	date := clock.Add(-time.Hour) // the answer's Date, deliberately not the transport's clock
	httpDate := func(t time.Time) string { return t.Format(http.TimeFormat) }
	echo := `{"message":"slow down for ` + testTo + `: ` + strings.ReplaceAll(testBody, "\n", `\n`) + `"}`

	notSent := []struct {
		name  string
		serve http.HandlerFunc
		code  string
		after time.Duration
	}{
		{"429 without Retry-After", answer(429, "", httpDate(date), echo), "HTTP 429", 0},
		{"429 delta-seconds", answer(429, "120", httpDate(date), echo), "HTTP 429", 2 * time.Minute},
		{"429 delta-seconds zero", answer(429, "0", httpDate(date), echo), "HTTP 429", 0},
		{"429 delta-seconds with spaces", answer(429, " 7 ", httpDate(date), echo), "HTTP 429", 7 * time.Second},
		{"429 HTTP-date from the Date header", answer(429, httpDate(date.Add(90*time.Second)), httpDate(date), echo), "HTTP 429", 90 * time.Second},
		{"429 HTTP-date without a Date header uses the clock", answer(429, httpDate(clock.Add(45*time.Second)), "", echo), "HTTP 429", 45 * time.Second},
		{"429 HTTP-date with a garbled Date header uses the clock", answer(429, httpDate(clock.Add(45*time.Second)), "yesterday", echo), "HTTP 429", 45 * time.Second},
		{"429 HTTP-date in asctime form", answer(429, date.Add(time.Minute).Format(time.ANSIC), httpDate(date), echo), "HTTP 429", time.Minute},
		{"429 HTTP-date in the past", answer(429, httpDate(date.Add(-time.Minute)), httpDate(date), echo), "HTTP 429", 0},
		{"429 garbage", answer(429, "soon", httpDate(date), echo), "HTTP 429", 0},
		{"429 negative", answer(429, "-30", httpDate(date), echo), "HTTP 429", 0},
		{"429 fraction", answer(429, "1.5", httpDate(date), echo), "HTTP 429", 0},
		{"429 a day is cut to an hour", answer(429, "86400", httpDate(date), echo), "HTTP 429", time.Hour},
		{"429 overflow is cut to an hour", answer(429, "99999999999999999999999", httpDate(date), echo), "HTTP 429", time.Hour},
		{"429 far HTTP-date is cut to an hour", answer(429, "Fri, 31 Dec 9999 23:59:59 GMT", httpDate(date), echo), "HTTP 429", time.Hour},
		{"503 without Retry-After", answer(503, "", httpDate(date), echo), "HTTP 503", 0},
		{"503 with an empty body", answer(503, "", httpDate(date), ""), "HTTP 503", 0},
		{"503 delta-seconds", answer(503, "30", httpDate(date), echo), "HTTP 503", 30 * time.Second},
		{"503 HTTP-date", answer(503, httpDate(date.Add(5*time.Minute)), httpDate(date), echo), "HTTP 503", 5 * time.Minute},
		{"503 HTTP-date without a Date header", answer(503, httpDate(clock.Add(10*time.Second)), "", echo), "HTTP 503", 10 * time.Second},
		{"503 garbage", answer(503, "tomorrow-ish", httpDate(date), echo), "HTTP 503", 0},
	}
	unknown := []struct {
		name  string
		serve http.HandlerFunc
		want  string
	}{
		{"500", answer(500, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 500"},
		{"502", answer(502, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 502"},
		{"504", answer(504, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 504"},
		{"408", answer(408, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 408"},
		{"409", answer(409, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 409"},
		{"425", answer(425, "30", httpDate(date), echo), "webhook: outcome unknown: HTTP 425"},
		{"503 with a truncated body", truncated(503), "webhook: outcome unknown: HTTP 503, then the body was lost (connection closed before a complete response)"},
		{"429 with a truncated body", truncated(429), "webhook: outcome unknown: HTTP 429, then the body was lost (connection closed before a complete response)"},
		{"503 with a body over the cap", answer(503, "30", httpDate(date), strings.Repeat("x", webhooktransport.MaxResponse+1)), "webhook: outcome unknown: HTTP 503 with a body over 65536 bytes, not read to its end"},
		{"connection reset after the request was written", outcometest.ResetConnection, "webhook: outcome unknown: connection reset"},
		{"timeout", outcometest.Hang(5 * time.Second), "webhook: outcome unknown: timeout (deadline exceeded)"},
	}

	send := func(t *testing.T, serve http.HandlerFunc) error { return sendNotSent(t, clock, serve) }
	for _, tt := range notSent {
		t.Run(tt.name, func(t *testing.T) {
			err := send(t, tt.serve)
			var ns *ledger.NotSent
			var rej *ledger.Rejection
			if !errors.As(err, &ns) || errors.As(err, &rej) || errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want *ledger.NotSent only", err)
			}
			if ns.Code != tt.code || ns.RetryAfter != tt.after {
				t.Fatalf("NotSent = {%q, %s}, want {%q, %s}", ns.Code, ns.RetryAfter, tt.code, tt.after)
			}
		})
	}
	for _, tt := range unknown {
		t.Run(tt.name, func(t *testing.T) {
			err := send(t, tt.serve)
			var ns *ledger.NotSent
			var rej *ledger.Rejection
			if errors.As(err, &ns) || errors.As(err, &rej) || !errors.Is(err, webhooktransport.ErrOutcomeUnknown) {
				t.Fatalf("err = %v, want an unknown outcome", err)
			}
			if err.Error() != tt.want {
				t.Fatalf("err = %q\nwant  %q", err, tt.want)
			}
		})
	}
}

// answer writes status with Retry-After retry (if set) and the Date
// header date (none if empty), then body.
func answer(status int, retry, date, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if retry != "" {
			w.Header().Set("Retry-After", retry)
		}
		if date == "" {
			w.Header()["Date"] = nil // net/http adds none then
		} else {
			w.Header().Set("Date", date)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// sendNotSent sends once through a transport whose clock reads clock, to a
// server that serves, and returns the error, which must repeat neither a
// secret nor the URL.
func sendNotSent(t *testing.T, clock time.Time, serve http.HandlerFunc) error {
	t.Helper()
	err := outcometest.SendOnce(t, serve, func(srv *httptest.Server) error {
		cfg := config(srv.URL + "/v1/notify")
		cfg.Timeout = 300 * time.Millisecond
		cfg.Now = func() time.Time { return clock }
		tr, err := webhooktransport.New(srv.Client(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Send(context.Background(), testSend("ch-notsent"))
		return err
	})
	if err == nil {
		t.Fatal("Send succeeded, want an error")
	}
	assertClean(t, err.Error())
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("error %q repeats the URL", err)
	}
	return err
}

// truncated answers status with a Content-Length its body does not reach,
// then closes the connection.
func truncated(status int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Retry-After", "30")
		w.Header().Set("Content-Type", "application/json")
		outcometest.Truncate(w, status, `{"message":"temporarily unavailable, try again later"}`)
	}
}
