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
const digestBatch = 50

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
// against the digests.
func (s *sim) checkDigests() {
	if !s.on(ClassChain) || len(s.digestRecs) == 0 {
		return
	}
	t, tampered := s.tamperTable()
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
	chain, err := digest.Load(ctx, store, simSigner().Verifier())
	if err != nil {
		s.fail(invHashChain, "the digests could not be read: "+err.Error())
		return
	}
	findings := chain.Findings
	for _, k := range s.w.keys {
		if e, ok := s.peek(k); ok {
			if tampered && k == t.key {
				e.RetainUntil = t.final // the table holds what the adversary wrote last
			}
			findings = append(findings, chain.CheckRow(e, s.now)...)
		}
	}
	findings = append(findings, chain.Missing(s.now)...)
	if tampered {
		findings = s.judgeTamper(t, findings)
	}
	for _, f := range findings {
		if f.Fail {
			s.fail(invHashChain, "the stored rows disagree with the signed digests of their writes: "+f.String(), f.Key)
			return
		}
	}
}
