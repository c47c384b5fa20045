// Package fingerprint implements ledger.Fingerprinter: the key of the
// per-destination send limit, an HMAC-SHA-256 of the normalized address
// under a key only dispatch may use.
//
// A plain hash of a phone number (or of an address at a known domain) is
// reversed by hashing every candidate, so the address is never hashed
// without a key. The MAC is made under the stack's fingerprint HMAC key
// (KMS GenerateMac: the key never leaves KMS), a key of its own that only
// dispatch may MAC with and nobody may verify with, so that whoever can read
// the limits table's keys cannot confirm a guessed address (no VerifyMac of
// a guess, no MAC of one to look up). The domain string keeps fingerprints
// apart from every other MAC even so. Fingerprints stay in the limit
// counters' keys: never in a history entry, a log line, an error or a
// metric.
package fingerprint

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Domain separates fingerprints from every other use of the key.
const Domain = "resetledger-destination-fingerprint/v1"

// Normalize returns the form of an address the limit counts per: an email
// address trimmed, lowercased and reduced to its mailbox by the providers'
// rules (mailbox.go: sub-address tags, Gmail's dots, googlemail.com), a
// phone number with spaces, dashes, dots and brackets removed. A channel
// with no rule here is an error, never read as email: a new channel names
// its rule (docs/development.md, "Extending it").
func Normalize(ch ledger.Channel, address string) (string, error) {
	a := strings.TrimSpace(address)
	switch ch {
	case ledger.SMS:
		return strings.Map(func(r rune) rune {
			if strings.ContainsRune(" -.()", r) {
				return -1
			}
			return r
		}, a), nil
	case ledger.Email:
		return normalizeEmail(a), nil
	}
	return "", fmt.Errorf("fingerprint: no address rule for channel %q", ch)
}

// Message is the byte string a fingerprint is the MAC of.
func Message(ch ledger.Channel, address string) ([]byte, error) {
	n, err := Normalize(ch, address)
	if err != nil {
		return nil, err
	}
	return []byte(Domain + "\n" + string(ch) + "\n" + n), nil
}

func encode(mac []byte) string { return base64.RawURLEncoding.EncodeToString(mac) }

// Local keeps the key in memory: for tests and the simulator.
type Local struct{ Key []byte }

var _ ledger.Fingerprinter = (*Local)(nil)

// Fingerprint implements ledger.Fingerprinter.
func (l *Local) Fingerprint(_ context.Context, ch ledger.Channel, address string) (string, error) {
	m, err := Message(ch, address)
	if err != nil {
		return "", err
	}
	h := hmac.New(sha256.New, l.Key)
	h.Write(m)
	return encode(h.Sum(nil)), nil
}

// Client is the part of the KMS API KMS uses.
type Client interface {
	GenerateMac(ctx context.Context, in *kms.GenerateMacInput, optFns ...func(*kms.Options)) (*kms.GenerateMacOutput, error)
}

// KMS asks KMS for the MAC under an HMAC_256 key.
type KMS struct {
	Client Client
	KeyARN string
}

var _ ledger.Fingerprinter = (*KMS)(nil)

// Fingerprint implements ledger.Fingerprinter. Its errors name the
// channel, never the address.
func (k *KMS) Fingerprint(ctx context.Context, ch ledger.Channel, address string) (string, error) {
	m, err := Message(ch, address)
	if err != nil {
		return "", err
	}
	out, err := k.Client.GenerateMac(ctx, &kms.GenerateMacInput{
		KeyId: aws.String(k.KeyARN), MacAlgorithm: types.MacAlgorithmSpecHmacSha256, Message: m,
	})
	if err != nil {
		return "", fmt.Errorf("fingerprint %s destination: %w", ch, err)
	}
	if len(out.Mac) != sha256.Size {
		return "", fmt.Errorf("fingerprint %s destination: KMS returned a %d-byte MAC", ch, len(out.Mac))
	}
	return encode(out.Mac), nil
}
