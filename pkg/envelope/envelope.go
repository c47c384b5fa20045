// Package envelope seals the secret-bearing content of a notification with
// KMS envelope encryption, so that the intent can travel through SQS and the
// short-lived content store without anyone but the dispatch path reading it.
//
// A Sealer (held by the producer) asks KMS for a fresh AES-256 data key
// under an encryption context that names the dedupe key, encrypts the JSON of
// the ledger.Message with AES-256-GCM using the dedupe key as additional
// authenticated data, and keeps only the KMS-encrypted copy of the data key.
// Since version 2 the JSON is compressed with raw DEFLATE (RFC 1951) before
// it is encrypted; version 3 compresses it against a preset dictionary
// (the template) that dispatch holds. The content hash is still over the
// message itself.
// An Opener (held by dispatch) implements ledger.Opener: it has KMS decrypt
// the data key under the same context and opens the ciphertext. Both the KMS
// context and the GCM AAD bind the content to its dedupe key, so content
// sealed for one logical message never opens as another.
//
// The wire form is the JSON object
//
//	{"v":2,"alg":"AES-256-GCM","kms_key_id":"arn:...","edk":"<base64>","nonce":"<base64>","ct":"<base64>"}
//
// where edk is the encrypted data key, nonce the 12-byte GCM nonce and ct the
// GCM ciphertext with its 16-byte tag (standard base64, padded). In version
// 2 the GCM plaintext is the raw DEFLATE stream of the message's JSON; in
// version 1 (still opened, no longer written) it is the JSON itself.
package envelope

import "github.com/resetledger/resetledger/pkg/envelope/wireform"

// Version is the envelope format version Seal writes (DEFLATE, then
// AES-256-GCM).
const Version = wireform.Version

// VersionDictionary is the version Seal writes when the Sealer has a
// Dictionary: DEFLATE against that preset dictionary, then AES-256-GCM.
const VersionDictionary = wireform.VersionDictionary

// MaxDictionary is the longest preset dictionary (DEFLATE's window).
const MaxDictionary = wireform.MaxDictionary

// Dictionaries is the set of preset dictionaries a stage holds, by id.
type Dictionaries = wireform.Dictionaries

// NewDictionaries indexes dictionaries by their ids (see
// wireform.NewDictionaries).
func NewDictionaries(ds ...[]byte) (Dictionaries, error) { return wireform.NewDictionaries(ds...) }

// DictionaryID is the id a version 3 envelope names its dictionary by: the
// lowercase hex SHA-256 of its bytes.
func DictionaryID(d []byte) string { return wireform.DictionaryID(d) }

// VersionUncompressed is version 1 (AES-256-GCM of the JSON itself), which
// Open still opens.
const VersionUncompressed = wireform.VersionUncompressed

// MaxPlaintext is the largest plaintext (the message's JSON, before
// compression) Seal seals and Open inflates.
const MaxPlaintext = wireform.MaxPlaintext

// Algorithm is the only content cipher.
const Algorithm = wireform.Algorithm

// MaxCiphertext bounds ct; a message never comes close (the whole SQS body
// is limited to 64 KiB).
const MaxCiphertext = wireform.MaxCiphertext

// Purpose is the value of the "purpose" entry of the KMS encryption context.
const Purpose = "password-reset-notification"

// Envelope is sealed content: everything needed to open it given access to
// the KMS key, and nothing readable without it. Its wire form, parsing and
// validation are package wireform's, which links no KMS client.
type Envelope = wireform.Envelope

// Fields returns the names of the envelope's JSON fields, all required.
func Fields() []string { return wireform.Fields() }

// Parse decodes an envelope strictly from its JSON form (see wireform.Parse).
// Errors are *ledger.FieldError values naming the field relative to the
// envelope; they never contain the input.
func Parse(b []byte) (Envelope, error) { return wireform.Parse(b) }

// ParseStored decodes an envelope as the content table holds it: the
// compact stored form (Envelope.MarshalStored) or, for items written before
// it, the JSON form (see wireform.ParseStored). Opener.Open reads both.
func ParseStored(b []byte) (Envelope, error) { return wireform.ParseStored(b) }
