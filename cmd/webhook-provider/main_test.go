package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/webhook"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

// testSecret is the signing secret start writes to the provider's secret file.
var testSecret = []byte("local-provider-test-secret-0123456789abcdef")

// start runs the command on a free loopback port with a secret file holding
// testSecret, and returns its base URL.
func start(t *testing.T, args ...string) (string, *bytes.Buffer) {
	base, logs, _ := startWithSecretFile(t, args...)
	return base, logs
}

// startWithSecretFile is start, also returning the secret file's path.
func startWithSecretFile(t *testing.T, args ...string) (string, *bytes.Buffer, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "webhook.secret")
	if err := os.WriteFile(file, append(slices.Clone(testSecret), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var logs bytes.Buffer
	args = append([]string{"--addr", "127.0.0.1:0", "--secret-file", file}, args...)
	go func() { done <- run(ctx, args, func(string) string { return "" }, &logs, ready) }()
	select {
	case addr := <-ready:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run after shutdown: %v", err)
			}
		})
		return "http://" + addr, &logs, file
	case err := <-done:
		cancel()
		t.Fatalf("run: %v", err)
	case <-time.After(5 * time.Second):
		cancel()
		t.Fatal("provider did not start")
	}
	return "", nil, ""
}

func post(t *testing.T, base, key, body string) int {
	t.Helper()
	return postSigned(t, base, key, body, testSecret)
}

// postSigned posts a message signed with secret (none if nil).
func postSigned(t *testing.T, base, key, body string, secret []byte) int {
	t.Helper()
	p, _ := json.Marshal(webhook.Payload{IdempotencyKey: key, ContentHash: "h", Channel: "sms", Attempt: 1, To: "+15550100", Body: body})
	req, _ := http.NewRequest(http.MethodPost, base+"/send", bytes.NewReader(p))
	if secret != nil {
		req.Header.Set(webhook.SignatureHeader, webhook.Sign(secret, time.Now(), http.MethodPost, "/send", p))
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func messages(t *testing.T, base string) []webhooktest.RecordedMessage {
	t.Helper()
	resp, err := http.Get(base + "/messages")
	if err != nil {
		t.Fatalf("GET /messages: %v", err)
	}
	defer resp.Body.Close()
	var got []webhooktest.RecordedMessage
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatalf("decode /messages: %v", err)
	}
	return got
}

func TestRecordsEveryPostByDefault(t *testing.T) {
	base, logs := start(t)
	for i := 0; i < 2; i++ {
		if code := post(t, base, "k1", "secret-body"); code != http.StatusOK {
			t.Fatalf("POST %d: status %d", i, code)
		}
	}
	if got := messages(t, base); len(got) != 2 || got[0].IdempotencyKey != "k1" || got[0].ID == got[1].ID {
		t.Errorf("messages = %+v, want two records under k1 with distinct ids", got)
	}
	if strings.Contains(logs.String(), "secret-body") || strings.Contains(logs.String(), "+15550100") {
		t.Errorf("log holds message content: %s", logs)
	}
	if !strings.Contains(logs.String(), `"idempotency_key":"k1"`) {
		t.Errorf("log lacks the idempotency key: %s", logs)
	}
}

func TestKeyWindowDeduplicates(t *testing.T) {
	base, _ := start(t, "--key-window", "24h")
	post(t, base, "k1", "a")
	post(t, base, "k1", "a")
	if got := messages(t, base); len(got) != 1 {
		t.Errorf("messages = %+v, want one record under k1", got)
	}
}

// TestChecksSignatures: the provider refuses (401) an unsigned request and
// one signed with another secret, records neither, and accepts a signed one;
// a secret written to the file later applies without a restart.
func TestChecksSignatures(t *testing.T) {
	base, _, file := startWithSecretFile(t)
	if code := postSigned(t, base, "unsigned", "b", nil); code != http.StatusUnauthorized {
		t.Errorf("unsigned: HTTP %d, want 401", code)
	}
	other := []byte("another-secret-0123456789abcdef-0123456789")
	if code := postSigned(t, base, "other", "b", other); code != http.StatusUnauthorized {
		t.Errorf("signed with another secret: HTTP %d, want 401", code)
	}
	if got := messages(t, base); len(got) != 0 {
		t.Fatalf("recorded %+v from refused requests", got)
	}
	if code := post(t, base, "signed", "b"); code != http.StatusOK {
		t.Errorf("signed: HTTP %d, want 200", code)
	}
	// Rotation: both secrets in the file, then only the new one.
	if err := os.WriteFile(file, append(append(slices.Clone(testSecret), '\n'), other...), 0o600); err != nil {
		t.Fatal(err)
	}
	if a, b := post(t, base, "old", "b"), postSigned(t, base, "new", "b", other); a != http.StatusOK || b != http.StatusOK {
		t.Errorf("during a rotation: old secret HTTP %d, new secret HTTP %d; want both 200", a, b)
	}
	if err := os.WriteFile(file, other, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := post(t, base, "retired", "b"); code != http.StatusUnauthorized {
		t.Errorf("retired secret: HTTP %d, want 401", code)
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--key-window", "-1s"}, {"extra"}, {"--addr", "256.0.0.1:1"}, {"--addr", "127.0.0.1:0"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, nil); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
