// Package intentseal seals an intent's decision fields: the producer asks
// for an HMAC-SHA-256 over the intent's binding (intent.Binding: every
// field the claim decides on, in one canonical byte string), the intent
// carries it as intent_mac, and the claim function verifies it before any
// row exists. An intent read from the queue or its dead-letter queue and
// replayed with another expires_at, subject_ref, destination_ref, workflow
// or template then fails verification and is refused.
//
// The key is a KMS HMAC_256 key whose key policy lets only the producers
// generate MACs and only the claim function verify them: the claim
// function checks the seal without being able to make one, and without
// any right to open the sealed content.
//
//   - KMS (production) asks AWS KMS (GenerateMac, VerifyMac); the key never
//     leaves KMS.
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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
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

// decode reads a seal back into a MAC; anything but the 32 bytes of an
// HMAC-SHA-256 is a mismatch without asking anyone.
func decode(seal string) ([]byte, error) {
	mac, err := encoding.DecodeString(seal)
	if err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("%w (not a 32-byte MAC in base64url)", ErrMismatch)
	}
	return mac, nil
}

func checkLen(binding []byte) error {
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
	if err := checkLen(binding); err != nil {
		return "", err
	}
	return Encode(l.mac(binding)), nil
}

// Verify reports whether seal is binding's.
func (l *Local) Verify(_ context.Context, binding []byte, seal string) error {
	mac, err := decode(seal)
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

// Client is the part of the KMS API KMS uses; *kms.Client implements it.
// A producer calls only GenerateMac, the claim function only VerifyMac,
// each as the key policy allows.
type Client interface {
	GenerateMac(ctx context.Context, in *kms.GenerateMacInput, optFns ...func(*kms.Options)) (*kms.GenerateMacOutput, error)
	VerifyMac(ctx context.Context, in *kms.VerifyMacInput, optFns ...func(*kms.Options)) (*kms.VerifyMacOutput, error)
}

// KMS seals under a KMS HMAC_256 key (usage GENERATE_VERIFY_MAC). It is
// safe for concurrent use.
type KMS struct {
	Client Client
	// KeyARN is the intent key's ARN (the stack's IntentKeyArn output).
	KeyARN string
}

var (
	_ Signer   = (*KMS)(nil)
	_ Verifier = (*KMS)(nil)
)

const algorithm = types.MacAlgorithmSpecHmacSha256

// Sign asks KMS for the seal of binding. Errors never contain the binding.
func (k *KMS) Sign(ctx context.Context, binding []byte) (string, error) {
	if err := checkLen(binding); err != nil {
		return "", err
	}
	out, err := k.Client.GenerateMac(ctx, &kms.GenerateMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: binding,
	})
	if err != nil {
		return "", fmt.Errorf("intentseal: sign: %w", err)
	}
	if len(out.Mac) != sha256.Size {
		return "", fmt.Errorf("intentseal: sign: KMS returned a %d-byte MAC", len(out.Mac))
	}
	return Encode(out.Mac), nil
}

// Verify asks KMS whether seal is binding's. KMS answers a wrong MAC with
// KMSInvalidMacException (and never with MacValid false), which is
// ErrMismatch; any other error is returned as is, for the caller to retry.
func (k *KMS) Verify(ctx context.Context, binding []byte, seal string) error {
	mac, err := decode(seal)
	if err != nil {
		return err
	}
	if err := checkLen(binding); err != nil {
		return fmt.Errorf("%w: %w", ErrMismatch, err)
	}
	out, err := k.Client.VerifyMac(ctx, &kms.VerifyMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: binding, Mac: mac,
	})
	var invalid *types.KMSInvalidMacException
	switch {
	case errors.As(err, &invalid):
		return ErrMismatch
	case err != nil:
		return fmt.Errorf("intentseal: verify: %w", err)
	case !out.MacValid:
		return ErrMismatch
	}
	return nil
}
