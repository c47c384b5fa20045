// Package webhooktest is a local HTTP provider for tests of the webhook
// transport: it checks every request's signature (webhook.Verify), records
// what it receives per Idempotency-Key, can honor keys, and follows a script
// of answers (accept, reject, drop, slow, any status).
// It is test support, like net/http/httptest; nothing in production uses it.
package webhooktest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/webhook"
)

// Action is what a Provider does with one POST.
type Action int

// Provider actions.
const (
	// Accept records the message (once per key if keys are honored) and
	// answers 200 {"id": ...}.
	Accept Action = iota
	// Reject answers 400 with Step.Body (default {"error":"rejected by test provider"})
	// and records nothing.
	Reject
	// Unavailable answers 503 with Step.Body and records nothing.
	Unavailable
	// AcceptThenDrop records the message like Accept, then closes the
	// connection without answering: the sender cannot know it was accepted.
	AcceptThenDrop
	// Slow records the message like Accept, then holds the answer for
	// Step.Delay (or until the client hangs up) before answering.
	Slow
	// Respond answers Step.Status with Step.Body and records nothing.
	Respond
)

// Step scripts the Provider's handling of one POST.
type Step struct {
	Action Action
	// Status is the status code for Respond.
	Status int
	// Body is the response body for Reject, Unavailable and Respond.
	Body string
	// Delay is how long Slow holds the answer.
	Delay time.Duration
}

// ProviderConfig configures a Provider.
type ProviderConfig struct {
	// HonorKeys makes the Provider deduplicate by Idempotency-Key: a repeated
	// key gets the first message's id and is not recorded again (a different
	// content hash under a known key gets 422).
	HonorKeys bool
	// Secrets returns the signing secrets a request may be signed with
	// (webhook.Sign; two while a secret is rotated). It is asked at every
	// request, so a secret that changes (the local stage's provider reads a
	// file the deploy writes) applies without a restart. Every request but
	// GET /messages must carry a valid signature under one of them, within
	// webhook.DefaultSignatureTolerance; others get 401 and are neither
	// counted nor recorded. Nil, or no secret: every such request gets 401.
	Secrets func() [][]byte
}

// Static returns a ProviderConfig.Secrets that always returns secrets.
func Static(secrets ...[]byte) func() [][]byte {
	return func() [][]byte { return secrets }
}

// RecordedMessage is a message the Provider accepted.
type RecordedMessage struct {
	ID string `json:"id"`
	webhook.Payload
	ReceivedAt time.Time `json:"received_at"`
}

// Provider is an http.Handler standing in for an external webhook provider
// in tests and in the local end-to-end stack. It is never part of the
// ledger's storage, so it keeps whole messages.
//
// Routes (under any path prefix):
//
//	POST <prefix>           send: handled by the next scripted Step (Accept when none is left)
//	GET  <prefix>/messages  JSON list of recorded messages
//	GET  <prefix>/<key>     lookup: 200 {"id": ...} for a recorded key, else 404
type Provider struct {
	cfg ProviderConfig

	mu       sync.Mutex
	script   []Step
	seq      int
	messages []RecordedMessage
	byKey    map[string]int // key -> index into messages of its first record
	recorded map[string]int
	received map[string]int
	refused  int
}

// NewProvider returns a Provider with an empty script.
func NewProvider(cfg ProviderConfig) *Provider {
	return &Provider{cfg: cfg, byKey: map[string]int{}, recorded: map[string]int{}, received: map[string]int{}}
}

// Script appends steps; each POST consumes one, in order.
func (p *Provider) Script(steps ...Step) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.script = append(p.script, steps...)
}

// Recorded returns how many messages were recorded under key.
func (p *Provider) Recorded(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.recorded[key]
}

// Received returns how many POSTs carried key, whatever their handling.
func (p *Provider) Received(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.received[key]
}

// Refused returns how many requests were refused for a missing or bad
// signature.
func (p *Provider) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Messages returns a copy of the recorded messages, oldest first.
func (p *Provider) Messages() []RecordedMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]RecordedMessage(nil), p.messages...)
}

// ServeHTTP implements http.Handler.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && path.Base(r.URL.Path) == "messages" {
		writeJSON(w, http.StatusOK, p.Messages())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "body too large"})
		return
	}
	if err := p.verify(r, body); err != nil {
		p.mu.Lock()
		p.refused++
		p.mu.Unlock()
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": err.Error()})
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch r.Method {
	case http.MethodGet:
		p.lookup(w, path.Base(r.URL.Path))
	case http.MethodPost:
		p.send(w, r)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
	}
}

// verify checks the request's signature against the configured secrets.
func (p *Provider) verify(r *http.Request, body []byte) error {
	var secrets [][]byte
	if p.cfg.Secrets != nil {
		secrets = p.cfg.Secrets()
	}
	return webhook.Verify(r.Header.Get(webhook.SignatureHeader), secrets, r.Method, webhook.Target(r.URL), body,
		time.Now(), webhook.DefaultSignatureTolerance)
}

func (p *Provider) lookup(w http.ResponseWriter, key string) {
	p.mu.Lock()
	i, ok := p.byKey[key]
	var id string
	if ok {
		id = p.messages[i].ID
	}
	p.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
		return
	}
	writeJSON(w, http.StatusOK, webhook.Receipt{ID: id})
}

func (p *Provider) send(w http.ResponseWriter, r *http.Request) {
	var msg webhook.Payload
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body is not a JSON payload"})
		return
	}
	key := r.Header.Get("Idempotency-Key")

	p.mu.Lock()
	p.received[key]++
	step := Step{Action: Accept}
	if len(p.script) > 0 {
		step, p.script = p.script[0], p.script[1:]
	}
	p.mu.Unlock()

	if key == "" || key != msg.IdempotencyKey {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key header missing or different from idempotency_key"})
		return
	}

	switch step.Action {
	case Reject:
		respond(w, http.StatusBadRequest, step.Body, "rejected by test provider")
	case Unavailable:
		respond(w, http.StatusServiceUnavailable, step.Body, "temporarily unavailable")
	case Respond:
		respond(w, step.Status, step.Body, http.StatusText(step.Status))
	case Accept, AcceptThenDrop, Slow:
		id, status := p.record(msg)
		if status != http.StatusOK {
			writeJSON(w, status, map[string]string{"error": "idempotency key reused with different content"})
			return
		}
		switch step.Action {
		case AcceptThenDrop:
			drop(w)
			return
		case Slow:
			select {
			case <-time.After(step.Delay):
			case <-r.Context().Done():
				return
			}
		}
		writeJSON(w, http.StatusOK, webhook.Receipt{ID: id})
	default:
		respond(w, http.StatusInternalServerError, "", "unknown scripted action")
	}
}

// record stores msg and returns its id, or the first id for its key if keys
// are honored. It returns 422 for a known key with different content.
func (p *Provider) record(msg webhook.Payload) (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i, ok := p.byKey[msg.IdempotencyKey]; ok && p.cfg.HonorKeys {
		if p.messages[i].ContentHash != msg.ContentHash {
			return "", http.StatusUnprocessableEntity
		}
		return p.messages[i].ID, http.StatusOK
	}
	p.seq++
	id := fmt.Sprintf("wh-%06d", p.seq)
	if _, ok := p.byKey[msg.IdempotencyKey]; !ok {
		p.byKey[msg.IdempotencyKey] = len(p.messages)
	}
	p.messages = append(p.messages, RecordedMessage{ID: id, Payload: msg, ReceivedAt: time.Now().UTC()})
	p.recorded[msg.IdempotencyKey]++
	return id, http.StatusOK
}

// drop closes the connection without a response (or answers 500 if the
// server cannot hand the connection over).
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "test provider cannot drop this connection"})
		return
	}
	if conn, _, err := hj.Hijack(); err == nil {
		_ = conn.Close()
	}
}

func respond(w http.ResponseWriter, status int, body, fallback string) {
	if body == "" {
		writeJSON(w, status, map[string]string{"error": fallback})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
