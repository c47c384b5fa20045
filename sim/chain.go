package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strconv"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Every chain verified at every step (ClassChain). The simulator verifies
// history chains with a verifier of its own, written from the export's
// specification (docs/intent-v2.md, part 2), not with ledger.EventHash or
// Entry.Verify: a field the ledger forgets to hash, or hashes for one kind
// of entry and not another (deferrals carry a not-sent code and a next
// attempt time, provider events a type, detail, time and permanence), is a
// broken chain here. It verifies every row a write left and every row a
// read returned to a use case (a store read, a list, the row a write or a
// conflict answered with, a stream record's image), every entry of it, in
// the step it happened: evidence that reads back other than it was written
// is broken evidence, whatever the stored bytes hold.

// specHash is the hash of history entry ev of the row key (§2.2):
// SHA-256 over length-prefixed fields, hex-encoded.
func specHash(key string, ev ledger.Event) string {
	h := sha256.New()
	for _, f := range []string{
		"ledger-event-v1", key, ev.Prev, ev.ID, string(ev.Kind), string(ev.From), string(ev.To),
		specTime(ev.At), ev.Worker, ev.Reason, ev.PolicyVersion, strconv.Itoa(ev.Attempt), ev.AckID, ev.ContentHash,
	} {
		specField(h, f)
	}
	// A not-sent code and a next attempt time, both, when either is there.
	if ev.Code != "" || !ev.NextAttemptAt.IsZero() {
		specField(h, ev.Code)
		specField(h, specTime(ev.NextAttemptAt))
	}
	// A provider event's fields, all of them, when any is there.
	if ev.ProviderType != "" || ev.Detail != "" || !ev.ProviderAt.IsZero() || ev.Permanent {
		for _, f := range []string{"provider-event", ev.ProviderType, ev.Detail, specTime(ev.ProviderAt), strconv.FormatBool(ev.Permanent)} {
			specField(h, f)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// specField writes N(f): the byte length in decimal, a colon, the bytes.
func specField(h hash.Hash, f string) {
	h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
}

// specTime is a time as exported: RFC 3339 in UTC, the fraction trimmed of
// trailing zeros; an absent time is 0001-01-01T00:00:00Z.
func specTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// verifyChain verifies the row e as §2.3 says: every entry's link and hash,
// one entry per write, and the last entry reaching the row's state. It
// returns the first failure. verified holds the entries of e verified
// before (the same row, as last verified): an entry equal to the one
// verified at its place, following a verified link, is not hashed again.
func verifyChain(e ledger.Entry, verified []ledger.Event) error {
	broken := func(i int, format string, a ...any) error {
		return fmt.Errorf("history broken at entry %d: %s", i, fmt.Sprintf(format, a...))
	}
	prev := ""
	for i, ev := range e.History {
		if ev.Prev != prev {
			return broken(i, "its link is not the previous entry's hash (removed or reordered)")
		}
		if (i >= len(verified) || verified[i] != ev) && specHash(e.Key, ev) != ev.Hash {
			return broken(i, "its %s entry does not match its hash (edited)", ev.Kind)
		}
		prev = ev.Hash
	}
	if n := int64(len(e.History)); n != e.Version {
		return broken(int(min(n, e.Version)), "%d entries but the row is at version %d", n, e.Version)
	}
	if n := len(e.History); n > 0 && e.History[n-1].To != e.State {
		return broken(n-1, "it ends in %s but the row is %s", e.History[n-1].To, e.State)
	}
	return nil
}

// checkChain verifies the row e that a write left or a read returned
// (where says which, and to whom) with the simulator's verifier, and
// remembers it as verified. It reports whether the chain verified.
func (s *sim) checkChain(e ledger.Entry, where string) bool {
	if e.Key == "" || !s.on(ClassChain) {
		return true
	}
	if err := verifyChain(e, s.verified[e.Key]); err != nil {
		s.fail(invHashChain, fmt.Sprintf("row %s %s: %v", s.label(e.Key), where, err), e.Key)
		return false
	}
	s.verified[e.Key] = e.History
	return true
}

// chainPaths counts a written row whose verified chain holds deferral or
// provider-event entries (the entries with fields of their own).
func (s *sim) chainPaths(e ledger.Entry) {
	var deferral, provider bool
	for _, ev := range e.History {
		deferral = deferral || ev.Code != "" || !ev.NextAttemptAt.IsZero()
		provider = provider || ev.Kind.Provider()
	}
	if deferral {
		s.stats.Paths[pathChainDeferral]++
	}
	if provider {
		s.stats.Paths[pathChainProvider]++
	}
}

// checkChains verifies every stored row (at the end of a run).
func (s *sim) checkChains() {
	for _, k := range s.w.keys {
		if e, ok := s.peek(k); ok {
			s.checkChain(e, "as stored at the end of the run")
		}
	}
}

// decoded is the row e as the store's reads return it (a mutant's decoder).
func (s *sim) decoded(e ledger.Entry) ledger.Entry {
	if s.mutant != EntryCodeFromRow || e.Key == "" {
		return e
	}
	h := make([]ledger.Event, len(e.History))
	for i, ev := range e.History {
		if ev.Code != "" || !ev.NextAttemptAt.IsZero() {
			ev.Code = e.NotSentCode
		}
		h[i] = ev
	}
	e.History = h
	return e
}

// read is a row a store read returned to inv: decoded by the store, then
// verified.
func (s *sim) read(inv *invocation, e ledger.Entry, how string) ledger.Entry {
	e = s.decoded(e)
	s.checkChain(e, "as "+how+" returned it to "+inv.String())
	return e
}
