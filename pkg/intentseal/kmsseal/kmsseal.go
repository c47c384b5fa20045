// Package kmsseal seals and verifies intents under a KMS HMAC_256 key
// (package intentseal says what is sealed and why).
package kmsseal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/intentseal"
)

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
	_ intentseal.Signer   = (*KMS)(nil)
	_ intentseal.Verifier = (*KMS)(nil)
)

const algorithm = types.MacAlgorithmSpecHmacSha256

// Sign asks KMS for the seal of binding. Errors never contain the binding.
func (k *KMS) Sign(ctx context.Context, binding []byte) (string, error) {
	if err := intentseal.CheckLen(binding); err != nil {
		return "", err
	}
	out, err := k.Client.GenerateMac(ctx, &kms.GenerateMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: binding,
	})
	if err != nil {
		return "", fmt.Errorf("intentseal: sign: %w", err)
	}
	if err := k.answeredFor(out.KeyId, out.MacAlgorithm); err != nil {
		return "", fmt.Errorf("intentseal: sign: %w", err)
	}
	if len(out.Mac) != sha256.Size {
		return "", fmt.Errorf("intentseal: sign: KMS returned a %d-byte MAC", len(out.Mac))
	}
	return intentseal.Encode(out.Mac), nil
}

// Verify asks KMS whether seal is binding's. KMS answers a wrong MAC with
// KMSInvalidMacException (and never with MacValid false, which is taken
// the same way), which is intentseal.ErrMismatch. Every other error
// (throttled, access denied, a disabled, missing or unusable key, a 5xx,
// a timeout, an answer that cannot be read or that names another key or
// algorithm) is returned wrapped, never as ErrMismatch, for the caller to
// retry: none of them says anything about the seal.
func (k *KMS) Verify(ctx context.Context, binding []byte, seal string) error {
	mac, err := intentseal.Decode(seal)
	if err != nil {
		return err
	}
	if err := intentseal.CheckLen(binding); err != nil {
		return fmt.Errorf("%w: %w", intentseal.ErrMismatch, err)
	}
	out, err := k.Client.VerifyMac(ctx, &kms.VerifyMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: binding, Mac: mac,
	})
	var invalid *types.KMSInvalidMacException
	switch {
	case errors.As(err, &invalid):
		return intentseal.ErrMismatch
	case err != nil:
		return fmt.Errorf("intentseal: verify: %w", err)
	case !out.MacValid:
		return intentseal.ErrMismatch
	}
	if err := k.answeredFor(out.KeyId, out.MacAlgorithm); err != nil {
		return fmt.Errorf("intentseal: verify: %w", err)
	}
	return nil
}

// answeredFor checks that KMS answered for the key and algorithm asked:
// a MAC made or checked under another key proves nothing about this one.
// The echoed key is compared when KeyARN names a key (its ARN, as the
// stack configures it, or its bare id); an alias cannot be compared.
func (k *KMS) answeredFor(keyID *string, alg types.MacAlgorithmSpec) error {
	if alg != algorithm {
		return fmt.Errorf("KMS answered for MAC algorithm %q, not %q", alg, algorithm)
	}
	echoed := aws.ToString(keyID)
	switch {
	case strings.HasPrefix(k.KeyARN, "arn:") && strings.Contains(k.KeyARN, ":key/"):
		if echoed != k.KeyARN {
			return fmt.Errorf("KMS answered for key %q, not %q", echoed, k.KeyARN)
		}
	case k.KeyARN != "" && !strings.ContainsAny(k.KeyARN, ":/"):
		if !strings.HasSuffix(echoed, ":key/"+k.KeyARN) {
			return fmt.Errorf("KMS answered for key %q, not %q", echoed, k.KeyARN)
		}
	}
	return nil
}
