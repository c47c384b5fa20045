package envelope_test

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// fixedKey is a Decrypter that hands back one fixed data key for any blob:
// these tests are about what is inside the GCM plaintext, not about KMS.
type fixedKey struct{ key []byte }

func (k fixedKey) Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	return &kms.DecryptOutput{KeyId: aws.String(fakeARN), Plaintext: bytes.Clone(k.key)}, nil
}

var (
	testDataKey = bytes.Repeat([]byte{7}, 32)
	testNonce   = bytes.Repeat([]byte{9}, 12)
)

func openRaw(t *testing.T, v int, z []byte) (ledger.Message, error) {
	t.Helper()
	e, err := envelope.SealRaw(v, keyA, z, testDataKey, []byte{1, 2, 3}, fakeARN, testNonce)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return (&envelope.Opener{KMS: fixedKey{testDataKey}, KeyARN: fakeARN}).Open(context.Background(), keyA, b)
}

func deflate(t *testing.T, p []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.BestCompression)
	_, _ = w.Write(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// messageOf returns a message whose plaintext is exactly n bytes.
func messageOf(t *testing.T, n int) ledger.Message {
	t.Helper()
	m := ledger.Message{To: "player1@example.com", Body: "x"}
	pt, _ := envelope.Plaintext(m)
	m.Body = strings.Repeat("x", n-len(pt)+1)
	if pt, _ := envelope.Plaintext(m); len(pt) != n {
		t.Fatalf("plaintext of %d bytes, want %d", len(pt), n)
	}
	return m
}

// TestSealCompressesHTML: an 8 KB HTML reset email seals (version 2) to a
// ciphertext several times smaller than its plaintext, and opens to the
// same message.
func TestSealCompressesHTML(t *testing.T) {
	m := ledger.Message{To: "player1001@example.com", Subject: "Reset your password", Body: shapes.ResetEmailHTML}
	pt, _ := envelope.Plaintext(m)
	e, err := envelope.SealWith(keyA, pt, nil, testDataKey, []byte{1, 2, 3}, fakeARN, testNonce)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plaintext %d bytes, ciphertext %d bytes", len(pt), len(e.CT))
	if e.V != envelope.Version || len(e.CT)*3 > len(pt) {
		t.Errorf("version %d, ciphertext %d bytes for a %d-byte plaintext: want version 2, at least 3x smaller", e.V, len(e.CT), len(pt))
	}
	b, _ := e.Marshal()
	got, err := (&envelope.Opener{KMS: fixedKey{testDataKey}, KeyARN: fakeARN}).Open(context.Background(), keyA, b)
	if err != nil || got != m {
		t.Fatalf("Open = %v, want the sealed message back", err)
	}
}

// TestOpenBoundsInflation: a version 2 envelope opens only if its DEFLATE
// stream inflates to at most envelope.MaxPlaintext bytes (the largest
// plaintext version 1 could carry, and the largest Seal seals): one byte
// more, or a 16 MiB bomb of 16 KiB, is refused as unavailable content.
func TestOpenBoundsInflation(t *testing.T) {
	m := messageOf(t, envelope.MaxPlaintext)
	pt, _ := envelope.Plaintext(m)
	if got, err := openRaw(t, envelope.Version, deflate(t, pt)); err != nil || got != m {
		t.Fatalf("a plaintext of exactly MaxPlaintext bytes: %v", err)
	}
	if _, err := (&envelope.Sealer{KMS: newFakeKMS(t), KeyID: fakeARN}).Seal(context.Background(), keyA, messageOf(t, envelope.MaxPlaintext+1)); err == nil {
		t.Error("Seal sealed a plaintext over MaxPlaintext")
	}
	over, _ := envelope.Plaintext(messageOf(t, envelope.MaxPlaintext+1))
	bomb := deflate(t, append([]byte(`{"to":"a@b.c","body":"`), make([]byte, 16<<20)...))
	t.Logf("bomb: %d bytes inflating to 16 MiB", len(bomb))
	for name, z := range map[string][]byte{"one byte over": deflate(t, over), "16 MiB bomb": bomb} {
		_, err := openRaw(t, envelope.Version, z)
		assertUnavailable(t, err, m)
		if !strings.Contains(err.Error(), "inflates past") {
			t.Errorf("%s: %v, want it refused for its size", name, err)
		}
	}
}

// TestOpenRefusesMalformedStreams: bytes after the final DEFLATE block, a
// truncated stream, a zlib or gzip wrapper, and a version 1 envelope
// relabelled version 2 are all refused.
func TestOpenRefusesMalformedStreams(t *testing.T) {
	m := ledgertest.Message(1, ledger.Email)
	pt, _ := envelope.Plaintext(m)
	z := deflate(t, pt)
	if got, err := openRaw(t, envelope.Version, z); err != nil || got != m {
		t.Fatalf("the untouched stream: %v", err)
	}
	var zl bytes.Buffer
	w := zlib.NewWriter(&zl)
	_, _ = w.Write(pt)
	_ = w.Close()
	for name, bad := range map[string][]byte{
		"trailing byte":            append(bytes.Clone(z), 0),
		"a second stream appended": append(bytes.Clone(z), z...),
		"truncated":                z[:len(z)-1],
		"zlib wrapper":             zl.Bytes(),
		"plaintext, not DEFLATE":   pt,
		"empty":                    {},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := openRaw(t, envelope.Version, bad)
			assertUnavailable(t, err, m)
		})
	}
	// The version is not authenticated, but the two readings exclude each
	// other: a JSON message is not a DEFLATE stream, a DEFLATE stream not a
	// JSON message.
	if _, err := openRaw(t, envelope.VersionUncompressed, z); err == nil {
		t.Error("a DEFLATE stream opened as version 1")
	}
}

// TestOpenVersion1: an envelope as version 1 producers sealed it (the
// plaintext itself under GCM) still opens.
func TestOpenVersion1(t *testing.T) {
	m := ledgertest.Message(2, ledger.SMS)
	pt, _ := envelope.Plaintext(m)
	got, err := openRaw(t, envelope.VersionUncompressed, pt)
	if err != nil || got != m {
		t.Fatalf("Open(version 1) = %+v, %v", got, err)
	}
	var wire map[string]any
	e, _ := envelope.SealRaw(envelope.VersionUncompressed, keyA, pt, testDataKey, []byte{1}, fakeARN, testNonce)
	b, _ := e.Marshal()
	_ = json.Unmarshal(b, &wire)
	if wire["v"] != 1.0 {
		t.Errorf("version 1 wire form: %s", b)
	}
}
