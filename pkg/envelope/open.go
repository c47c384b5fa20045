package envelope

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Decrypter is the KMS call an Opener makes.
type Decrypter interface {
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Opener decrypts envelopes; it implements ledger.Opener. It is safe for
// concurrent use.
//
// Error classes: content that cannot be authenticated (malformed envelope,
// ciphertext or data key tampered with, sealed for another dedupe key or
// under another KMS key) yields an error wrapping ledger.ErrContentUnavailable,
// which no retry can fix. Any other KMS failure (throttling, 5xx, network,
// access denied, disabled key) yields a plain wrapped error: the caller
// should retry later. No error contains the message or key material.
type Opener struct {
	// KMS decrypts data keys.
	KMS Decrypter
	// KeyARN pins the KMS key: Decrypt is asked to use this key only, so an
	// envelope naming another key cannot make the opener use it.
	KeyARN string
	// Dictionaries are the preset dictionaries version 3 envelopes are
	// opened with. One naming a dictionary not here is not opened, and
	// not quarantined either: the error is retryable (a stage updated
	// function by function), and no KMS call is made.
	Dictionaries Dictionaries
}

var _ ledger.Opener = (*Opener)(nil)

// Open returns the message sealed for key. sealed is the envelope as the
// content table stores it: its compact stored form or its JSON form.
func (o *Opener) Open(ctx context.Context, key string, sealed []byte) (ledger.Message, error) {
	if o.KMS == nil || o.KeyARN == "" {
		return ledger.Message{}, errors.New("envelope: opener needs a KMS client and a key ARN")
	}
	e, err := ParseStored(sealed)
	if err != nil {
		return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: %s", key, ledger.ErrContentUnavailable, storedFault(err))
	}
	dict, ok := o.Dictionaries[e.Dict]
	if e.V == VersionDictionary && !ok {
		return ledger.Message{}, fmt.Errorf("envelope: open %s: content dictionary %s is not held here", key, e.Dict)
	}
	out, err := o.KMS.Decrypt(ctx, &kms.DecryptInput{
		CiphertextBlob:    e.EDK,
		KeyId:             aws.String(o.KeyARN),
		EncryptionContext: EncryptionContext(key),
	})
	if err != nil {
		if unauthentic(err) {
			return ledger.Message{}, fmt.Errorf("envelope: open %s: data key: %w (%s)", key, ledger.ErrContentUnavailable, errorCode(err))
		}
		return ledger.Message{}, fmt.Errorf("envelope: open %s: decrypt data key: %w", key, err)
	}
	defer clear(out.Plaintext)
	if len(out.Plaintext) != 32 {
		return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: data key has the wrong size", key, ledger.ErrContentUnavailable)
	}
	gcm, err := newGCM(out.Plaintext)
	if err != nil {
		return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: %v", key, ledger.ErrContentUnavailable, err)
	}
	pt, err := gcm.Open(nil, e.Nonce, e.CT, []byte(key))
	if err != nil {
		return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: authentication failed", key, ledger.ErrContentUnavailable)
	}
	defer clear(pt)
	if e.V != VersionUncompressed {
		z := pt
		if pt, err = inflate(z, dict); err != nil {
			return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: %v", key, ledger.ErrContentUnavailable, err)
		}
		defer clear(pt)
	}
	var m ledger.Message
	dec := json.NewDecoder(bytes.NewReader(pt))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		// The decoder's error could quote plaintext: drop it.
		return ledger.Message{}, fmt.Errorf("envelope: open %s: %w: content is not a message", key, ledger.ErrContentUnavailable)
	}
	return m, nil
}

// storedFault describes why stored content did not decode: the field and
// reason of ParseStored's *ledger.FieldError (never the input), without
// calling the content table's item an intent.
func storedFault(err error) string {
	var fe *ledger.FieldError
	if !errors.As(err, &fe) {
		return "stored envelope does not decode"
	}
	if fe.Field == "" {
		return "stored envelope: " + fe.Reason
	}
	return "stored envelope: " + fe.Field + ": " + fe.Reason
}

// Errors of inflate; they never quote the content.
var (
	errTooLarge = fmt.Errorf("content inflates past %d bytes", MaxPlaintext)
	errNotFlate = errors.New("content is not one raw DEFLATE stream")
)

// inflate decompresses the raw DEFLATE stream z against the preset
// dictionary dict (none if empty), refusing a stream that
// inflates past MaxPlaintext (a decompression bomb: it stops reading there,
// so at most MaxPlaintext+1 bytes are ever written), is truncated or
// corrupt, or has bytes after its final block. GCM has authenticated z
// already, so only the holder of the data key could have written any of
// these; they are refused all the same.
func inflate(z, dict []byte) ([]byte, error) {
	src := bytes.NewReader(z) // an io.ByteReader: flate reads no further than its final block
	r := flate.NewReaderDict(src, dict)
	defer r.Close()
	var b bytes.Buffer
	n, err := io.Copy(&b, io.LimitReader(r, MaxPlaintext+1))
	switch {
	case n > MaxPlaintext:
		clear(b.Bytes())
		return nil, errTooLarge
	case err != nil:
		clear(b.Bytes())
		return nil, errNotFlate
	case src.Len() != 0:
		clear(b.Bytes())
		return nil, errNotFlate
	}
	return b.Bytes(), nil
}

// unauthentic reports KMS errors that say the data key cannot be
// authenticated under this key and context: permanent, not retryable.
func unauthentic(err error) bool {
	var (
		invalid   *types.InvalidCiphertextException
		incorrect *types.IncorrectKeyException
	)
	return errors.As(err, &invalid) || errors.As(err, &incorrect)
}

func errorCode(err error) string {
	var (
		invalid   *types.InvalidCiphertextException
		incorrect *types.IncorrectKeyException
	)
	switch {
	case errors.As(err, &incorrect):
		return incorrect.ErrorCode()
	case errors.As(err, &invalid):
		return invalid.ErrorCode()
	}
	return "unknown"
}
