package kmsseal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/intentseal"
	"github.com/resetledger/resetledger/pkg/intentseal/kmsseal"
)

var (
	testKey = []byte("kmsseal test key")
	// binding stands for an intent's binding; its refs are opaque, but no
	// error may carry them either.
	binding = []byte("password-reset|ch-kms-1|email|subject-ref-7|dest-ref-7|2026-12-06T04:00:00Z")
)

// localSeal is the seal of b under testKey, made without KMS.
func localSeal(t *testing.T, b []byte) string {
	t.Helper()
	s, err := (&intentseal.Local{Key: testKey}).Sign(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// failure is one way KMS (or the way to it) fails a request.
type failure struct {
	name   string
	answer func(op string, attempt int) *answer
	// mismatch: KMS's answer is proof the seal is not the intent's.
	mismatch bool
	// want, when set, must be in the chain of the error returned.
	want error
	// ctx, when set, is the context of the call.
	ctx func() (context.Context, context.CancelFunc)
}

func always(a *answer) func(string, int) *answer { return func(string, int) *answer { return a } }

// verifyFailures are every way a VerifyMac can fail. Only an invalid MAC
// (KMSInvalidMacException, or MacValid false) says anything about the
// seal; every other failure says nothing about it and must be retried.
func verifyFailures() []failure {
	valid := func(fields map[string]any) func(string, int) *answer {
		m := map[string]any{"KeyId": keyARN, "MacAlgorithm": "HMAC_SHA_256", "MacValid": true}
		for k, v := range fields {
			if v == nil {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return always(okJSON(m))
	}
	return []failure{
		{name: "KMSInvalidMacException", mismatch: true,
			answer: always(kmsError(400, "KMSInvalidMacException", "The request was rejected because the HMAC verification failed."))},
		{name: "MacValid false", mismatch: true, answer: valid(map[string]any{"MacValid": false})},
		{name: "throttled (ThrottlingException), every attempt", answer: always(kmsError(400, "ThrottlingException", "Rate exceeded"))},
		{name: "access denied (AccessDeniedException)",
			answer: always(kmsError(400, "AccessDeniedException", "User: arn:aws:sts::111122223333:assumed-role/claim is not authorized to perform: kms:VerifyMac"))},
		{name: "key pending deletion (KMSInvalidStateException)",
			answer: always(kmsError(400, "KMSInvalidStateException", keyARN+" is pending deletion."))},
		{name: "key disabled (DisabledException)", answer: always(kmsError(400, "DisabledException", keyARN+" is disabled."))},
		{name: "key not found (NotFoundException)", answer: always(kmsError(400, "NotFoundException", "Key '"+keyARN+"' does not exist"))},
		{name: "key not for MACs (InvalidKeyUsageException)",
			answer: always(kmsError(400, "InvalidKeyUsageException", "key usage is ENCRYPT_DECRYPT which is not valid for VerifyMac."))},
		{name: "key unavailable (KeyUnavailableException, 500)", answer: always(kmsError(500, "KeyUnavailableException", "unavailable"))},
		{name: "KMSInternalException (500)", answer: always(kmsError(500, "KMSInternalException", "internal"))},
		{name: "DependencyTimeoutException (503)", answer: always(kmsError(503, "DependencyTimeoutException", "timed out"))},
		{name: "a bare 503", answer: always(&answer{status: 503, body: "<html>Service Unavailable</html>"})},
		{name: "a 502 without a body", answer: always(&answer{status: 502})},
		{name: "an error type the SDK does not model", answer: always(kmsError(400, "SomethingNewException", "new"))},
		{name: "a 200 that is not JSON", answer: always(&answer{status: 200, body: `{"KeyId":`})},
		{name: "valid, but for another key", answer: valid(map[string]any{"KeyId": strings.Replace(keyARN, "1234abcd", "9999ffff", 1)})},
		{name: "valid, but naming no key", answer: valid(map[string]any{"KeyId": nil})},
		{name: "valid, but for another algorithm", answer: valid(map[string]any{"MacAlgorithm": "HMAC_SHA_512"})},
		{name: "the connection dropped, every attempt", answer: always(&answer{hangUp: true})},
		{name: "no answer before the deadline", answer: always(&answer{hold: true}), want: context.DeadlineExceeded,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			}},
		{name: "the context cancelled", want: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
	}
}

// TestVerifyTakesOnlyAnInvalidMACAsMismatch drives kmsseal.KMS.Verify, on
// the SDK's KMS client, against a KMS endpoint that fails in each way KMS
// can: only KMSInvalidMacException and MacValid false are
// intentseal.ErrMismatch (the claim handler refuses the intent as tampered);
// every other failure is an error that is not ErrMismatch (the handler
// retries the message) and never nil (the intent is never claimed
// unchecked). No error carries the binding.
func TestVerifyTakesOnlyAnInvalidMACAsMismatch(t *testing.T) {
	d := newDouble(t, testKey)
	seals := &kmsseal.KMS{Client: d.client(), KeyARN: keyARN}
	seal := localSeal(t, binding)

	if err := seals.Verify(context.Background(), binding, seal); err != nil {
		t.Fatalf("the genuine seal: %v", err)
	}
	calls := d.received()
	if len(calls) != 1 || calls[0].op != "VerifyMac" || calls[0].keyID != keyARN || calls[0].algorithm != "HMAC_SHA_256" ||
		!bytes.Equal(calls[0].message, binding) || base64.RawURLEncoding.EncodeToString(calls[0].mac) != seal {
		t.Fatalf("KMS was asked %+v, want one VerifyMac of the binding and the seal under %s with HMAC_SHA_256", calls, keyARN)
	}
	other := localSeal(t, []byte("password-reset|ch-kms-2|email"))
	if err := seals.Verify(context.Background(), binding, other); !errors.Is(err, intentseal.ErrMismatch) {
		t.Fatalf("another intent's seal, KMS answering as it does: %v, want ErrMismatch", err)
	}

	for _, f := range verifyFailures() {
		t.Run(f.name, func(t *testing.T) {
			d.setFault(f.answer)
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if f.ctx != nil {
				ctx, cancel = f.ctx()
			}
			defer cancel()
			err := seals.Verify(ctx, binding, seal)
			switch {
			case f.mismatch && !errors.Is(err, intentseal.ErrMismatch):
				t.Fatalf("Verify: %v, want ErrMismatch", err)
			case !f.mismatch && err == nil:
				t.Fatal("Verify: nil, a seal taken as valid without KMS saying so")
			case !f.mismatch && errors.Is(err, intentseal.ErrMismatch):
				t.Fatalf("Verify: %v, ErrMismatch for a failure that says nothing about the seal", err)
			case f.want != nil && !errors.Is(err, f.want):
				t.Fatalf("Verify: %v, want %v in its chain", err, f.want)
			}
			if strings.Contains(err.Error(), string(binding)) || strings.Contains(err.Error(), "dest-ref-7") {
				t.Fatalf("the error carries the binding: %v", err)
			}
		})
	}
}

// TestVerifyRetriesAThrottleAndTakesKMSsNextAnswer: a throttled VerifyMac
// is retried by the SDK (the standard retryer), and what counts is KMS's
// answer to the retry, whichever it is.
func TestVerifyRetriesAThrottleAndTakesKMSsNextAnswer(t *testing.T) {
	d := newDouble(t, testKey)
	seals := &kmsseal.KMS{Client: d.client(), KeyARN: keyARN}
	throttleFirst := func(op string, attempt int) *answer {
		if attempt == 1 {
			return kmsError(400, "ThrottlingException", "Rate exceeded")
		}
		return nil
	}
	d.setFault(throttleFirst)
	if err := seals.Verify(context.Background(), binding, localSeal(t, binding)); err != nil {
		t.Fatalf("genuine seal, throttled once: %v", err)
	}
	if n := len(d.received()); n != 2 {
		t.Fatalf("%d requests, want 2 (the throttled one and its retry)", n)
	}
	d.setFault(throttleFirst)
	if err := seals.Verify(context.Background(), binding, localSeal(t, []byte("other"))); !errors.Is(err, intentseal.ErrMismatch) {
		t.Fatalf("wrong seal, throttled once: %v, want ErrMismatch", err)
	}
}

// TestVerifyDecidesMalformedInputWithoutKMS: a seal that is not a 32-byte
// MAC, and a binding KMS cannot MAC, are mismatches without a request.
func TestVerifyDecidesMalformedInputWithoutKMS(t *testing.T) {
	d := newDouble(t, testKey)
	seals := &kmsseal.KMS{Client: d.client(), KeyARN: keyARN}
	seal := localSeal(t, binding)
	for name, c := range map[string]struct {
		binding []byte
		seal    string
	}{
		"a seal of 31 bytes":    {binding, seal[:41]},
		"a seal not base64url":  {binding, strings.Repeat("*", 43)},
		"an empty binding":      {nil, seal},
		"a binding of 4097 B":   {make([]byte, intentseal.MaxBinding+1), seal},
		"an empty seal":         {binding, ""},
		"a seal with a padding": {binding, seal + "="},
	} {
		if err := seals.Verify(context.Background(), c.binding, c.seal); !errors.Is(err, intentseal.ErrMismatch) {
			t.Errorf("%s: %v, want ErrMismatch", name, err)
		}
	}
	if calls := d.received(); len(calls) != 0 {
		t.Fatalf("KMS was asked %d times", len(calls))
	}
	// The longest binding KMS takes is asked.
	long := bytes.Repeat([]byte{'b'}, intentseal.MaxBinding)
	if err := seals.Verify(context.Background(), long, localSeal(t, long)); err != nil {
		t.Fatalf("a binding of %d bytes: %v", intentseal.MaxBinding, err)
	}
}

// TestVerifyComparesTheEchoedKey: configured with its ARN or its bare id,
// the key KMS names must be this key; configured with an alias, KMS's echo
// (the key's ARN) cannot be compared and is taken.
func TestVerifyComparesTheEchoedKey(t *testing.T) {
	d := newDouble(t, testKey)
	seal := localSeal(t, binding)
	const keyID = "1234abcd-12ab-34cd-56ef-1234567890ab"
	for configured, ok := range map[string]bool{
		keyARN:         true,
		keyID:          true,
		"alias/intent": true,
		"arn:aws:kms:us-east-1:111122223333:alias/intent":  true,
		"9999ffff-12ab-34cd-56ef-1234567890ab":             false,
		strings.Replace(keyARN, "1234abcd", "9999ffff", 1): false,
	} {
		err := (&kmsseal.KMS{Client: d.client(), KeyARN: configured}).Verify(context.Background(), binding, seal)
		if ok != (err == nil) || errors.Is(err, intentseal.ErrMismatch) {
			t.Errorf("configured %q, KMS answering for %s: %v", configured, keyARN, err)
		}
	}
}

// TestSignRefusesWhatIsNoSeal: GenerateMac's MAC becomes the seal only if
// it is 32 bytes, under this key, with HMAC_SHA_256; every KMS failure is
// an error, never a seal. The seal KMS makes verifies with Local given the
// same key bytes.
func TestSignRefusesWhatIsNoSeal(t *testing.T) {
	d := newDouble(t, testKey)
	seals := &kmsseal.KMS{Client: d.client(), KeyARN: keyARN}
	seal, err := seals.Sign(context.Background(), binding)
	if err != nil {
		t.Fatal(err)
	}
	if want := localSeal(t, binding); seal != want {
		t.Fatalf("KMS seal %q, Local's %q", seal, want)
	}
	calls := d.received()
	if len(calls) != 1 || calls[0].op != "GenerateMac" || calls[0].keyID != keyARN || calls[0].algorithm != "HMAC_SHA_256" ||
		!bytes.Equal(calls[0].message, binding) {
		t.Fatalf("KMS was asked %+v, want one GenerateMac of the binding under %s with HMAC_SHA_256", calls, keyARN)
	}
	mac := func(n int, fields map[string]any) func(string, int) *answer {
		m := map[string]any{"KeyId": keyARN, "MacAlgorithm": "HMAC_SHA_256", "Mac": bytes.Repeat([]byte{1}, n)}
		for k, v := range fields {
			m[k] = v
		}
		return always(okJSON(m))
	}
	for name, f := range map[string]func(string, int) *answer{
		"a MAC of 31 bytes":            mac(31, nil),
		"a MAC of 33 bytes":            mac(33, nil),
		"a MAC of 64 bytes":            mac(64, nil),
		"no MAC":                       mac(0, nil),
		"a MAC under another key":      mac(32, map[string]any{"KeyId": strings.Replace(keyARN, "1234abcd", "9999ffff", 1)}),
		"a MAC with another algorithm": mac(32, map[string]any{"MacAlgorithm": "HMAC_SHA_512"}),
		"throttled":                    always(kmsError(400, "ThrottlingException", "Rate exceeded")),
		"access denied":                always(kmsError(400, "AccessDeniedException", "not authorized to perform: kms:GenerateMac")),
		"key disabled":                 always(kmsError(400, "DisabledException", "disabled")),
		"a 500":                        always(kmsError(500, "KMSInternalException", "internal")),
		"the connection dropped":       always(&answer{hangUp: true}),
	} {
		d.setFault(f)
		seal, err := seals.Sign(context.Background(), binding)
		if err == nil || seal != "" {
			t.Errorf("%s: seal %q, error %v; want no seal and an error", name, seal, err)
			continue
		}
		if errors.Is(err, intentseal.ErrMismatch) || strings.Contains(err.Error(), string(binding)) {
			t.Errorf("%s: %v (a mismatch, or carries the binding)", name, err)
		}
	}
	d.setFault(nil)
	for _, n := range []int{0, intentseal.MaxBinding + 1} {
		if seal, err := seals.Sign(context.Background(), make([]byte, n)); err == nil {
			t.Errorf("a binding of %d bytes: sealed %q", n, seal)
		}
	}
	if calls := d.received(); len(calls) != 0 {
		t.Fatalf("KMS was asked to MAC a binding it cannot take: %d requests", len(calls))
	}
}
