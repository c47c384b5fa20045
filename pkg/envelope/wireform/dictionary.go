package wireform

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/resetledger/resetledger/pkg/charclass"
)

// MaxDictionary is the longest preset dictionary: DEFLATE's window, the
// most of a dictionary a stream can refer back to.
const MaxDictionary = 32 << 10

// DictionaryID names a preset dictionary in a version 3 envelope: the
// lowercase hex SHA-256 of its bytes.
func DictionaryID(d []byte) string {
	sum := sha256.Sum256(d)
	return hex.EncodeToString(sum[:])
}

func isDictionaryID(s string) bool { return len(s) == 2*sha256.Size && lowerHex.All(s) }

// lowerHex is the alphabet of a DictionaryID.
var lowerHex = charclass.Of("0123456789abcdef")

// Dictionaries is the set of preset dictionaries a stage holds, by
// DictionaryID (docs/intent-v2.md §1.5): the claim function refuses a
// version 3 envelope that names one it lacks, and dispatch opens with them.
type Dictionaries map[string][]byte

// NewDictionaries indexes ds by their ids. An empty dictionary, or one
// longer than MaxDictionary, is an error.
func NewDictionaries(ds ...[]byte) (Dictionaries, error) {
	set := make(Dictionaries, len(ds))
	for i, d := range ds {
		if len(d) == 0 || len(d) > MaxDictionary {
			return nil, fmt.Errorf("dictionary %d: want 1 to %d bytes, have %d", i, MaxDictionary, len(d))
		}
		set[DictionaryID(d)] = d
	}
	return set, nil
}

// Admits reports whether an envelope naming dictionary id (Envelope.Dict)
// can be opened with this set: it names none (versions 1 and 2), or one the
// set holds.
func (s Dictionaries) Admits(id string) bool {
	_, ok := s[id]
	return id == "" || ok
}
