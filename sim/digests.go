package sim

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/digest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The signed digests (docs/digests.md): every write that lands is a stream
// record; at the end of a run they are digested, as the digest function
// would, and every row is checked against the digests as ledgerctl verify
// does. A disagreement is a hash-chain violation: history that differs
// from what was signed when it was written.

// digestBatch is how many stream records one digest covers here.
const digestBatch = 20

// simSigner is the simulator's digest key: fixed, signing
// deterministically, so that a seed's run is the same every time.
var simSigner = sync.OnceValue(func() *digest.LocalSigner {
	sum := sha256.Sum256([]byte("resetledger simulator digest key"))
	k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), sum[:])
	if err != nil {
		panic(err)
	}
	return &digest.LocalSigner{ID: "local:sim", Key: k, Deterministic: true}
})

// streamed records the stream record of a write that landed.
func (s *sim) streamed(before ledger.Entry, existed bool, after ledger.Entry) {
	if !s.on(ClassChain) {
		return
	}
	r := digest.Record{Shard: "sim", Seq: fmt.Sprintf("%021d", len(s.digestRecs)+1), Key: after.Key, Event: digest.Insert, New: digest.ImageOf(after)}
	if existed {
		r.Event, r.Old = digest.Modify, digest.ImageOf(before)
	}
	s.digestRecs = append(s.digestRecs, r)
}

// checkDigests digests the run's stream records and checks every row
// against the digests; on a run the adversary tampered with (tamper.go),
// the verifier must name the tamper.
func (s *sim) checkDigests() {
	if !s.on(ClassChain) || len(s.digestRecs) == 0 {
		return
	}
	kind := s.drawTamper()
	var t tamper
	if kind == tamperRetention {
		var ok bool
		if t, ok = s.tamperTable(); !ok {
			kind = ""
		}
	}
	ctx := context.Background()
	store := digest.NewMemStore()
	w := &digest.Writer{Store: store, Signer: simSigner(), Clock: func() time.Time { return s.now }}
	for recs := s.digestRecs; len(recs) > 0; {
		b := recs[:min(len(recs), digestBatch)]
		recs = recs[len(b):]
		if _, err := w.Write(ctx, digest.Collect(b, s.now)); err != nil {
			s.fail(invHashChain, "the digests could not be written: "+err.Error())
			return
		}
	}
	rows := map[string]ledger.Entry{}
	for _, k := range s.w.keys {
		if e, ok := s.peek(k); ok {
			rows[k] = e
		}
	}
	if kind == tamperRetention {
		e := rows[t.key]
		e.RetainUntil = t.final // the table holds what the adversary wrote last
		rows[t.key] = e
	}
	var other otherTamper
	if kind != "" && kind != tamperRetention {
		var ok bool
		if other, ok = s.tamperDigests(kind, store, rows); !ok {
			kind = ""
		}
	}
	findings, err := s.verifyDigests(store, rows)
	if err != nil {
		s.fail(invHashChain, "the digests could not be read: "+err.Error())
		return
	}
	switch kind {
	case tamperRetention:
		findings = s.judgeTamper(t, findings)
	case "":
	default:
		s.judgeOther(other, findings)
		return
	}
	for _, f := range findings {
		if f.Fail {
			s.fail(invHashChain, "the stored rows disagree with the signed digests of their writes: "+f.String(), f.Key)
			return
		}
	}
}

// verifyDigests is what ledgerctl verify reports on rows against the
// digests in store.
func (s *sim) verifyDigests(store *digest.MemStore, rows map[string]ledger.Entry) ([]digest.Finding, error) {
	chain, err := digest.Load(context.Background(), store, simSigner().Verifier())
	if err != nil {
		return nil, err
	}
	findings := chain.Findings
	for _, k := range s.w.keys {
		e, ok := rows[k]
		switch {
		case !ok:
		case s.mutant == VerifyHashesOnly:
			findings = append(findings, hashesOnly(chain, e, s.now)...)
		default:
			findings = append(findings, chain.CheckRow(e, s.now)...)
		}
	}
	return append(findings, chain.Missing(s.now)...), nil
}

// hashesOnly is mutant VerifyHashesOnly's check of a row: Chain.CheckRow
// without its retention check (the verifier before Chain.checkRetention).
func hashesOnly(chain *digest.Chain, e ledger.Entry, now time.Time) []digest.Finding {
	hashes := make([]string, len(e.History))
	for i, ev := range e.History {
		hashes[i] = ev.Hash
	}
	last := e.UpdatedAt
	if len(e.History) > 0 && !e.Last().At.IsZero() {
		last = e.Last().At
	}
	return chain.CheckHashes(e.Key, hashes, last, now)
}
