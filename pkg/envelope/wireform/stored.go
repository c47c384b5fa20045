package wireform

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// The stored form is how the content table keeps an envelope: the same
// fields as the wire form, in binary, without base64, field names or the
// algorithm's name. It never travels on the wire; intents carry the JSON
// form. Layout (docs/design.md, "The content table's stored form"):
//
//	offset  size  field
//	0       1     form tag, FormCompact (0x01)
//	1       1     v, the envelope version
//	2       1     algorithm code (1 = AES-256-GCM)
//	3       2     length of kms_key_id, big-endian, then its bytes
//	.       32    version 3 only: dict, as the 32 bytes of its SHA-256
//	.       2     length of edk, big-endian, then its bytes
//	.       1     length of nonce, then its bytes
//	.       4     length of ct, big-endian, then its bytes
//
// and nothing after ct. The fixed part is StoredOverhead bytes. A stored
// item written before the compact form is the JSON form, whose first byte
// is '{'; ParseStored reads both.
const (
	// FormCompact tags the compact stored form.
	FormCompact byte = 0x01
	// StoredOverhead is the stored form's size beyond the bytes of
	// kms_key_id, edk, nonce and ct.
	StoredOverhead = 1 + 1 + 1 + 2 + 2 + 1 + 4
)

// algCodes numbers the algorithms in the stored form; 0 is never used.
var algCodes = map[string]byte{Algorithm: 1}

// MarshalStored returns the compact stored form of e after validating it.
func (e Envelope) MarshalStored() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	code, ok := algCodes[e.Alg]
	if !ok || e.V < 0 || e.V > 0xff {
		// Validate admits nothing the stored form cannot hold; this is a
		// guard against the two drifting apart.
		return nil, bad("", "no stored form for this version and algorithm")
	}
	b := make([]byte, 0, StoredOverhead+len(e.KMSKeyID)+len(e.EDK)+len(e.Nonce)+len(e.CT))
	b = append(b, FormCompact, byte(e.V), code)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.KMSKeyID)))
	b = append(b, e.KMSKeyID...)
	if e.V == VersionDictionary {
		id, _ := hex.DecodeString(e.Dict) // Validate checked it is hex
		b = append(b, id...)
	}
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.EDK)))
	b = append(b, e.EDK...)
	b = append(b, byte(len(e.Nonce)))
	b = append(b, e.Nonce...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.CT)))
	b = append(b, e.CT...)
	return b, nil
}

// ParseStored decodes an envelope from the content table: the compact
// stored form (MarshalStored), or the JSON form that items written before
// it hold (Parse). Either is then validated. Errors are *ledger.FieldError
// values; they never contain the input.
func ParseStored(b []byte) (Envelope, error) {
	if len(b) == 0 {
		return Envelope{}, bad("", "empty stored form")
	}
	switch b[0] {
	case '{':
		return Parse(b)
	case FormCompact:
		return parseCompact(b[1:])
	}
	return Envelope{}, bad("", "unknown stored form")
}

func parseCompact(b []byte) (Envelope, error) {
	r := reader{b: b}
	var e Envelope
	e.V = int(r.num(1))
	code := byte(r.num(1))
	e.KMSKeyID = string(r.bytes(r.num(2)))
	if e.V == VersionDictionary {
		e.Dict = hex.EncodeToString(r.bytes(sha256.Size))
	}
	e.EDK = r.bytes(r.num(2))
	e.Nonce = r.bytes(r.num(1))
	e.CT = r.bytes(r.num(4))
	switch {
	case r.short:
		return Envelope{}, bad("", "stored form truncated")
	case len(r.b) != 0:
		return Envelope{}, bad("", "stored form has trailing data")
	}
	for name, c := range algCodes {
		if c == code {
			e.Alg = name
		}
	}
	if e.Alg == "" {
		return Envelope{}, bad("alg", "unknown algorithm code")
	}
	if err := e.Validate(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// reader reads big-endian fields; once short, it stays short and reads
// zeros.
type reader struct {
	b     []byte
	short bool
}

func (r *reader) num(n int) int {
	v := 0
	for _, c := range r.bytes(n) {
		v = v<<8 | int(c)
	}
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.short || n > len(r.b) {
		r.short = true
		return nil
	}
	p := bytes.Clone(r.b[:n])
	r.b = r.b[n:]
	return p
}
