// Package intentseal seals an intent's decision fields and its envelope:
// the producer asks for an HMAC-SHA-256 over the intent's binding
// (intent.Binding: every field the claim decides on and, from intent
// version 3, the envelope's digest, in one canonical byte string), the
// intent carries it as intent_mac, and the claim function verifies it
// before any row exists. An intent read from the queue or its dead-letter
// queue and replayed with another expires_at, subject_ref, destination_ref,
// workflow, template or sealed content then fails verification and is
// refused, leaving no row that could block the genuine intent.
//
// The key is a KMS HMAC_256 key whose key policy lets only the producers
// generate MACs and only the claim function verify them: the claim
// function checks the seal without being able to make one, and without
// any right to open the sealed content.
//
//   - kmsseal.KMS (production) asks AWS KMS (GenerateMac, VerifyMac); the
//     key never leaves KMS. It is a package of its own so that what imports
//     the interfaces links no KMS client.
//   - Local holds the key in memory, for tests, benchmarks and the
//     simulator.
//
// Both MAC the same bytes and encode the MAC the same way (base64url
// without padding, 43 characters), so a seal made by one verifies with the
// other given the same key bytes.
package intentseal

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// ErrMismatch reports a seal that is not the MAC of the intent's binding
// under the key: the fields were changed after sealing, or the seal was
// made with another key, or it is no seal at all.
var ErrMismatch = errors.New("intentseal: intent_mac does not match the intent's fields")

// MaxBinding is the longest binding KMS MACs (GenerateMac's message limit).
const MaxBinding = 4096

// Signer makes seals: the producer's side.
type Signer interface {
	Sign(ctx context.Context, binding []byte) (string, error)
}

// Verifier checks seals: the claim function's side. Verify returns nil for
// a seal of binding, an error wrapping ErrMismatch for any other seal, and
// any other error (KMS unreachable, throttled) as is, to be retried.
type Verifier interface {
	Verify(ctx context.Context, binding []byte, seal string) error
}

var encoding = base64.RawURLEncoding

// Encode writes a MAC as a seal.
func Encode(mac []byte) string { return encoding.EncodeToString(mac) }

// Decode reads a seal back into a MAC; anything but the 32 bytes of an
// HMAC-SHA-256 is a mismatch without asking anyone.
func Decode(seal string) ([]byte, error) {
	mac, err := encoding.DecodeString(seal)
	if err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("%w (not a 32-byte MAC in base64url)", ErrMismatch)
	}
	return mac, nil
}

// CheckLen refuses a binding KMS cannot MAC.
func CheckLen(binding []byte) error {
	if len(binding) == 0 || len(binding) > MaxBinding {
		return fmt.Errorf("intentseal: binding of %d bytes (want 1 to %d)", len(binding), MaxBinding)
	}
	return nil
}

// Local seals with the HMAC key in memory: tests only.
type Local struct {
	Key []byte
}

var (
	_ Signer   = (*Local)(nil)
	_ Verifier = (*Local)(nil)
)

// Sign returns the seal of binding.
func (l *Local) Sign(_ context.Context, binding []byte) (string, error) {
	if err := CheckLen(binding); err != nil {
		return "", err
	}
	return Encode(l.mac(binding)), nil
}

// Verify reports whether seal is binding's.
func (l *Local) Verify(_ context.Context, binding []byte, seal string) error {
	mac, err := Decode(seal)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, l.mac(binding)) {
		return ErrMismatch
	}
	return nil
}

func (l *Local) mac(binding []byte) []byte {
	h := hmac.New(sha256.New, l.Key)
	h.Write(binding)
	return h.Sum(nil)
}
