package digest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Signer signs the SHA-256 of a digest body.
type Signer interface {
	// KeyID names the key (recorded in each object; not trusted by Verify).
	KeyID() string
	// Sign returns the DER-encoded ECDSA P-256 signature of the 32-byte
	// SHA-256 sum of a body.
	Sign(ctx context.Context, sum []byte) ([]byte, error)
}

// Verifier checks signatures against one public key, offline.
type Verifier struct {
	pub *ecdsa.PublicKey
}

// NewVerifier returns a Verifier for pub, which must be a P-256 key.
func NewVerifier(pub *ecdsa.PublicKey) (Verifier, error) {
	if pub == nil || pub.Curve != elliptic.P256() {
		return Verifier{}, errors.New("digest: the public key is not an ECDSA P-256 key")
	}
	return Verifier{pub: pub}, nil
}

// ParsePublicKey reads a DER SubjectPublicKeyInfo (what KMS GetPublicKey
// returns) or a PEM "PUBLIC KEY" block holding one.
func ParsePublicKey(b []byte) (Verifier, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	k, err := x509.ParsePKIXPublicKey(b)
	if err != nil {
		return Verifier{}, fmt.Errorf("digest: public key: %w", err)
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return Verifier{}, errors.New("digest: the public key is not an ECDSA key")
	}
	return NewVerifier(pub)
}

// Open checks raw's signature and returns its digest. A signature that does
// not verify wraps ErrSignature; an object that does not parse wraps
// ErrMalformed; another format or algorithm wraps ErrFormat.
func (v Verifier) Open(raw []byte) (Digest, []byte, error) {
	o, d, err := Parse(raw)
	if err != nil {
		return Digest{}, nil, err
	}
	if o.Algorithm != Algorithm {
		return Digest{}, nil, fmt.Errorf("%w: algorithm %q, not %s", ErrFormat, clip(o.Algorithm), Algorithm)
	}
	body := []byte(o.Body)
	sum := sha256.Sum256(body)
	if !ecdsa.VerifyASN1(v.pub, sum[:], o.Signature) {
		return Digest{}, nil, ErrSignature
	}
	return d, body, nil
}

// LocalSigner signs with an in-process P-256 key: tests and the simulator.
type LocalSigner struct {
	ID  string
	Key *ecdsa.PrivateKey
	// Deterministic signs per RFC 6979 (the same body, the same
	// signature): for test vectors only.
	Deterministic bool
}

// NewLocalSigner makes a fresh key named id.
func NewLocalSigner(id string) *LocalSigner {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return &LocalSigner{ID: id, Key: k}
}

// KeyID implements Signer.
func (s *LocalSigner) KeyID() string { return s.ID }

// Sign implements Signer.
func (s *LocalSigner) Sign(_ context.Context, sum []byte) ([]byte, error) {
	if s.Deterministic {
		return s.Key.Sign(nil, sum, crypto.SHA256)
	}
	return ecdsa.SignASN1(rand.Reader, s.Key, sum)
}

// Verifier returns the Verifier of s's public key.
func (s *LocalSigner) Verifier() Verifier { return Verifier{pub: &s.Key.PublicKey} }

// Seal signs d and returns the stored object's bytes and the body's hash.
func Seal(ctx context.Context, s Signer, d Digest) (raw []byte, hash string, err error) {
	body, err := d.Body()
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	sig, err := s.Sign(ctx, sum[:])
	if err != nil {
		return nil, "", fmt.Errorf("digest %d: sign: %w", d.Seq, err)
	}
	raw, err = marshalObject(Object{Format: Format, Body: string(body), KeyID: s.KeyID(), Algorithm: Algorithm, Signature: sig})
	return raw, Hash(body), err
}
