package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/vectors"
	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

const digestsFile = "digests.json"

type digestsDoc struct {
	Description  string          `json:"description"`
	PublicKeyPEM string          `json:"public_key_pem"`
	Digests      []digestVector  `json:"digests"`
	Rows         []digestRowCase `json:"rows"`
	Chains       []digestCase    `json:"chain_cases"`
	Missing      []missingCase   `json:"missing_cases"`
}

type digestVector struct {
	Seq        uint64 `json:"seq"`
	Object     string `json:"object"`      // the stored object, as stored
	BodySHA256 string `json:"body_sha256"` // the next digest's prev
}

type findingVector struct {
	Seq  uint64 `json:"seq"`
	Code string `json:"code"`
}

type digestRowCase struct {
	Name string `json:"name"`
	// ExportLine is a line number of export.jsonl, or 0 with Line set.
	ExportLine int             `json:"export_line,omitempty"`
	Line       string          `json:"line,omitempty"`
	Findings   []findingVector `json:"findings"`
}

type digestCase struct {
	Name     string          `json:"name"`
	Replace  *digestVector   `json:"replace,omitempty"`
	Remove   uint64          `json:"remove,omitempty"`
	Findings []findingVector `json:"findings"`
}

type missingCase struct {
	Name string `json:"name"`
	// Table lists the export.jsonl lines the table holds.
	Table    []int           `json:"table"`
	Now      string          `json:"now"`
	Key      string          `json:"key"`
	Findings []findingVector `json:"findings"`
}

// vectorKey is the fixed, public, test-only signing key of the vectors.
func vectorKey(t *testing.T, name string) *digest.LocalSigner {
	sum := sha256.Sum256([]byte("resetledger digest test vector key " + name + ", public, never use it"))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return &digest.LocalSigner{ID: "local:vector-" + name, Key: k, Deterministic: true}
}

func exportLines(t *testing.T) []string {
	raw, err := os.ReadFile(filepath.Join(vectors.Dir(t), exportFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

func retainUntil(t *testing.T, line string) int64 {
	var r struct {
		RetainUntil string `json:"retain_until"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, r.RetainUntil)
	if err != nil {
		t.Fatal(err)
	}
	return at.Unix()
}

func codes(fs []digest.Finding) []findingVector {
	out := []findingVector{}
	for _, f := range fs {
		out = append(out, findingVector{Seq: f.Seq, Code: f.Code})
	}
	return out
}

// generateDigests makes the vectors: three digests over the untouched rows
// of export.jsonl (lines 1-6), and what a verifier finds for every line,
// for a rewritten-and-recomputed row, for tampered chains and for a
// deleted row.
func generateDigests(t *testing.T) digestsDoc {
	ctx := context.Background()
	lines := exportLines(t)
	signer := vectorKey(t, "digest")
	der, _ := x509.MarshalPKIXPublicKey(&signer.Key.PublicKey)
	doc := digestsDoc{
		Description: "Signed digests over the untouched rows of export.jsonl (lines 1-6), the public key, and what a verifier " +
			"finds: per export line (and a row rewritten with its chain recomputed), per tampered digest chain, and per row " +
			"missing from the table. The vectors are signed deterministically (RFC 6979); KMS signatures are not. See docs/digests.md.",
		PublicKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
	}
	entries := exportEntries(t, lines)
	store := digest.NewMemStore()
	at := time.Date(2026, 11, 30, 9, 10, 0, 0, time.UTC)
	w := &digest.Writer{Store: store, Signer: signer, Clock: func() time.Time { return at }}
	first := map[string]int64{}
	var b1, b2 digest.Batch
	for i := range 6 {
		e := entries[i]
		n := int64(max(1, len(e.History)-1))
		first[e.Key] = n
		b1.Rows = append(b1.Rows, digest.Row{Key: e.Key, From: 0, Count: n, Head: e.History[n-1].Hash, RetainUntil: retainUntil(t, lines[i])})
		if n < int64(len(e.History)) {
			m := int64(len(e.History))
			b2.Rows = append(b2.Rows, digest.Row{Key: e.Key, From: n, Count: m, Head: e.History[m-1].Hash, RetainUntil: retainUntil(t, lines[i])})
		}
	}
	b1.Positions = []digest.Position{{Shard: "shardId-00000001764493200000-0a1b2c3d", First: "100000000000000000001", Last: "100000000000000000042"}}
	b2.Positions = []digest.Position{{Shard: "shardId-00000001764493200000-0a1b2c3d", First: "100000000000000000043", Last: "100000000000000000061"}}
	b3 := digest.Batch{
		Positions: []digest.Position{{Shard: "shardId-00000001764493200000-0a1b2c3d", First: "100000000000000000062", Last: "100000000000000000062"}},
		Rows:      []digest.Row{{Key: strings.Repeat("0f", 32), From: 2, Count: 2, Head: strings.Repeat("ab", 32), RetainUntil: at.Unix() - 60, Removed: digest.RemovedTTL}},
	}
	for _, b := range []digest.Batch{b1, b2, b3} {
		at = at.Add(5 * time.Minute)
		if _, err := w.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	for seq := uint64(1); seq <= 3; seq++ {
		raw, _ := store.Get(ctx, seq)
		o, _, _ := digest.Parse(raw)
		doc.Digests = append(doc.Digests, digestVector{Seq: seq, Object: string(raw), BodySHA256: digest.Hash([]byte(o.Body))})
	}

	chain, err := digest.Load(ctx, store, signer.Verifier())
	if err != nil || len(chain.Findings) != 0 {
		t.Fatalf("%v %v", err, chain.Findings)
	}
	for i, l := range lines {
		doc.Rows = append(doc.Rows, digestRowCase{Name: rowName(t, i), ExportLine: i + 1, Findings: codes(chain.CheckRow(entries[i], at))})
		_ = l
	}
	doc.Rows = append(doc.Rows, rewrittenRowCase(t, entries[0], chain, at))

	// Tampered chains.
	raw2, _ := store.Get(ctx, 2)
	_, d2, _ := digest.Parse(raw2)
	d2.Rows = d2.Rows[1:]
	forged, _, err := digest.Seal(ctx, vectorKey(t, "attacker"), d2)
	if err != nil {
		t.Fatal(err)
	}
	o, _, _ := digest.Parse(forged)
	doc.Chains = []digestCase{
		{Name: "digest 2 replaced by one without its first row, signed with another key", Replace: &digestVector{Seq: 2, Object: string(forged), BodySHA256: digest.Hash([]byte(o.Body))}},
		{Name: "digest 2 removed", Remove: 2},
	}
	for i := range doc.Chains {
		doc.Chains[i].Findings = chainFindings(t, doc, doc.Chains[i])
	}
	doc.Missing = []missingCase{
		{Name: "the row of line 6 deleted before its retention ends", Table: []int{1, 2, 3, 4, 5}, Now: "2026-12-01T00:00:00Z", Key: entries[5].Key},
		{Name: "the row of line 6 gone after its retention ended", Table: []int{1, 2, 3, 4, 5}, Now: "2028-02-01T00:00:00Z", Key: entries[5].Key},
	}
	for i := range doc.Missing {
		doc.Missing[i].Findings = missingFindings(t, doc, doc.Missing[i])
	}
	return doc
}

// exportEntries decodes export lines into entries.
func exportEntries(t *testing.T, lines []string) []ledger.Entry {
	t.Helper()
	entries := make([]ledger.Entry, len(lines))
	for i, l := range lines {
		e, err := entryFromExport([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		entries[i] = e
	}
	return entries
}

// rewrittenRowCase is line 1's row with entry 1 rewritten and its chain
// recomputed: its own chain verifies, the digests do not.
func rewrittenRowCase(t *testing.T, rw ledger.Entry, chain *digest.Chain, at time.Time) digestRowCase {
	t.Helper()
	rw.History = slices.Clone(rw.History)
	rw.History[1].Reason = "operator decision: accepted"
	for j := 1; j < len(rw.History); j++ {
		rw.History[j].Prev = rw.History[j-1].Hash
		rw.History[j].Hash = ledger.EventHash(rw.Key, rw.History[j])
	}
	if rw.Verify() != nil {
		t.Fatal("the recomputed chain does not verify")
	}
	var line strings.Builder
	if err := json.NewEncoder(&line).Encode(newRowView(rw)); err != nil {
		t.Fatal(err)
	}
	return digestRowCase{Name: "line 1 with entry 1 rewritten and the chain recomputed (its own chain verifies)",
		Line: strings.TrimSuffix(line.String(), "\n"), Findings: codes(chain.CheckRow(rw, at))}
}

func rowName(t *testing.T, i int) string {
	var file chainDoc
	vectors.Load(t, chainFile, &file)
	if i < len(file.Rows) {
		return file.Rows[i].Name
	}
	return ""
}

// storeOf loads the digests of doc into a store, with c's tampering.
func storeOf(t *testing.T, doc digestsDoc, c digestCase) (*digest.MemStore, digest.Verifier) {
	store := digest.NewMemStore()
	for _, d := range doc.Digests {
		if d.Seq == c.Remove {
			continue
		}
		obj := d.Object
		if c.Replace != nil && c.Replace.Seq == d.Seq {
			obj = c.Replace.Object
		}
		_ = store.Put(context.Background(), d.Seq, []byte(obj), time.Time{})
	}
	v, err := digest.ParsePublicKey([]byte(doc.PublicKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return store, v
}

func chainFindings(t *testing.T, doc digestsDoc, c digestCase) []findingVector {
	store, v := storeOf(t, doc, c)
	chain, err := digest.Load(context.Background(), store, v)
	if err != nil {
		t.Fatal(err)
	}
	return codes(chain.Findings)
}

func missingFindings(t *testing.T, doc digestsDoc, m missingCase) []findingVector {
	store, v := storeOf(t, doc, digestCase{})
	chain, err := digest.Load(context.Background(), store, v)
	if err != nil {
		t.Fatal(err)
	}
	now, err := time.Parse(time.RFC3339, m.Now)
	if err != nil {
		t.Fatal(err)
	}
	lines := exportLines(t)
	for _, n := range m.Table {
		e, _ := entryFromExport([]byte(lines[n-1]))
		chain.CheckRow(e, now)
	}
	var out []digest.Finding
	for _, f := range chain.Missing(now) {
		if f.Key == m.Key {
			out = append(out, f)
		}
	}
	return codes(out)
}

// TestVectorsDigests checks testdata/vectors/digests.json against the Go
// implementation: each digest's body hash, its signature under the public
// key (checked with crypto/ecdsa directly, over the SHA-256 of the body's
// bytes), the canonical re-encoding of its body, its prev, and every
// case's findings; and that the Go implementation generates the file as it
// is (VECTORS_UPDATE=1 writes it afresh).
func TestVectorsDigests(t *testing.T) {
	vectors.Sync(t, digestsFile, generateDigests(t))
	var doc digestsDoc
	vectors.Load(t, digestsFile, &doc)
	if len(doc.Digests) != 3 || len(doc.Rows) < 12 || len(doc.Chains) < 2 || len(doc.Missing) < 2 {
		t.Fatalf("%s is incomplete", digestsFile)
	}
	blk, _ := pem.Decode([]byte(doc.PublicKeyPEM))
	pk, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub := pk.(*ecdsa.PublicKey)
	prev := ""
	for _, d := range doc.Digests {
		var o struct {
			Format, Body, Algorithm string
			Signature               []byte
		}
		if err := json.Unmarshal([]byte(d.Object), &o); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(o.Body))
		if !ecdsa.VerifyASN1(pub, sum[:], o.Signature) || o.Algorithm != "ECDSA_SHA_256" || o.Format != digest.Format {
			t.Errorf("digest %d: signature or header wrong", d.Seq)
		}
		if digest.Hash([]byte(o.Body)) != d.BodySHA256 {
			t.Errorf("digest %d: body hash", d.Seq)
		}
		var body digest.Digest
		if err := json.Unmarshal([]byte(o.Body), &body); err != nil {
			t.Fatal(err)
		}
		again, _ := body.Body()
		if string(again) != o.Body || body.Seq != d.Seq || body.Prev != prev {
			t.Errorf("digest %d: body is not canonical, or seq/prev wrong", d.Seq)
		}
		prev = d.BodySHA256
	}
	store, v := storeOf(t, doc, digestCase{})
	lines := exportLines(t)
	for _, r := range doc.Rows {
		t.Run(r.Name, func(t *testing.T) {
			chain, err := digest.Load(context.Background(), store, v)
			if err != nil {
				t.Fatal(err)
			}
			line := r.Line
			if r.ExportLine > 0 {
				line = lines[r.ExportLine-1]
			}
			e, err := entryFromExport([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			if got := codes(chain.CheckRow(e, time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC))); !slices.Equal(got, r.Findings) {
				t.Errorf("findings %v, file says %v", got, r.Findings)
			}
		})
	}
	for _, c := range doc.Chains {
		if got := chainFindings(t, doc, c); !slices.Equal(got, c.Findings) {
			t.Errorf("%s: findings %v, file says %v", c.Name, got, c.Findings)
		}
	}
	for _, m := range doc.Missing {
		if got := missingFindings(t, doc, m); !slices.Equal(got, m.Findings) {
			t.Errorf("%s: findings %v, file says %v", m.Name, got, m.Findings)
		}
	}
}
