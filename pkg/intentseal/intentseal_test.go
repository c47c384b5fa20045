package intentseal_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/pkg/intentseal"
)

var key = []byte("intentseal test key")

// mac is HMAC-SHA-256 computed here, not by the package under test.
func mac(binding []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(binding)
	return h.Sum(nil)
}

// TestLocalSealsWithHMACSHA256: Local's seal is the HMAC-SHA-256 of the
// binding under its key, in base64url without padding (43 characters),
// and verifies; so a seal made by KMS over the same bytes with the same
// key bytes verifies here too.
func TestLocalSealsWithHMACSHA256(t *testing.T) {
	l := &intentseal.Local{Key: key}
	binding := []byte("password-reset|ch-1|email|...")
	seal, err := l.Sign(context.Background(), binding)
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.RawURLEncoding.EncodeToString(mac(binding)); seal != want || len(seal) != 43 {
		t.Fatalf("seal %q, want %q (43 characters)", seal, want)
	}
	if err := l.Verify(context.Background(), binding, seal); err != nil {
		t.Fatalf("its own seal: %v", err)
	}
	if got := intentseal.Encode(mac(binding)); got != seal {
		t.Fatalf("Encode: %q, want %q", got, seal)
	}
}

// TestLocalRefusesEveryOtherSeal: a seal over other bytes, under another
// key, of another length or not base64url is ErrMismatch, never nil.
func TestLocalRefusesEveryOtherSeal(t *testing.T) {
	l := &intentseal.Local{Key: key}
	binding := []byte("password-reset|ch-1|email|...")
	good := intentseal.Encode(mac(binding))
	flipped := mac(binding)
	flipped[31] ^= 1
	other := hmac.New(sha256.New, []byte("another key"))
	other.Write(binding)
	for name, seal := range map[string]string{
		"the seal of other bytes": intentseal.Encode(mac([]byte("password-reset|ch-2|email|..."))),
		"one bit flipped":         intentseal.Encode(flipped),
		"under another key":       intentseal.Encode(other.Sum(nil)),
		"31 bytes":                intentseal.Encode(mac(binding)[:31]),
		"33 bytes":                intentseal.Encode(append(mac(binding), 0)),
		"padded":                  good + "=",
		"standard base64":         base64.StdEncoding.EncodeToString(mac(binding)),
		"empty":                   "",
		"not base64":              strings.Repeat("!", 43),
	} {
		err := l.Verify(context.Background(), binding, seal)
		if !errors.Is(err, intentseal.ErrMismatch) {
			t.Errorf("%s: %v, want ErrMismatch", name, err)
		}
	}
}

// TestDecode: exactly a 32-byte MAC in base64url comes back; anything else
// is ErrMismatch without asking anyone.
func TestDecode(t *testing.T) {
	m := mac([]byte("x"))
	got, err := intentseal.Decode(intentseal.Encode(m))
	if err != nil || !bytes.Equal(got, m) {
		t.Fatalf("Decode(Encode(mac)) = %x, %v", got, err)
	}
	for _, n := range []int{0, 1, 31, 33, 64} {
		if _, err := intentseal.Decode(intentseal.Encode(make([]byte, n))); !errors.Is(err, intentseal.ErrMismatch) {
			t.Errorf("a %d-byte MAC: %v, want ErrMismatch", n, err)
		}
	}
}

// TestCheckLen: KMS MACs 1 to 4096 bytes; Local refuses what KMS would,
// so a binding that seals in tests seals in production too.
func TestCheckLen(t *testing.T) {
	l := &intentseal.Local{Key: key}
	for _, n := range []int{1, intentseal.MaxBinding} {
		if err := intentseal.CheckLen(make([]byte, n)); err != nil {
			t.Errorf("%d bytes: %v", n, err)
		}
		if _, err := l.Sign(context.Background(), make([]byte, n)); err != nil {
			t.Errorf("Sign of %d bytes: %v", n, err)
		}
	}
	for _, n := range []int{0, intentseal.MaxBinding + 1} {
		if err := intentseal.CheckLen(make([]byte, n)); err == nil {
			t.Errorf("%d bytes: no error", n)
		}
		if seal, err := l.Sign(context.Background(), make([]byte, n)); err == nil {
			t.Errorf("Sign of %d bytes: %q, no error", n, seal)
		}
	}
}
