package envelope_test

import (
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// dictionaryFile holds envelope version 3 vectors: notifications sealed
// against one preset dictionary, given in the file.
const dictionaryFile = "dictionary.json"

type dictionaryDoc struct {
	Description string `json:"description"`
	// Dictionary is the preset dictionary's bytes as text (it is the
	// sample templates' canonical plaintexts, valid UTF-8); DictionaryID
	// the lowercase hex SHA-256 of those bytes.
	Dictionary   string         `json:"dictionary"`
	DictionaryID string         `json:"dictionary_id"`
	Vectors      []intentVector `json:"vectors"`
}

// dictionaryInputs are the notifications of dictionary.json: the sample
// templates at production length, which the dictionary was made from, and
// two of intents.json's, which it was not (a dictionary changes the size,
// never what opens).
func dictionaryInputs() []struct {
	name string
	n    vectors.Notification
} {
	at := time.Date(2026, 11, 30, 10, 42, 52, 306e6, time.UTC)
	shaped := func(ch ledger.Channel, m ledger.Message) vectors.Notification {
		in := shapes.Intent("vector", 1, ch, m, at)
		return vectors.Notification{
			ChallengeID: in.ChallengeID, Channel: string(ch), Workflow: vectors.Workflow{Kind: "single"},
			DestinationRef: in.DestinationRef, SubjectRef: in.SubjectRef,
			IssuedAt: in.IssuedAt.Format(time.RFC3339Nano), ExpiresAt: in.ExpiresAt.Format(time.RFC3339Nano),
			TemplateID: in.TemplateID, TemplateVersion: in.TemplateVersion, PolicyVersion: "policy-1",
			Message: vectors.Message{To: vectors.Plain(m.To), Subject: vectors.Plain(m.Subject), Body: vectors.Plain(m.Body)},
		}
	}
	out := []struct {
		name string
		n    vectors.Notification
	}{
		{"the 8 KB HTML email of the template", shaped(ledger.Email, shapes.Email(1))},
		{"the 160-character SMS of the template", shaped(ledger.SMS, shapes.SMS(1, "+12015550123"))},
	}
	for _, in := range intentInputs() {
		if in.name == "email single" || in.name == "escapes and non-ASCII characters" {
			in.name += ", not of the template"
			out = append(out, in)
		}
	}
	return out
}

// TestVectorsDictionary checks every vector of dictionary.json as
// TestVectorsIntents does intents.json's, with the file's dictionary:
// deflate_hex inflates against it, the envelope is version 3 naming it,
// the digest's preimage carries it, and the body opens with it.
func TestVectorsDictionary(t *testing.T) {
	dict := shapes.Dictionary()
	var doc dictionaryDoc
	vectors.Load(t, dictionaryFile, &doc)
	generated := dictionaryDoc{
		Description: "Envelope version 3: notifications sealed as in intents.json, but compressed against the preset dictionary " +
			"given here (its text, and its id: the lowercase hex SHA-256 of its bytes), which the envelope names as dict and its digest binds. " +
			"See docs/intent-v2.md §1.5.",
		Dictionary: string(dict), DictionaryID: envelope.DictionaryID(dict),
	}
	for _, in := range dictionaryInputs() {
		v := generateIntentVector(t, in.name, in.n, dict)
		if v.SealedContent.V != envelope.VersionDictionary || v.SealedContent.Dict != generated.DictionaryID {
			t.Fatalf("%s: sealed as v%d naming %q", in.name, v.SealedContent.V, v.SealedContent.Dict)
		}
		generated.Vectors = append(generated.Vectors, v)
	}
	if !vectors.Updating() {
		if doc.Dictionary != generated.Dictionary || doc.DictionaryID != generated.DictionaryID || len(doc.Vectors) != len(generated.Vectors) {
			t.Fatalf("%s: its dictionary or vector count is not the generator's", dictionaryFile)
		}
		for _, v := range doc.Vectors {
			t.Run(v.Name, func(t *testing.T) { checkIntentVector(t, v, []byte(doc.Dictionary)) })
		}
	}
	vectors.Sync(t, dictionaryFile, generated)
}
