package envelope

import (
	"bytes"
	"compress/flate"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/envelope/wireform"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// DataKeyGenerator is the KMS call a Sealer makes.
type DataKeyGenerator interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
}

// Sealer encrypts messages under a KMS key. It is safe for concurrent use.
type Sealer struct {
	// KMS generates the data keys.
	KMS DataKeyGenerator
	// KeyID names the KMS key: a key ARN (preferred), key id or alias.
	KeyID string
	// Dictionary, if set, is the preset DEFLATE dictionary Seal compresses
	// with (at most MaxDictionary bytes), and Seal writes version 3. The
	// stage must hold the same bytes (docs/intent-v2.md §1.5): its claim
	// function refuses a dictionary it lacks. Typically the canonical
	// plaintext of the template, rendered with a placeholder link.
	Dictionary []byte
}

// PresetDictionary returns s.Dictionary: what the producer's size check
// compresses with, as Seal does.
func (s *Sealer) PresetDictionary() []byte { return s.Dictionary }

// EncryptionContext returns the KMS encryption context that binds a data key
// to one logical message.
func EncryptionContext(key string) map[string]string {
	return map[string]string{"purpose": Purpose, "dedupe_key": key}
}

// Seal encrypts m for the logical message with dedupe key key under a fresh
// data key. The plaintext data key is zeroed before Seal returns. Errors
// never contain the message.
func (s *Sealer) Seal(ctx context.Context, key string, m ledger.Message) (Envelope, error) {
	if s.KMS == nil || s.KeyID == "" {
		return Envelope{}, errors.New("envelope: sealer needs a KMS client and a key id")
	}
	if key == "" {
		return Envelope{}, errors.New("envelope: seal: empty dedupe key")
	}
	pt, err := Plaintext(m)
	if err != nil {
		return Envelope{}, fmt.Errorf("envelope: seal %s: %w", key, err)
	}
	defer clear(pt)
	if len(pt) > MaxPlaintext {
		return Envelope{}, fmt.Errorf("envelope: seal %s: message larger than %d bytes", key, MaxPlaintext)
	}
	if len(s.Dictionary) > MaxDictionary {
		return Envelope{}, fmt.Errorf("envelope: seal %s: dictionary longer than %d bytes", key, MaxDictionary)
	}

	out, err := s.KMS.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             aws.String(s.KeyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: EncryptionContext(key),
	})
	if err != nil {
		return Envelope{}, fmt.Errorf("envelope: seal %s: generate data key: %w", key, err)
	}
	defer clear(out.Plaintext)
	if len(out.Plaintext) != 32 || len(out.CiphertextBlob) == 0 {
		return Envelope{}, fmt.Errorf("envelope: seal %s: KMS returned a malformed data key", key)
	}
	nonce := make([]byte, wireform.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return Envelope{}, fmt.Errorf("envelope: seal %s: nonce: %w", key, err)
	}
	keyID := aws.ToString(out.KeyId)
	if keyID == "" {
		keyID = s.KeyID
	}
	e, err := sealWith(key, pt, s.Dictionary, dataKey{plain: out.Plaintext, encrypted: out.CiphertextBlob, keyID: keyID}, nonce)
	if err != nil {
		return Envelope{}, fmt.Errorf("envelope: seal %s: %w", key, err)
	}
	return e, nil
}

// Plaintext returns the bytes Seal encrypts for m: the JSON object
// {"to":...,"subject":...,"body":...} in that order, "subject" left out when
// empty, encoded as encoding/json does (which also writes <, >, &, U+2028
// and U+2029 as \u escapes). docs/intent-v2.md specifies it for other
// languages. A field that is not valid UTF-8 is an error: encoding/json
// would replace its bad bytes, and the opened message would no longer match
// the content hash computed over the original.
func Plaintext(m ledger.Message) ([]byte, error) {
	for _, f := range []struct{ name, v string }{{"to", m.To}, {"subject", m.Subject}, {"body", m.Body}} {
		if !utf8.ValidString(f.v) {
			return nil, fmt.Errorf("message %s is not valid UTF-8", f.name)
		}
	}
	pt, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return pt, nil
}

// dataKey is a data key as GenerateDataKey returns it.
type dataKey struct {
	plain     []byte // the AES-256 key
	encrypted []byte // CiphertextBlob: the key encrypted under the KMS key
	keyID     string // KeyId: the ARN of the KMS key that encrypted it
}

// Compress returns the raw DEFLATE stream (RFC 1951, no zlib or gzip
// header) of plaintext pt that Seal encrypts, at compress/flate's
// BestCompression, against the preset dictionary dict if it is not empty.
// Other implementations' streams differ byte for byte and are equally
// valid: Open inflates any DEFLATE stream. The caller should zero the
// result after use.
func Compress(pt, dict []byte) ([]byte, error) {
	if len(pt) > MaxPlaintext {
		return nil, fmt.Errorf("message larger than %d bytes", MaxPlaintext)
	}
	if len(dict) > MaxDictionary {
		return nil, fmt.Errorf("dictionary longer than %d bytes", MaxDictionary)
	}
	var b bytes.Buffer
	b.Grow(len(pt)/2 + 64)
	w, err := flate.NewWriterDict(&b, flate.BestCompression, dict)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(pt); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("compress: %w", err)
	}
	return b.Bytes(), nil
}

// sealWith compresses the plaintext pt (against dict, if not empty: version
// 3) and encrypts it for the dedupe key key with data key k and nonce. Seal calls it with a fresh data key and a
// random nonce; the cross-language test vectors call it with fixed ones. A
// data key must never seal twice.
func sealWith(key string, pt, dict []byte, k dataKey, nonce []byte) (Envelope, error) {
	gcm, err := newGCM(k.plain)
	if err != nil {
		return Envelope{}, err
	}
	z, err := Compress(pt, dict)
	if err != nil {
		return Envelope{}, err
	}
	defer clear(z)
	v, id := Version, ""
	if len(dict) > 0 {
		v, id = VersionDictionary, DictionaryID(dict)
	}
	e := Envelope{
		V:        v,
		Alg:      Algorithm,
		KMSKeyID: k.keyID,
		Dict:     id,
		EDK:      k.encrypted,
		Nonce:    nonce,
		CT:       gcm.Seal(nil, nonce, z, []byte(key)),
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

func newGCM(dataKey []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(dataKey)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	return cipher.NewGCM(block)
}
