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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/vectors"
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
	ExportLine int    `json:"export_line,omitempty"`
	Line       string `json:"line,omitempty"`
	// Append are digests after digest 3 (4, 5, ...); Now is the
	// verifier's clock (default rowsNow).
	Append   []digestVector  `json:"append,omitempty"`
	Now      string          `json:"now,omitempty"`
	Findings []findingVector `json:"findings"`
}

// digestCase is the three digests tampered with: one replaced, one
// removed, digests appended, and what the bucket's listing shows besides
// (later versions, delete markers, names under digests/ that are not
// digest names); checked at Now (default rowsNow).
type digestCase struct {
	Name          string          `json:"name"`
	Replace       *digestVector   `json:"replace,omitempty"`
	Remove        uint64          `json:"remove,omitempty"`
	Append        []digestVector  `json:"append,omitempty"`
	LaterVersions map[string]int  `json:"later_versions,omitempty"`
	DeleteMarkers []uint64        `json:"delete_markers,omitempty"`
	Foreign       []string        `json:"foreign,omitempty"`
	Now           string          `json:"now,omitempty"`
	Findings      []findingVector `json:"findings"`
}

type missingCase struct {
	Name string `json:"name"`
	// Table lists the export.jsonl lines the table holds.
	Table    []int           `json:"table"`
	Append   []digestVector  `json:"append,omitempty"`
	Now      string          `json:"now"`
	Key      string          `json:"key"`
	Findings []findingVector `json:"findings"`
}

// rowsNow is the verifier's clock where a case names none: five minutes
// after digest 3.
const rowsNow = "2026-11-30T09:30:00Z"

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
// deleted row. It is long because it is the vectors' one generator, a case
// per finding code, in the order the vectors file lists them.
func generateDigests(t *testing.T) digestsDoc {
	ctx := context.Background()
	lines := exportLines(t)
	signer := vectorKey(t, "digest")
	der, _ := x509.MarshalPKIXPublicKey(&signer.Key.PublicKey)
	doc := digestsDoc{
		Description: "Signed digests over the untouched rows of export.jsonl (lines 1-6), the public key, and what a verifier " +
			"finds (docs/digests.md §3, §4; codes in §7): per export line and per row made from one (rows), per tampered digest " +
			"chain (chain_cases: digests replaced, removed or appended, and what the bucket's listing shows besides), and per " +
			"row missing from the table (missing_cases). Every finding code is reached by some case. A case's now is the " +
			"verifier's clock (default 2026-11-30T09:30:00Z) with the default bounds (stale after 15 minutes, skew 5 minutes). " +
			"The vectors are signed deterministically (RFC 6979); KMS signatures are not.",
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
	for i := range lines {
		doc.Rows = append(doc.Rows, digestRowCase{Name: rowName(t, i), ExportLine: i + 1})
	}
	doc.Rows = append(doc.Rows, rewrittenRowCase(t, entries[0]))
	doc.Rows = append(doc.Rows, moreRowCases(t, doc, signer, entries)...)
	for i := range doc.Rows {
		doc.Rows[i].Findings = rowFindings(t, doc, doc.Rows[i])
	}

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
	doc.Chains = append(doc.Chains, moreChainCases(t, doc, signer, entries, lines)...)
	for i := range doc.Chains {
		doc.Chains[i].Findings = chainFindings(t, doc, doc.Chains[i])
	}
	doc.Missing = []missingCase{
		{Name: "the row of line 6 deleted before its retention ends", Table: []int{1, 2, 3, 4, 5}, Now: "2026-12-01T00:00:00Z", Key: entries[5].Key},
		{Name: "the row of line 6 gone after its retention ended", Table: []int{1, 2, 3, 4, 5}, Now: "2028-02-01T00:00:00Z", Key: entries[5].Key},
		{Name: "a row digest 3 records removed by the TTL after its retention", Table: []int{1, 2, 3, 4, 5, 6}, Now: rowsNow, Key: strings.Repeat("0f", 32)},
	}
	removed := digest.Row{Key: entries[5].Key, From: int64(len(entries[5].History)), Count: int64(len(entries[5].History)),
		Head: entries[5].Last().Hash, RetainUntil: retainUntil(t, lines[5]), Removed: digest.RemovedDelete}
	deleted := appendDigests(t, doc, signer, digest.Digest{Rows: []digest.Row{removed}})
	late := removed
	late.Removed = digest.RemovedTTL
	doc.Missing = append(doc.Missing,
		missingCase{Name: "digest 4 records the row of line 6 removed by a DeleteItem, before its retention", Table: []int{1, 2, 3, 4, 5}, Now: rowsNow, Key: entries[5].Key, Append: deleted},
		missingCase{Name: "digest 4 records the row of line 6 deleted; digest 5 records it removed by the TTL after its retention: the earliest removal is judged",
			Table: []int{1, 2, 3, 4, 5}, Now: "2028-02-01T00:00:00Z", Key: entries[5].Key,
			Append: appendDigests(t, doc, signer, digest.Digest{Rows: []digest.Row{removed}}, digest.Digest{At: time.Date(2028, 1, 31, 0, 0, 0, 0, time.UTC), Rows: []digest.Row{late}})},
	)
	for i := range doc.Missing {
		doc.Missing[i].Findings = missingFindings(t, doc, doc.Missing[i])
	}
	return doc
}

// appendDigests signs ds as digests 4, 5, ... after the three of doc: a
// zero Seq, Prev or At is filled in (the next number; the previous body's
// hash; two minutes after the previous digest).
func appendDigests(t *testing.T, doc digestsDoc, signer *digest.LocalSigner, ds ...digest.Digest) []digestVector {
	t.Helper()
	var out []digestVector
	prev := doc.Digests[len(doc.Digests)-1]
	_, last, err := digest.Parse([]byte(prev.Object))
	if err != nil {
		t.Fatal(err)
	}
	hash, at := prev.BodySHA256, last.At
	for i, d := range ds {
		seq := uint64(len(doc.Digests) + 1 + i)
		if d.Seq == 0 {
			d.Seq = seq
		}
		if d.Prev == "" {
			d.Prev = hash
		}
		if d.At.IsZero() {
			d.At = at.Add(2 * time.Minute)
		}
		raw, h, err := digest.Seal(context.Background(), signer, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, digestVector{Seq: seq, Object: string(raw), BodySHA256: h})
		hash, at = h, d.At
	}
	return out
}

// moreChainCases are the chain cases of every finding code of §3 but
// missing and signature.
func moreChainCases(t *testing.T, doc digestsDoc, signer *digest.LocalSigner, entries []ledger.Entry, lines []string) []digestCase {
	app := func(ds ...digest.Digest) []digestVector { return appendDigests(t, doc, signer, ds...) }
	e := entries[0]
	n := int64(len(e.History))
	row := digest.Row{Key: e.Key, From: n, Count: n, Head: e.Last().Hash, RetainUntil: retainUntil(t, lines[0])}
	lost := row
	lost.From, lost.Count = n+1, n+2
	short := row
	short.RetainUntil -= 30 * 24 * 3600
	empty := digest.Row{Key: e.Key, From: 0, Count: 0, Head: ""}
	otherAlg := app(digest.Digest{})
	otherAlg[0].Object = strings.Replace(otherAlg[0].Object, `"algorithm":"ECDSA_SHA_256"`, `"algorithm":"ECDSA_SHA_384"`, 1)
	wrongPrev := app(digest.Digest{Prev: strings.Repeat("00", 32)})
	return []digestCase{
		{Name: "digest 4 names another signing algorithm", Append: otherAlg},
		{Name: "digest 4's body says it is digest 5", Append: app(digest.Digest{Seq: 5})},
		{Name: "digest 4 records a row with no entries", Append: app(digest.Digest{Rows: []digest.Row{empty}})},
		{Name: "digest 4 records one key twice", Append: app(digest.Digest{Rows: []digest.Row{row, row}})},
		{Name: "digest 4's prev is not digest 3's body hash", Append: wrongPrev},
		{Name: "digest 4 is dated before digest 3", Append: app(digest.Digest{At: time.Date(2026, 11, 30, 9, 20, 0, 0, time.UTC)})},
		{Name: "digest 4 is dated an hour after the verifier's clock", Append: app(digest.Digest{At: time.Date(2026, 11, 30, 10, 30, 0, 0, time.UTC)})},
		{Name: "the newest digest, 3, is 16 minutes old: past the bound for the default interval (15 minutes)", Now: "2026-11-30T09:41:00Z"},
		{Name: "the newest digest is a heartbeat (no rows) 2 minutes old: not stale", Append: app(digest.Digest{At: time.Date(2026, 11, 30, 9, 39, 0, 0, time.UTC)}), Now: "2026-11-30T09:41:00Z"},
		{Name: "a later version written over digest 2", LaterVersions: map[string]int{"2": 1}},
		{Name: "a delete marker over digest 3", DeleteMarkers: []uint64{3}},
		{Name: "objects under digests/ that are not digest names", Foreign: []string{"digests/00000000000000000004.json.tmp", "digests/4.json"}},
		{Name: "digest 4 records a gap", Append: app(digest.Digest{Gaps: []digest.Gap{{Kind: digest.GapAge, Shard: "shardId-00000001764493200000-0a1b2c3d", Detail: "record 100000000000000000063 was 25h0m0s old when read"}}})},
		{Name: "digest 4 records line 1's row from an entry count digest 2 did not leave", Append: app(digest.Digest{Rows: []digest.Row{lost}})},
		{Name: "digest 4 records line 1's row with its retention 30 days earlier", Append: app(digest.Digest{Rows: []digest.Row{short}})},
	}
}

// moreRowCases are the row cases of every finding code of §4 the export
// lines do not reach.
func moreRowCases(t *testing.T, doc digestsDoc, signer *digest.LocalSigner, entries []ledger.Entry) []digestRowCase {
	enc := func(e ledger.Entry) string {
		var b strings.Builder
		if err := json.NewEncoder(&b).Encode(newRowView(e)); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(b.String(), "\n")
	}
	cut := entries[0]
	cut.History = cut.History[:2]
	grown := entries[0]
	grown.History = slices.Clone(grown.History)
	next := grown.History[len(grown.History)-1]
	next.From, next.Reason, next.At = next.To, "a later write", time.Date(2026, 11, 30, 9, 30, 0, 0, time.UTC)
	next.Prev = grown.History[len(grown.History)-1].Hash
	next.Hash = ledger.EventHash(grown.Key, next)
	grown.History = append(grown.History, next)
	e5 := entries[4]
	n5 := int64(len(e5.History))
	removed := digest.Row{Key: e5.Key, From: n5, Count: n5, Head: e5.Last().Hash, RetainUntil: retainUntil(t, exportLines(t)[4]), Removed: digest.RemovedDelete}
	bad := strings.Replace(exportLines(t)[5], `"at":"`, `"at":"not a time`, 1)
	return []digestRowCase{
		{Name: "line 1 cut to its first 2 entries", Line: enc(cut)},
		{Name: "line 1 with one more entry, written at 09:30, checked at 09:35: pending", Line: enc(grown), Now: "2026-11-30T09:35:00Z"},
		{Name: "line 1 with one more entry, written at 09:30, checked at 09:46: pending past the bound", Line: enc(grown), Now: "2026-11-30T09:46:00Z"},
		{Name: "line 5, after digest 4 recorded its row deleted", ExportLine: 5, Append: appendDigests(t, doc, signer, digest.Digest{Rows: []digest.Row{removed}})},
		{Name: "line 6 with an entry's at that is not a time", Line: bad},
	}
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
func rewrittenRowCase(t *testing.T, rw ledger.Entry) digestRowCase {
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
		Line: strings.TrimSuffix(line.String(), "\n")}
}

func rowName(t *testing.T, i int) string {
	var file chainDoc
	vectors.Load(t, chainFile, &file)
	if i < len(file.Rows) {
		return file.Rows[i].Name
	}
	return ""
}

// vectorStore is the digests of a case as a bucket lists them.
type vectorStore struct {
	*digest.MemStore
	later map[uint64]int
}

// Overwritten implements digest.Overwrites.
func (v vectorStore) Overwritten() map[uint64]int { return v.later }

// storeOf loads the digests of doc into a store, with c's tampering.
func storeOf(t *testing.T, doc digestsDoc, c digestCase) (vectorStore, digest.Verifier) {
	store := vectorStore{MemStore: digest.NewMemStore(), later: map[uint64]int{}}
	for _, d := range append(slices.Clone(doc.Digests), c.Append...) {
		if d.Seq == c.Remove {
			continue
		}
		obj := d.Object
		if c.Replace != nil && c.Replace.Seq == d.Seq {
			obj = c.Replace.Object
		}
		_ = store.Put(context.Background(), d.Seq, []byte(obj), time.Time{})
	}
	for k, n := range c.LaterVersions {
		seq, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		store.later[seq] = n
	}
	for _, seq := range c.DeleteMarkers {
		store.MarkDeleted(seq)
	}
	for _, name := range c.Foreign {
		store.AddForeign(name)
	}
	v, err := digest.ParsePublicKey([]byte(doc.PublicKeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	return store, v
}

func vectorTime(t *testing.T, s string) time.Time {
	if s == "" {
		s = rowsNow
	}
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// loadCase loads the chain of case c as a verifier does at its Now.
func loadCase(t *testing.T, doc digestsDoc, c digestCase) *digest.Chain {
	store, v := storeOf(t, doc, c)
	chain, err := digest.LoadWith(context.Background(), store, v, digest.Options{Now: vectorTime(t, c.Now)})
	if err != nil {
		t.Fatal(err)
	}
	return chain
}

func chainFindings(t *testing.T, doc digestsDoc, c digestCase) []findingVector {
	return codes(loadCase(t, doc, c).Findings)
}

// rowFindings checks one row case: an export line that is not a row is
// malformed-row; any other is checked against the digests.
func rowFindings(t *testing.T, doc digestsDoc, r digestRowCase) []findingVector {
	line := r.Line
	if r.ExportLine > 0 {
		line = exportLines(t)[r.ExportLine-1]
	}
	chain := loadCase(t, doc, digestCase{Append: r.Append, Now: r.Now})
	e, err := entryFromExport([]byte(line))
	if err != nil {
		return []findingVector{{Code: digest.CodeMalformedRow}}
	}
	return codes(chain.CheckRow(e, vectorTime(t, r.Now)))
}

func missingFindings(t *testing.T, doc digestsDoc, m missingCase) []findingVector {
	now := vectorTime(t, m.Now)
	chain := loadCase(t, doc, digestCase{Append: m.Append, Now: m.Now})
	lines := exportLines(t)
	for _, n := range m.Table {
		e, _ := entryFromExport([]byte(lines[n-1]))
		chain.CheckRow(e, now)
	}
	return codes(chain.CheckAbsent(m.Key, now))
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
	if len(doc.Digests) != 3 || len(doc.Rows) < 17 || len(doc.Chains) < 17 || len(doc.Missing) < 5 {
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
	seen := map[string]bool{}
	for _, r := range doc.Rows {
		t.Run(r.Name, func(t *testing.T) {
			if got := rowFindings(t, doc, r); !slices.Equal(got, r.Findings) {
				t.Errorf("findings %v, file says %v", got, r.Findings)
			}
		})
		for _, f := range r.Findings {
			seen[f.Code] = true
		}
	}
	for _, c := range doc.Chains {
		if got := chainFindings(t, doc, c); !slices.Equal(got, c.Findings) {
			t.Errorf("%s: findings %v, file says %v", c.Name, got, c.Findings)
		}
		for _, f := range c.Findings {
			seen[f.Code] = true
		}
	}
	for _, m := range doc.Missing {
		if got := missingFindings(t, doc, m); !slices.Equal(got, m.Findings) {
			t.Errorf("%s: findings %v, file says %v", m.Name, got, m.Findings)
		}
		for _, f := range m.Findings {
			seen[f.Code] = true
		}
	}
	// A vector for every finding code (docs/digests.md §7).
	for _, code := range digest.Codes {
		if !seen[code] {
			t.Errorf("no vector reaches the finding %s", code)
		}
	}
}
