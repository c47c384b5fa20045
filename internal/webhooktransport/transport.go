// Package webhooktransport sends reset notifications as an HTTPS POST to a configured
// endpoint (an internal gateway, or a provider that honors idempotency keys)
// and implements ledger.Transport and ledger.Looker.
//
// Every attempt is one POST of a JSON webhook.Payload to Config.URL with the headers
//
//	Idempotency-Key: <dedupe key>
//	Content-Type: application/json
//	Webhook-Signature: t=<unix seconds>,v1=<hex HMAC-SHA-256>   (see webhook.Sign)
//
// and no retries: neither this package nor net/http repeats the request (see
// Transport.Send). Every request, sends and lookups, is signed with
// Config.Secret, so the endpoint can tell the ledger's requests from anyone
// else's (webhook.Verify is the receiver's check).
//
// The URL must be https, except to a loopback host (localhost, 127.0.0.0/8,
// ::1). No redirect is followed: a 3xx answer is classified like any other
// status, below, and the request is never repeated to where it points.
//
// Outcomes:
//
//	2xx with JSON {"id": "<non-empty>"}         -> ledger.Ack{ID: id}
//	2xx without a usable id                     -> unknown (accepted, but no evidence to record)
//	429 or 503, body read to its end            -> *ledger.NotSent{Code: "HTTP 429" or "HTTP 503", RetryAfter: from Retry-After}
//	4xx except 408, 409, 425, 429               -> *ledger.Rejection ("HTTP <status>: <sanitized reason>")
//	301, 307, 308 (redirect not followed)       -> *ledger.Rejection ("HTTP <status>: redirect not followed; ...")
//	408, 409, 425, 5xx other than 503, 1xx,
//	302, 303 and the other 3xx,
//	429 or 503 whose body was cut off           -> unknown
//	timeout, connection reset or refused, EOF,
//	cancelled context                           -> unknown
//
// A 429 or 503 is proof that the message was not taken only if the whole
// answer arrived; one that breaks off is read like a lost connection. A 503
// is taken as the endpoint (or its load balancer) refusing to handle the
// request: an endpoint behind a proxy that answers 503 after forwarding the
// request (some service meshes do on an upstream reset) breaks that reading.
//
// A 301, 307 or 308 says the endpoint is elsewhere (307 and 308 ask for the
// same POST to be repeated there): the endpoint did not handle the message,
// and every later attempt at the same URL gets the same answer, so it is a
// rejection, the misconfigured WEBHOOK_URL its reason. A 303 is the answer
// to a POST that was processed (see the result elsewhere), and many servers
// answer 302 the same way, so both, and the rarer 3xx, are unknown: the
// message may have been taken.
//
// Retry-After on a 429 or 503 is read in both forms: delay-seconds, or an
// HTTP-date measured from the answer's Date header (from Config.Now if the
// answer has no valid one). An absent, unparseable or negative value, or a
// date already past, gives RetryAfter 0 (the caller falls back to its own
// backoff); a wait longer than outcome.MaxRetryAfter (1 h) is cut to it.
//
// Unknown outcomes wrap ErrOutcomeUnknown. No error text contains the
// address, the message, the secret or the URL.
//
// Capabilities follow the configuration: Config.KeyWindow is the window in
// which the endpoint deduplicates by Idempotency-Key (the reconciler retries
// an unknown send under the same key inside it), and Config.Lookup says the
// endpoint answers GET <URL>/<idempotency key> with 200 {"id": ...} or 404.
package webhooktransport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/resetledger/resetledger/internal/outcome"
	"github.com/resetledger/resetledger/internal/redact"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/webhook"
)

// Defaults applied by DefaultConfig (and, for Timeout, by New when zero).
const (
	DefaultTimeout   = 5 * time.Second
	DefaultKeyWindow = 24 * time.Hour
)

// maxResponse caps how much of a response body is read.
const maxResponse = 64 << 10

// maxAckID caps the length of an acknowledgement id accepted from the
// endpoint.
const maxAckID = 256

var (
	// ErrOutcomeUnknown is wrapped by every Send error that is neither a
	// rejection nor a *ledger.NotSent: the endpoint may or may not have
	// accepted the message.
	ErrOutcomeUnknown = errors.New("webhook: outcome unknown")
	// ErrInvalidConfig is wrapped by Config.Validate errors.
	ErrInvalidConfig = errors.New("webhook: invalid config")
	// ErrLookupUnsupported is returned by Lookup when Config.Lookup is off.
	ErrLookupUnsupported = errors.New("webhook: endpoint does not support lookup")
	// ErrLookupFailed is wrapped by Lookup errors other than
	// ErrLookupUnsupported: the endpoint gave no usable answer.
	ErrLookupFailed = errors.New("webhook: lookup failed")
)

// Doer sends an HTTP request; *http.Client implements it. Inject a client
// with the transport (proxy, TLS) settings the deployment needs; this
// package never uses http.DefaultClient. New makes an *http.Client it is
// given follow no redirect; any other Doer must not follow redirects either.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Config configures the transport. Start from DefaultConfig: in a zero
// Config, KeyWindow is 0, which claims that the endpoint honors no keys.
type Config struct {
	// URL is the endpoint that receives the POST. It must be https, except
	// for a loopback host (localhost, 127.0.0.0/8, ::1). It must not carry
	// user info or a fragment. Required.
	URL string
	// Secret keys the HMAC-SHA-256 signature every request carries (webhook.Sign);
	// at least webhook.MinSecretLen bytes. It is never logged or put into an error.
	// Required.
	Secret []byte
	// Timeout bounds one attempt, from sending the request to reading the
	// response; reaching it is an unknown outcome. Default DefaultTimeout.
	Timeout time.Duration
	// KeyWindow is how long the endpoint deduplicates requests carrying the
	// same Idempotency-Key. 0 means it does not; DefaultConfig sets
	// DefaultKeyWindow. It becomes Capabilities().IdempotencyWindow, so do
	// not claim more than the endpoint guarantees.
	KeyWindow time.Duration
	// Lookup says the endpoint answers GET <URL>/<idempotency key> with
	// 200 {"id": "..."} for a message it recorded and 404 otherwise.
	Lookup bool
	// Now is the clock of the signature's timestamp, and the one an
	// HTTP-date in Retry-After is measured from when the answer carries no
	// Date header. Default time.Now.
	Now ledger.Clock
}

// DefaultConfig returns a Config for url with the default timeout and key
// window and without lookup.
func DefaultConfig(url string) Config {
	return Config{URL: url, Timeout: DefaultTimeout, KeyWindow: DefaultKeyWindow}
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first invalid field, after applying defaults. Its
// errors wrap ErrInvalidConfig and never echo the URL or the secret.
func (c Config) Validate() error {
	c = c.withDefaults()
	if _, err := c.endpoint(); err != nil {
		return err
	}
	if len(c.Secret) < webhook.MinSecretLen {
		return fmt.Errorf("%w: Secret must be at least %d bytes", ErrInvalidConfig, webhook.MinSecretLen)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("%w: Timeout must be positive", ErrInvalidConfig)
	}
	if c.KeyWindow < 0 {
		return fmt.Errorf("%w: KeyWindow must not be negative", ErrInvalidConfig)
	}
	return nil
}

func (c Config) endpoint() (*url.URL, error) {
	u, err := ParseURL(c.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return u, nil
}

// ErrInsecureURL is wrapped by ParseURL's errors for a URL that is not
// https to a host that is not loopback.
var ErrInsecureURL = errors.New("URL must be https (plain http only to a loopback host: localhost, 127.0.0.0/8, ::1)")

// ParseURL parses an endpoint URL and checks it as Config.Validate does:
// absolute, https (plain http only to localhost, 127.0.0.0/8 or ::1), no
// user info, no fragment. Its errors never repeat the URL. The functions'
// settings (WEBHOOK_URL) and the stack's props are checked with it.
func ParseURL(raw string) (*url.URL, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, errors.New("URL is required")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return nil, errors.New("URL is not an absolute https URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback(u.Hostname()):
	default:
		return nil, ErrInsecureURL
	}
	if u.User != nil {
		return nil, errors.New("URL must not carry credentials: requests are signed with the secret")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		return nil, errors.New("URL must not have a fragment")
	}
	return u, nil
}

// loopback reports whether host is localhost or a loopback address
// (127.0.0.0/8, ::1). No name but localhost is resolved: a name that
// resolves to a loopback address today may not tomorrow.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Transport posts messages to a webhook endpoint. It is safe for concurrent
// use.
type Transport struct {
	client   Doer
	cfg      Config
	endpoint *url.URL
}

// New returns a transport that sends with client. If client is an
// *http.Client, New uses a copy of it that follows no redirect (see
// NoRedirects); any other Doer must not follow redirects itself.
func New(client Doer, cfg Config) (*Transport, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil HTTP client", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	if c, ok := client.(*http.Client); ok {
		client = NoRedirects(c)
	}
	u, _ := cfg.endpoint()
	return &Transport{client: client, cfg: cfg, endpoint: u}, nil
}

// NoRedirects returns a copy of c (a new client if c is nil) that follows
// no redirect: a 3xx answer comes back as the response. Without it
// net/http follows 301, 302 and 303 with a GET carrying the request's
// headers (the Idempotency-Key and the signature included) to wherever the
// Location points, plain http included, and 307 and 308 with the body too
// when the request can be replayed.
func NoRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// Capabilities reports the configured key window and lookup support.
func (t *Transport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{IdempotencyWindow: t.cfg.KeyWindow, Lookup: t.cfg.Lookup}
}

// Send makes exactly one POST, bounded by Config.Timeout, and maps the
// answer as the package documentation describes.
//
// The request is made non-replayable on purpose: net/http transparently
// re-sends a request that carries an Idempotency-Key header when a reused
// connection breaks before the response, which would be an attempt the
// ledger never recorded. Without GetBody it re-sends only what it knows was
// never written.
func (t *Transport) Send(ctx context.Context, s ledger.Send) (ledger.Ack, error) {
	body, err := json.Marshal(webhook.Payload{
		IdempotencyKey: s.IdempotencyKey,
		ContentHash:    s.ContentHash,
		Channel:        string(s.Channel),
		Attempt:        s.Attempt,
		ExpiresAt:      s.ExpiresAt.UTC(),
		To:             s.Message.To,
		Subject:        s.Message.Subject,
		Body:           s.Message.Body,
	})
	if err != nil {
		// Nothing was sent. Marshalling strings and numbers does not fail.
		return ledger.Ack{}, &ledger.Rejection{Reason: "webhook: cannot encode the message"}
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.endpoint.String(), bytes.NewReader(body))
	if err != nil {
		return ledger.Ack{}, &ledger.Rejection{Reason: "webhook: cannot build the request"}
	}
	req.GetBody = nil
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Idempotency-Key", s.IdempotencyKey)
	t.sign(req, body)

	resp, err := t.client.Do(req)
	if err != nil {
		return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, t.failureClass(err), err)
	}
	defer resp.Body.Close()
	// One byte past the cap tells a body that ended from one that goes on.
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	complete := readErr == nil && len(raw) <= maxResponse
	raw = raw[:min(len(raw), maxResponse)]
	code := resp.StatusCode

	switch {
	case code >= 200 && code < 300:
		if readErr != nil {
			return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, fmt.Sprintf("HTTP %d, then the body was lost (%s)", code, t.failureClass(readErr)), readErr)
		}
		id, ok := receiptID(raw)
		if !ok {
			return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, fmt.Sprintf("HTTP %d without a usable id", code), nil)
		}
		return ledger.Ack{ID: id}, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		switch {
		case readErr != nil:
			return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, fmt.Sprintf("HTTP %d, then the body was lost (%s)", code, t.failureClass(readErr)), readErr)
		case !complete:
			return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, fmt.Sprintf("HTTP %d with a body over %d bytes, not read to its end", code, maxResponse), nil)
		}
		return ledger.Ack{}, outcome.NotSentFor(fmt.Sprintf("HTTP %d", code), t.retryAfter(resp.Header))
	case code == http.StatusMovedPermanently || code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect:
		return ledger.Ack{}, &ledger.Rejection{Reason: fmt.Sprintf("HTTP %d: redirect not followed; the endpoint did not take the message at WEBHOOK_URL (set it to the endpoint itself)", code)}
	case code >= 400 && code < 500 && !unsettledStatus(code):
		reason := fmt.Sprintf("HTTP %d", code)
		if text := redact.Text(errorText(raw), t.secrets(s.Message)...); text != "" {
			reason += ": " + text
		}
		return ledger.Ack{}, &ledger.Rejection{Reason: reason}
	default:
		return ledger.Ack{}, outcome.Unknown(ErrOutcomeUnknown, fmt.Sprintf("HTTP %d", code), nil)
	}
}

// unsettledStatus lists the 4xx statuses other than 429 that neither refuse
// the message nor prove it was not taken: a request timeout, a conflict
// (typically the same key still in flight) and too early.
func unsettledStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly:
		return true
	}
	return false
}

// retryAfter returns the wait the Retry-After header of h asks for (RFC
// 9110, section 10.2.3): delay-seconds, or an HTTP-date measured from the
// answer's Date header, or from Config.Now without a valid one. An absent or
// unparseable value gives 0 and a date in the past a negative wait, which
// outcome.NotSentFor clamps to 0 (as it cuts long waits to
// outcome.MaxRetryAfter).
func (t *Transport) retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if strings.Trim(v, "0123456789") == "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs > int64(outcome.MaxRetryAfter/time.Second) {
			return outcome.MaxRetryAfter // err can only be an overflow
		}
		return time.Duration(secs) * time.Second
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	now, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		now = t.cfg.Now()
	}
	return when.Sub(now)
}

// Lookup asks the endpoint for the message it recorded under key: GET
// <URL>/<key>, 200 {"id": ...} is found, 404 is not found. Anything else is
// an error wrapping ErrLookupFailed. It returns ErrLookupUnsupported unless
// Config.Lookup is set.
func (t *Transport) Lookup(ctx context.Context, key string) (ledger.Ack, bool, error) {
	if !t.cfg.Lookup {
		return ledger.Ack{}, false, ErrLookupUnsupported
	}
	u := t.endpoint.JoinPath(url.PathEscape(key))
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return ledger.Ack{}, false, fmt.Errorf("%w: cannot build the request", ErrLookupFailed)
	}
	req.Header.Set("Accept", "application/json")
	t.sign(req, nil)
	resp, err := t.client.Do(req)
	if err != nil {
		return ledger.Ack{}, false, outcome.Unknown(ErrLookupFailed, t.failureClass(err), err)
	}
	defer resp.Body.Close()
	raw, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	switch {
	case resp.StatusCode == http.StatusOK && readErr == nil:
		id, ok := receiptID(raw)
		if !ok {
			return ledger.Ack{}, false, outcome.Unknown(ErrLookupFailed, "HTTP 200 without a usable id", nil)
		}
		return ledger.Ack{ID: id}, true, nil
	case resp.StatusCode == http.StatusNotFound:
		return ledger.Ack{}, false, nil
	case readErr != nil:
		return ledger.Ack{}, false, outcome.Unknown(ErrLookupFailed, t.failureClass(readErr), readErr)
	default:
		return ledger.Ack{}, false, outcome.Unknown(ErrLookupFailed, fmt.Sprintf("HTTP %d", resp.StatusCode), nil)
	}
}

// sign sets the request's signature header (webhook.Sign) over its method, target
// and body, at Config.Now.
func (t *Transport) sign(req *http.Request, body []byte) {
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(t.cfg.Secret, t.cfg.Now(), req.Method, webhook.Target(req.URL), body))
}

// secrets lists the strings no error may repeat: the message's fields (and
// each line of the body, in case the endpoint echoes part of it) and the
// signing secret.
func (t *Transport) secrets(m ledger.Message) []string {
	out := []string{m.Body, m.To, string(t.cfg.Secret)}
	for _, line := range strings.Split(m.Body, "\n") {
		if line = strings.TrimSpace(line); len(line) >= 8 {
			out = append(out, line)
		}
	}
	return out
}

// failureClass names a transport failure without repeating its text, which
// for net/http includes the URL.
func (t *Transport) failureClass(err error) string {
	var timeout interface{ Timeout() bool }
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout (deadline exceeded)"
	case errors.Is(err, context.Canceled):
		return "context canceled"
	case errors.As(err, &timeout) && timeout.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before a complete response"
	}
	return "transport error"
}

// receiptID extracts a usable id from a JSON receipt.
func receiptID(raw []byte) (string, bool) {
	var r webhook.Receipt
	if err := json.Unmarshal(raw, &r); err != nil {
		return "", false
	}
	if r.ID == "" || len(r.ID) > maxAckID {
		return "", false
	}
	for _, c := range r.ID {
		if !unicode.IsPrint(c) {
			return "", false
		}
	}
	return r.ID, true
}

// errorText picks the human-readable part of an error body: a JSON
// "message", "error" (string or object with "message"), "detail", "title"
// or "reason" field, else the raw text.
func errorText(raw []byte) string {
	var doc map[string]any
	if json.Unmarshal(raw, &doc) == nil {
		for _, k := range []string{"message", "error", "detail", "title", "reason"} {
			switch v := doc[k].(type) {
			case string:
				return v
			case map[string]any:
				if m, ok := v["message"].(string); ok {
					return m
				}
			}
		}
		return ""
	}
	return string(raw)
}
