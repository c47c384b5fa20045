package webhook_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/pkg/webhook"
)

// TestVerify: a signature holds only for the request it was made for (its
// method, target and body, byte for byte), under the secret it was made
// with, near its timestamp.
func TestVerify(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"idempotency_key":"k","to":"+15555550100","body":"code 123456"}`)
	old := []byte("the-previous-secret-of-32-bytes-at-least")
	sig := webhook.Sign(secret, now, http.MethodPost, "/send", body)
	tol := webhook.DefaultSignatureTolerance
	tests := []struct {
		name    string
		header  string
		secrets [][]byte
		method  string
		target  string
		body    []byte
		at      time.Time
		want    error
	}{
		{"valid", sig, [][]byte{secret}, http.MethodPost, "/send", body, now, nil},
		{"valid during a rotation", sig, [][]byte{old, secret}, http.MethodPost, "/send", body, now, nil},
		{"valid near the tolerance", sig, [][]byte{secret}, http.MethodPost, "/send", body, now.Add(tol), nil},
		{"two signatures, one valid", webhook.Sign(old, now, http.MethodPost, "/send", body) + "," + strings.Split(sig, ",")[1], [][]byte{secret}, http.MethodPost, "/send", body, now, nil},
		{"missing", "", [][]byte{secret}, http.MethodPost, "/send", body, now, webhook.ErrSignatureMissing},
		{"no v1", strings.Split(sig, ",")[0], [][]byte{secret}, http.MethodPost, "/send", body, now, webhook.ErrSignatureMissing},
		{"no timestamp", strings.Split(sig, ",")[1], [][]byte{secret}, http.MethodPost, "/send", body, now, webhook.ErrSignatureMissing},
		{"tampered body", sig, [][]byte{secret}, http.MethodPost, "/send", bytes.Replace(body, []byte("123456"), []byte("654321"), 1), now, webhook.ErrSignatureInvalid},
		{"body with a byte more", sig, [][]byte{secret}, http.MethodPost, "/send", append(append([]byte(nil), body...), ' '), now, webhook.ErrSignatureInvalid},
		{"other secret", sig, [][]byte{old}, http.MethodPost, "/send", body, now, webhook.ErrSignatureInvalid},
		{"no secret", sig, nil, http.MethodPost, "/send", body, now, webhook.ErrSignatureInvalid},
		{"other method", sig, [][]byte{secret}, http.MethodPut, "/send", body, now, webhook.ErrSignatureInvalid},
		{"other target", sig, [][]byte{secret}, http.MethodPost, "/send?x=1", body, now, webhook.ErrSignatureInvalid},
		{"timestamp changed", strings.Replace(sig, "t=1893499200", "t=1893499201", 1), [][]byte{secret}, http.MethodPost, "/send", body, now, webhook.ErrSignatureInvalid},
		{"replayed later", sig, [][]byte{secret}, http.MethodPost, "/send", body, now.Add(tol + time.Second), webhook.ErrSignatureStale},
		{"from the future", sig, [][]byte{secret}, http.MethodPost, "/send", body, now.Add(-tol - time.Second), webhook.ErrSignatureStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := webhook.Verify(tt.header, tt.secrets, tt.method, tt.target, tt.body, tt.at, tol)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Verify = %v, want %v", err, tt.want)
			}
			if err != nil {
				assertClean(t, err.Error())
				if strings.Contains(err.Error(), "123456") || strings.Contains(err.Error(), string(old)) {
					t.Fatalf("error %q repeats the body or a secret", err)
				}
			}
		})
	}
}

// secret is a signing secret as a receiver holds it.
var secret = []byte("whsec_ABCDEF0123456789-test-signing-secret")

// assertClean fails if an error text repeats the secret or a line break.
func assertClean(t *testing.T, s string) {
	t.Helper()
	for _, bad := range []string{string(secret), "ABCDEF0123456789", "\n"} {
		if strings.Contains(s, bad) {
			t.Errorf("error text %q repeats %q", s, bad)
		}
	}
}
