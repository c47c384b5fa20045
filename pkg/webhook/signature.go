package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a request's signature (see Sign).
const SignatureHeader = "Webhook-Signature"

// MinSecretLen is the shortest signing secret Config.Validate accepts, in
// bytes: HMAC-SHA-256 is keyed with 256 bits at least.
const MinSecretLen = 32

// DefaultSignatureTolerance is how far a signature's timestamp may be from
// the receiver's clock before Verify refuses it: a captured request can be
// replayed only within it (and a send carries its Idempotency-Key, which a
// receiver that deduplicates uses to drop a replay inside its window).
const DefaultSignatureTolerance = 5 * time.Minute

var (
	// ErrSignatureMissing is wrapped by Verify when the request carries no
	// signature header, or one without a timestamp or a v1 signature.
	ErrSignatureMissing = errors.New("webhook: signature missing")
	// ErrSignatureInvalid is wrapped by Verify when no v1 signature matches
	// the request under any of the receiver's secrets.
	ErrSignatureInvalid = errors.New("webhook: signature invalid")
	// ErrSignatureStale is wrapped by Verify when the signature's timestamp
	// is further from the receiver's clock than the tolerance.
	ErrSignatureStale = errors.New("webhook: signature timestamp outside the tolerance")
)

// Target returns the request target a signature covers: the URL's escaped
// path ("/" if empty), then "?" and the raw query if it has one. It is the
// request line's target as net/http sends it.
func Target(u *url.URL) string {
	t := u.EscapedPath()
	if t == "" {
		t = "/"
	}
	if u.RawQuery != "" {
		t += "?" + u.RawQuery
	}
	return t
}

// Sign returns the Webhook-Signature header value for a request made at t:
//
//	t=<unix seconds>,v1=<lowercase hex HMAC-SHA-256(secret, signed)>
//	signed = "<unix seconds>.<METHOD>.<target>.<body>"
//
// where target is Target of the request's URL and body the exact bytes sent
// (empty for a GET). Binding the method and target keeps a lookup's
// signature from being replayed as another lookup, and a send's from being
// replayed to another path.
func Sign(secret []byte, t time.Time, method, target string, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, method, target, body))
}

func mac(secret []byte, ts, method, target string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts + "." + method + "." + target + "."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a Webhook-Signature header value (header) against a request
// made with method to target with body: its timestamp must be within
// tolerance of now, and one of its v1 signatures must be the HMAC of the
// request under one of secrets (a receiver holds two while a secret is
// rotated). It compares in constant time. Its errors wrap
// ErrSignatureMissing, ErrSignatureStale or ErrSignatureInvalid and never
// repeat the header, a secret or the body.
func Verify(header string, secrets [][]byte, method, target string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	if ts == "" || len(sigs) == 0 {
		return fmt.Errorf("%w: want %s: t=<unix seconds>,v1=<hex HMAC-SHA-256>", ErrSignatureMissing, SignatureHeader)
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: t is not a unix time in seconds", ErrSignatureMissing)
	}
	if d := now.Sub(time.Unix(secs, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w (%s)", ErrSignatureStale, tolerance)
	}
	for _, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		want := mac(secret, ts, method, target, body)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return nil
			}
		}
	}
	return ErrSignatureInvalid
}
