package attemptproof_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/attemptproof"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

var attempt = ledger.AttemptRef{Key: strings.Repeat("ab", 32), Channel: ledger.Email, Attempt: 2}

// others are attempts that differ from attempt in one field each.
func others() map[string]ledger.AttemptRef {
	key, ch, n := attempt, attempt, attempt
	key.Key = strings.Repeat("cd", 32)
	ch.Channel = ledger.SMS
	n.Attempt = 1
	return map[string]ledger.AttemptRef{"other key": key, "other channel": ch, "other attempt": n}
}

// tagValue is what SES accepts as a message tag value.
var tagValue = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// suite runs what every ledger.Proofs implementation must do.
func suite(t *testing.T, p ledger.Proofs) {
	ctx := context.Background()
	proof, err := p.Sign(ctx, attempt)
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if !tagValue.MatchString(proof) || len(proof) != 43 {
		t.Fatalf("proof %q is not 43 characters a message tag can carry", proof)
	}
	if err := p.Verify(ctx, attempt, proof); err != nil {
		t.Fatalf("Verify of its own proof: %v", err)
	}
	for name, a := range others() {
		t.Run(name, func(t *testing.T) {
			if err := p.Verify(ctx, a, proof); !errors.Is(err, ledger.ErrUnproven) {
				t.Fatalf("Verify = %v, want ErrUnproven", err)
			}
		})
	}
	flipped := []byte(proof)
	flipped[10] ^= 0x01
	for name, bad := range map[string]string{
		"flipped": string(flipped), "empty": "", "truncated": proof[:20], "padded": proof + "=", "not base64": strings.Repeat("*", 43),
	} {
		t.Run(name, func(t *testing.T) {
			if err := p.Verify(ctx, attempt, bad); !errors.Is(err, ledger.ErrUnproven) {
				t.Fatalf("Verify = %v, want ErrUnproven", err)
			}
		})
	}
}

func TestLocal(t *testing.T) {
	suite(t, &attemptproof.Local{Key: []byte("0123456789abcdef0123456789abcdef")})
	// Another key proves nothing.
	a, b := &attemptproof.Local{Key: []byte("key-a")}, &attemptproof.Local{Key: []byte("key-b")}
	proof, _ := a.Sign(context.Background(), attempt)
	if err := b.Verify(context.Background(), attempt, proof); !errors.Is(err, ledger.ErrUnproven) {
		t.Fatalf("a proof under another key verified: %v", err)
	}
}

// TestMessageIsFixed pins the signed message: a change to it is a new proof
// version (Domain), and proofs already in flight would stop verifying.
func TestMessageIsFixed(t *testing.T) {
	got := string(attemptproof.Message(attempt))
	want := "resetledger-attempt-proof/v1\nemail\n" + attempt.Key + "\n2"
	if got != want {
		t.Fatalf("Message = %q, want %q", got, want)
	}
}

// TestKMS runs the suite against the emulator's KMS with an HMAC_256 key, and
// checks that a proof under one key does not verify under another.
func TestKMS(t *testing.T) {
	client := kms.NewFromConfig(emulator.Config(t))
	arn := emulator.HMACKey(t, client, "attemptproof")
	suite(t, &attemptproof.KMS{Client: client, KeyARN: arn})

	other := &attemptproof.KMS{Client: client, KeyARN: emulator.HMACKey(t, client, "attemptproof-other")}
	proof, err := (&attemptproof.KMS{Client: client, KeyARN: arn}).Sign(context.Background(), attempt)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Verify(context.Background(), attempt, proof); !errors.Is(err, ledger.ErrUnproven) {
		t.Fatalf("a proof under another key: %v, want ErrUnproven", err)
	}
}

// TestKMSErrorsAreNotUnproven: a key KMS cannot use is an error to retry, not
// a verdict on the event.
func TestKMSErrorsAreNotUnproven(t *testing.T) {
	client := kms.NewFromConfig(emulator.Config(t))
	enc := emulator.KMSKey(t, client, "attemptproof-wrong-usage")
	p := &attemptproof.KMS{Client: client, KeyARN: enc}
	if _, err := p.Sign(context.Background(), attempt); err == nil {
		t.Fatal("Sign under an encryption key succeeded")
	}
	proof, _ := (&attemptproof.Local{Key: []byte("k")}).Sign(context.Background(), attempt)
	if err := p.Verify(context.Background(), attempt, proof); err == nil || errors.Is(err, ledger.ErrUnproven) {
		t.Fatalf("Verify under an encryption key = %v, want an error that is not ErrUnproven", err)
	}
}
