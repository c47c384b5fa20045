// Package digest keeps the ledger's history checkable without trusting the
// table or anyone who can write it: signed digests, written outside the
// table, that record for every row changed since the previous digest its
// entry count and chain head (the hash of its last history entry).
//
// A digest is signed (ECDSA P-256 over SHA-256, with a KMS key only the
// digest function may sign with) and names the hash of the previous digest,
// so the digests form one chain numbered 1, 2, 3, ... A verifier that holds
// the public key checks every digest's signature, the chain, and each row of
// the table against every (count, head) a digest recorded for it
// (docs/digests.md specifies the bytes).
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Format names the object format; it is the object's "format" field.
const Format = "resetledger-digest-v1"

// Algorithm is the signing algorithm (KMS SigningAlgorithmSpec): ECDSA on
// P-256 over the SHA-256 of the body, the signature DER-encoded.
const Algorithm = "ECDSA_SHA_256"

// Errors.
var (
	// ErrExists: a digest with that sequence number is stored already.
	ErrExists = errors.New("digest: sequence number taken")
	// ErrNotFound: no digest with that sequence number.
	ErrNotFound = errors.New("digest: not found")
	// ErrSignature: the signature does not verify under the public key.
	ErrSignature = errors.New("digest: signature does not verify")
	// ErrMalformed: the object is not a digest of this format.
	ErrMalformed = errors.New("digest: malformed")
	// ErrFormat: the object names another format or signing algorithm.
	ErrFormat = errors.New("digest: unknown format or algorithm")
)

// Removal kinds of a Row.
const (
	// RemovedTTL: the row was removed by the table's TTL (the stream names
	// the DynamoDB service as the remover).
	RemovedTTL = "ttl"
	// RemovedDelete: the row was removed by a principal's DeleteItem.
	RemovedDelete = "delete"
)

// Row is what a digest records of one row: the state of its hash chain at
// the latest stream record the digest covers for it.
type Row struct {
	// Key is the row's dedupe key.
	Key string `json:"key"`
	// From is the entry count before the first change this digest covers
	// (0 for a row inserted in it). The previous digest that recorded the
	// row recorded Count == From, unless stream records were lost.
	From int64 `json:"from"`
	// Count is the number of history entries; Head is the Hash of the last
	// of them (entry Count-1).
	Count int64  `json:"count"`
	Head  string `json:"head"`
	// RetainUntil is the row's retention deadline (its TTL), Unix seconds.
	RetainUntil int64 `json:"retain_until"`
	// Removed is "" for a row that exists, RemovedTTL or RemovedDelete for
	// one the stream reported removed (Count and Head are then its last).
	Removed string `json:"removed,omitempty"`
}

// Position is the stream range a digest covers on one shard.
type Position struct {
	Shard string `json:"shard"`
	First string `json:"first"` // sequence number of the first record
	Last  string `json:"last"`  // sequence number of the last record
}

// Gap kinds.
const (
	// GapCount: a row's records are not contiguous (an entry count was
	// skipped between two records the function saw).
	GapCount = "count"
	// GapAge: a record was older than the stream's retention (24 h) when
	// read, so records before it may have been trimmed unread.
	GapAge = "age"
	// GapUnreadable: a record the function could not decode.
	GapUnreadable = "unreadable"
	// GapRetention: a write moved a row's retention deadline (its TTL)
	// earlier, which no write of the ledger does: the TTL would remove the
	// row before its retention ends.
	GapRetention = "retention"
)

// Gap is a record of evidence the function knows it lacks.
type Gap struct {
	Kind   string `json:"kind"`
	Key    string `json:"key,omitempty"`
	Shard  string `json:"shard,omitempty"`
	Detail string `json:"detail"`
}

// Digest is the signed body.
type Digest struct {
	Format string `json:"format"`
	// Seq is the digest's number: 1 for the first, then each one more.
	Seq uint64 `json:"seq"`
	// Prev is Hash of digest Seq-1's body ("" for Seq 1).
	Prev string `json:"prev"`
	// At is when the digest was made (UTC, RFC 3339 with nanoseconds).
	At        time.Time  `json:"at"`
	Positions []Position `json:"positions"`
	Gaps      []Gap      `json:"gaps"`
	// Rows are sorted by Key, one per key.
	Rows []Row `json:"rows"`
}

// Object is a stored digest: the body exactly as signed, and its signature.
type Object struct {
	Format string `json:"format"`
	// Body is the digest's JSON text; the signature covers its UTF-8 bytes.
	Body string `json:"body"`
	// KeyID names the signing key (a KMS key ARN, or "local:..." in tests).
	KeyID     string `json:"key_id"`
	Algorithm string `json:"algorithm"`
	// Signature is the DER-encoded ECDSA signature, base64 (standard, padded).
	Signature []byte `json:"signature"`
}

// Hash returns the hex SHA-256 of body: what the next digest names as Prev.
func Hash(body []byte) string {
	h := sha256.Sum256(body)
	return hex.EncodeToString(h[:])
}

// Body returns the canonical bytes of d: its JSON encoding with rows sorted
// by key, gaps and positions in the order given, times in UTC.
func (d Digest) Body() ([]byte, error) {
	d.Format = Format
	d.At = d.At.UTC()
	d.Rows = slices.Clone(d.Rows)
	slices.SortFunc(d.Rows, func(a, b Row) int { return strings.Compare(a.Key, b.Key) })
	if d.Rows == nil {
		d.Rows = []Row{}
	}
	if d.Positions == nil {
		d.Positions = []Position{}
	}
	if d.Gaps == nil {
		d.Gaps = []Gap{}
	}
	return json.Marshal(d)
}

// Parse decodes an object without checking its signature. An object or
// body that is not JSON of the expected shape wraps ErrMalformed; one whose
// format (object or body) is not Format wraps ErrFormat.
func Parse(raw []byte) (Object, Digest, error) {
	var o Object
	if err := json.Unmarshal(raw, &o); err != nil {
		return Object{}, Digest{}, fmt.Errorf("%w: not a JSON digest object", ErrMalformed)
	}
	if o.Format != Format {
		return Object{}, Digest{}, fmt.Errorf("%w: object format %q, not %s", ErrFormat, clip(o.Format), Format)
	}
	var d Digest
	if err := json.Unmarshal([]byte(o.Body), &d); err != nil || d.Seq == 0 {
		return Object{}, Digest{}, fmt.Errorf("%w: body is not a %s digest", ErrMalformed, Format)
	}
	if d.Format != Format {
		return Object{}, Digest{}, fmt.Errorf("%w: body format %q, not %s", ErrFormat, clip(d.Format), Format)
	}
	return o, d, nil
}

// clip shortens a value read from an object for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// ObjectName is the S3 object key of digest seq: digests/ and seq padded to
// 20 digits, so names sort as numbers do.
func ObjectName(seq uint64) string { return fmt.Sprintf("digests/%020d.json", seq) }
