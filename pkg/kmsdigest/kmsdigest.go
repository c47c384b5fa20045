// Package kmsdigest signs digests (package digest) with a KMS asymmetric key
// (KeySpec ECC_NIST_P256, KeyUsage SIGN_VERIFY) and reads its public key,
// so a verifier checks signatures offline without calling KMS again.
package kmsdigest

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/digest"
)

// SignClient is what the digest function calls (kms:Sign).
type SignClient interface {
	Sign(ctx context.Context, in *kms.SignInput, opts ...func(*kms.Options)) (*kms.SignOutput, error)
}

// PublicKeyClient is what a verifier calls (kms:GetPublicKey).
type PublicKeyClient interface {
	GetPublicKey(ctx context.Context, in *kms.GetPublicKeyInput, opts ...func(*kms.Options)) (*kms.GetPublicKeyOutput, error)
}

// Signer is a digest.Signer on a KMS key. It sends the SHA-256 sum with
// MessageType DIGEST, so a body of any size costs one Sign call; the
// signature is the same one KMS makes over the RAW body with ECDSA_SHA_256.
type Signer struct {
	client SignClient
	keyID  string
}

var _ digest.Signer = (*Signer)(nil)

// New returns a Signer on the key keyID (its ARN).
func New(client SignClient, keyID string) *Signer { return &Signer{client: client, keyID: keyID} }

// KeyID implements digest.Signer.
func (s *Signer) KeyID() string { return s.keyID }

// Sign implements digest.Signer.
func (s *Signer) Sign(ctx context.Context, sum []byte) ([]byte, error) {
	out, err := s.client.Sign(ctx, &kms.SignInput{
		KeyId: &s.keyID, Message: sum, MessageType: types.MessageTypeDigest,
		SigningAlgorithm: types.SigningAlgorithmSpecEcdsaSha256,
	})
	if err != nil {
		return nil, fmt.Errorf("kmsdigest: sign: %w", err)
	}
	return out.Signature, nil
}

// Verifier returns the digest.Verifier of keyID's public key. It refuses a
// key that is not an ECC_NIST_P256 signing key.
func Verifier(ctx context.Context, client PublicKeyClient, keyID string) (digest.Verifier, error) {
	out, err := client.GetPublicKey(ctx, &kms.GetPublicKeyInput{KeyId: &keyID})
	if err != nil {
		return digest.Verifier{}, fmt.Errorf("kmsdigest: get the public key: %w", err)
	}
	if out.KeySpec != types.KeySpecEccNistP256 || out.KeyUsage != types.KeyUsageTypeSignVerify {
		return digest.Verifier{}, fmt.Errorf("kmsdigest: the digest key is %s/%s, want ECC_NIST_P256/SIGN_VERIFY", out.KeySpec, out.KeyUsage)
	}
	return digest.ParsePublicKey(out.PublicKey)
}
