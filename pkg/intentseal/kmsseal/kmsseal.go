// Package kmsseal seals and verifies intents under a KMS HMAC_256 key
// (package intentseal says what is sealed and why).
package kmsseal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

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
	if len(out.Mac) != sha256.Size {
		return "", fmt.Errorf("intentseal: sign: KMS returned a %d-byte MAC", len(out.Mac))
	}
	return intentseal.Encode(out.Mac), nil
}

// Verify asks KMS whether seal is binding's. KMS answers a wrong MAC with
// KMSInvalidMacException (and never with MacValid false), which is
// intentseal.ErrMismatch; any other error is returned as is, for the caller to retry.
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
	return nil
}
