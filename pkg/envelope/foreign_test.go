package envelope_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestVectorsForeignEnvelopesOpen: the envelopes the Node.js and Python
// producers sealed for every vector of intents.json, with the vector's data
// key and nonce (testdata/vectors/foreign, written by their vector tests
// under VECTORS_UPDATE=1), open with the Go opener to the vector's exact
// plaintext. Their DEFLATE streams differ from Go's; this is what holds
// across languages instead (docs/intent-v2.md §1.10). And the envelope digest
// the Go claim function rebuilds from each is the documented layout of the
// members as that producer wrote them (§1.6).
func TestVectorsForeignEnvelopesOpen(t *testing.T) {
	var doc intentsDoc
	vectors.Load(t, intentsFile, &doc)
	byName := map[string]intentVector{}
	for _, v := range doc.Vectors {
		byName[v.Name] = v
	}
	for _, producer := range []string{"node", "python"} {
		var foreign struct {
			Producer string `json:"producer"`
			Vectors  []struct {
				Name          string          `json:"name"`
				SealedContent json.RawMessage `json:"sealed_content"`
			} `json:"vectors"`
		}
		vectors.Load(t, "foreign/"+producer+".json", &foreign)
		if foreign.Producer != producer || len(foreign.Vectors) != len(doc.Vectors) {
			t.Fatalf("foreign/%s.json: producer %q, %d envelopes for %d vectors", producer, foreign.Producer, len(foreign.Vectors), len(doc.Vectors))
		}
		for _, f := range foreign.Vectors {
			v, ok := byName[f.Name]
			if !ok {
				t.Fatalf("foreign/%s.json: no vector %q", producer, f.Name)
			}
			e, err := envelope.Parse(f.SealedContent)
			if err != nil || e.V != envelope.Version {
				t.Fatalf("%s %s: %v (version %d)", producer, f.Name, err, e.V)
			}
			// The digest the claim function binds (rebuilt from the envelope
			// it decoded) is the one of the members as this producer wrote
			// them, which is what this producer MACs (its vector tests).
			var written sealedContent
			if err := json.Unmarshal(f.SealedContent, &written); err != nil {
				t.Fatal(err)
			}
			if string(e.DigestPreimage()) != envelopeLayout(written) {
				t.Errorf("%s %s: the Go digest preimage of this envelope is not the layout of its members as written", producer, f.Name)
			}
			m, err := (&envelope.Opener{KMS: vectorKMS{v: v, key: v.DedupeKey}, KeyARN: v.GenerateDataKey.KeyID}).Open(context.Background(), v.DedupeKey, f.SealedContent)
			if err != nil {
				t.Fatalf("%s %s: Open: %v", producer, f.Name, err)
			}
			if pt, _ := envelope.Plaintext(m); string(pt) != v.Plaintext || ledger.ContentHash(v.Notification.TemplateID, v.Notification.TemplateVersion, m) != v.ContentHash {
				t.Errorf("%s %s: opened to another message", producer, f.Name)
			}
		}
	}
}
