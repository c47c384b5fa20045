package webhooktransport_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/webhooktransport"
	"github.com/resetledger/resetledger/pkg/webhook"
	"github.com/resetledger/resetledger/pkg/webhook/webhooktest"
)

// TestProviderChecksSignatures: the test provider refuses (401) a send
// without a signature, or whose body was changed after it was signed, and
// records nothing; it accepts the transport's signed send and lookup.
func TestProviderChecksSignatures(t *testing.T) {
	p, tr, srv := setup(t, webhooktest.ProviderConfig{}, func(c *webhooktransport.Config) { c.Lookup = true })
	s := testSend("signed")
	body := []byte(`{"idempotency_key":"` + s.IdempotencyKey + `","content_hash":"` + s.ContentHash + `","channel":"sms","attempt":1,"to":"+15555550100","body":"code 123456"}`)
	post := func(header string, body []byte) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/notify", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Idempotency-Key", s.IdempotencyKey)
		if header != "" {
			req.Header.Set(webhook.SignatureHeader, header)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("", body); got != http.StatusUnauthorized {
		t.Errorf("unsigned send: HTTP %d, want 401", got)
	}
	sig := webhook.Sign(secret, time.Now(), http.MethodPost, "/v1/notify", body)
	tampered := bytes.Replace(body, []byte("+15555550100"), []byte("+15555550199"), 1)
	if got := post(sig, tampered); got != http.StatusUnauthorized {
		t.Errorf("tampered send: HTTP %d, want 401", got)
	}
	if got := post(webhook.Sign(secret, time.Now(), http.MethodPost, "/elsewhere", body), body); got != http.StatusUnauthorized {
		t.Errorf("send signed for another path: HTTP %d, want 401", got)
	}
	if n := len(p.Messages()); n != 0 || p.Refused() != 3 || p.Received(s.IdempotencyKey) != 0 {
		t.Fatalf("provider recorded %d, refused %d, received %d; want 0, 3, 0", n, p.Refused(), p.Received(s.IdempotencyKey))
	}
	if got := post(sig, body); got != http.StatusOK {
		t.Fatalf("signed send: HTTP %d, want 200", got)
	}
	// The transport signs its sends and its lookups.
	ack, err := tr.Send(context.Background(), testSend("transport"))
	if err != nil {
		t.Fatalf("transport send: %v", err)
	}
	if got, ok, err := tr.Lookup(context.Background(), testSend("transport").IdempotencyKey); err != nil || !ok || got.ID != ack.ID {
		t.Fatalf("transport lookup = %+v, %v, %v; want %q", got, ok, err, ack.ID)
	}
	if p.Refused() != 3 {
		t.Fatalf("provider refused %d requests, want only the 3 bad ones", p.Refused())
	}
}

// TestNoRedirects: the transport follows no redirect even when it is given
// a plain *http.Client, for sends and lookups alike: the host a redirect
// names gets no request.
func TestNoRedirects(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		var elsewhere atomic.Int32
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			elsewhere.Add(1)
			_, _ = io.WriteString(w, `{"id":"elsewhere"}`)
		}))
		t.Cleanup(target.Close)
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.URL+"/collect", status)
		}))
		t.Cleanup(redirector.Close)
		cfg := config(redirector.URL + "/send")
		cfg.Lookup = true
		tr, err := webhooktransport.New(&http.Client{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, sendErr := tr.Send(context.Background(), testSend("redirected"))
		_, found, lookupErr := tr.Lookup(context.Background(), testSend("redirected").IdempotencyKey)
		if n := elsewhere.Load(); n != 0 || sendErr == nil || found || lookupErr == nil {
			t.Fatalf("HTTP %d: the redirect's target got %d requests (send %v, lookup %v %v), want none and errors", status, n, sendErr, found, lookupErr)
		}
	}
}
