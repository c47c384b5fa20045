// Package attemptproof implements ledger.Proofs: a MAC over one transport
// attempt (dedupe key, channel, attempt number) that the send carries to the
// provider and the provider copies into the events it publishes, so that the
// events function can tell an event about an attempt this system made from
// one anybody wrote.
//
// A dedupe key alone proves nothing: it is the SHA-256 of a challenge id,
// which the account service, its logs and anyone who saw a reset link may
// know. The proof is an HMAC-SHA-256 under a key that only the senders may
// sign with:
//
//   - KMS (production) asks AWS KMS for the MAC (GenerateMac, VerifyMac)
//     under an HMAC_256 key whose key policy lets only dispatch sign and the
//     events function verify; the key never leaves KMS.
//   - Local holds the key in memory, for domain tests and the simulator.
//
// Both MAC the same message (Message) and encode the MAC the same way, so a
// proof made by one verifies with the other given the same key bytes.
//
// The proof is base64url without padding (43 characters): letters, digits,
// '-' and '_', which SES accepts as a message tag value.
package attemptproof

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Domain separates attempt proofs from every other use of the key; the
// version changes if Message ever does.
const Domain = "resetledger-attempt-proof/v1"

// Message is the byte string an attempt's proof is the MAC of:
// Domain, channel, dedupe key and attempt number, one per line.
func Message(a ledger.AttemptRef) []byte {
	return []byte(Domain + "\n" + string(a.Channel) + "\n" + a.Key + "\n" + strconv.Itoa(a.Attempt))
}

// encoding is how a MAC travels: base64url without padding.
var encoding = base64.RawURLEncoding

// Encode writes a MAC as a proof.
func Encode(mac []byte) string { return encoding.EncodeToString(mac) }

// decode reads a proof back into a MAC; anything but the 32 bytes of an
// HMAC-SHA-256 is unproven without asking anyone.
func decode(proof string) ([]byte, error) {
	mac, err := encoding.DecodeString(proof)
	if err != nil || len(mac) != sha256.Size {
		return nil, fmt.Errorf("attemptproof: not a proof: %w", ledger.ErrUnproven)
	}
	return mac, nil
}

// Local is ledger.Proofs with the HMAC key in memory. It is for tests and
// the simulator; production keys stay in KMS.
type Local struct {
	Key []byte
}

var _ ledger.Proofs = (*Local)(nil)

// Sign returns the proof of attempt a.
func (l *Local) Sign(_ context.Context, a ledger.AttemptRef) (string, error) {
	return Encode(l.mac(a)), nil
}

// Verify reports whether proof is a's.
func (l *Local) Verify(_ context.Context, a ledger.AttemptRef, proof string) error {
	mac, err := decode(proof)
	if err != nil {
		return err
	}
	if !hmac.Equal(mac, l.mac(a)) {
		return fmt.Errorf("attemptproof: the proof does not match the attempt: %w", ledger.ErrUnproven)
	}
	return nil
}

func (l *Local) mac(a ledger.AttemptRef) []byte {
	h := hmac.New(sha256.New, l.Key)
	h.Write(Message(a))
	return h.Sum(nil)
}

// Client is the part of the KMS API KMS uses; *kms.Client implements it.
// Dispatch calls only GenerateMac and the events function only VerifyMac,
// each as its role allows.
type Client interface {
	GenerateMac(ctx context.Context, in *kms.GenerateMacInput, optFns ...func(*kms.Options)) (*kms.GenerateMacOutput, error)
	VerifyMac(ctx context.Context, in *kms.VerifyMacInput, optFns ...func(*kms.Options)) (*kms.VerifyMacOutput, error)
}

// KMS is ledger.Proofs under a KMS HMAC_256 key (KeySpec HMAC_256, usage
// GENERATE_VERIFY_MAC). It is safe for concurrent use.
type KMS struct {
	Client Client
	// KeyARN is the HMAC key's ARN.
	KeyARN string
}

var _ ledger.Proofs = (*KMS)(nil)

// algorithm is the MAC algorithm of an HMAC_256 key.
const algorithm = types.MacAlgorithmSpecHmacSha256

// Sign asks KMS for the MAC of attempt a. Its errors name the attempt, never
// a message or address (there is none here).
func (k *KMS) Sign(ctx context.Context, a ledger.AttemptRef) (string, error) {
	out, err := k.Client.GenerateMac(ctx, &kms.GenerateMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: Message(a),
	})
	if err != nil {
		return "", fmt.Errorf("attemptproof: sign attempt %d of %s: %w", a.Attempt, a.Key, err)
	}
	if len(out.Mac) != sha256.Size {
		return "", fmt.Errorf("attemptproof: sign attempt %d of %s: KMS returned a %d-byte MAC", a.Attempt, a.Key, len(out.Mac))
	}
	return Encode(out.Mac), nil
}

// Verify asks KMS whether proof is a's. KMS answers a wrong MAC with
// KMSInvalidMacException (and never with MacValid false), which is
// ErrUnproven; any other error is returned as is, for the caller to retry.
func (k *KMS) Verify(ctx context.Context, a ledger.AttemptRef, proof string) error {
	mac, err := decode(proof)
	if err != nil {
		return err
	}
	out, err := k.Client.VerifyMac(ctx, &kms.VerifyMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: algorithm, Message: Message(a), Mac: mac,
	})
	var invalid *types.KMSInvalidMacException
	switch {
	case errors.As(err, &invalid):
		return fmt.Errorf("attemptproof: the proof does not match the attempt: %w", ledger.ErrUnproven)
	case err != nil:
		return fmt.Errorf("attemptproof: verify attempt %d of %s: %w", a.Attempt, a.Key, err)
	case !out.MacValid:
		return fmt.Errorf("attemptproof: the proof does not match the attempt: %w", ledger.ErrUnproven)
	}
	return nil
}
