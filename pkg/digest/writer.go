package digest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Batch is what one digest covers: the rows changed in a run of stream
// records, the ranges read, and the gaps found.
type Batch struct {
	Rows      []Row
	Positions []Position
	Gaps      []Gap
}

// Writer appends digests to the chain. Several writers (one per stream
// shard) may run at once: each takes the next number with a conditional
// write, and one that loses re-reads the head and signs again.
type Writer struct {
	Store  Store
	Signer Signer
	Clock  func() time.Time
	// Retention is how long each digest is locked at least; a digest is
	// also locked until the latest RetainUntil of the rows it records.
	Retention time.Duration
	// MaxRaces bounds the retries after lost races (default 16).
	MaxRaces int

	latest uint64 // a number known taken: a hint for Latest
	// mine is the body hash of digest latest when this writer wrote it
	// ("" otherwise): its own digest need not be read back, and a version
	// written over it later cannot mislead it. minePositions are its
	// positions.
	mine          string
	minePositions []Position
	mineAt        time.Time
}

// ErrDigested: the newest digest covers exactly the batch's stream ranges,
// so the batch is digested already (an invocation that stored its digest
// and failed after it, retried by the event source; or the same records
// handed again). Write writes nothing for it: a second digest of the same
// records would read as records lost between the two.
var ErrDigested = errors.New("digest: the batch is digested already")

// Write signs and stores one digest for b, chained to the newest stored
// digest, and returns it.
func (w *Writer) Write(ctx context.Context, b Batch) (Digest, error) {
	return w.write(ctx, b, func(seq uint64, newest []Position, _ time.Time) error {
		// Positions name a shard and the first and last sequence numbers
		// of a run of its records; sequence numbers are unique in a
		// stream, so equal positions are the same records.
		if len(b.Positions) > 0 && slices.Equal(newest, b.Positions) {
			return fmt.Errorf("digest %d covers the same records: %w", seq, ErrDigested)
		}
		return nil
	})
}

// ErrFresh: the newest digest is younger than the heartbeat's bound, so
// Heartbeat writes nothing.
var ErrFresh = errors.New("digest: the newest digest is recent")

// Heartbeat writes a digest of no rows (no positions, no gaps), chained to
// the newest, if the newest digest was made more than olderThan ago (or
// there is none), so that digests keep arriving while the table is quiet
// and a verifier can tell "nothing happened" from "the digests stopped".
// It returns ErrFresh, writing nothing, if the newest is younger. Racing
// another writer is safe: the conditional put lets one digest take each
// number, and one that loses re-reads the newest and asks again.
func (w *Writer) Heartbeat(ctx context.Context, olderThan time.Duration) (Digest, error) {
	return w.write(ctx, Batch{}, func(seq uint64, _ []Position, at time.Time) error {
		if age := w.Clock().Sub(at); seq > 0 && age <= olderThan {
			return fmt.Errorf("digest %d is %s old: %w", seq, age.Truncate(time.Second), ErrFresh)
		}
		return nil
	})
}

// write signs and stores one digest for b, chained to the newest, unless
// skip, given the newest's number, positions and time, says not to.
func (w *Writer) write(ctx context.Context, b Batch, skip func(seq uint64, newest []Position, at time.Time) error) (Digest, error) {
	races := w.MaxRaces
	if races <= 0 {
		races = 16
	}
	for range races {
		seq, err := Latest(ctx, w.Store, w.latest)
		if err != nil {
			return Digest{}, fmt.Errorf("digest: find the newest: %w", err)
		}
		prev := ""
		var newest []Position
		var newestAt time.Time
		switch {
		case seq > 0 && seq == w.latest && w.mine != "":
			prev, newest, newestAt = w.mine, w.minePositions, w.mineAt
		case seq > 0:
			raw, err := w.Store.Get(ctx, seq)
			if err != nil {
				return Digest{}, fmt.Errorf("digest %d: read: %w", seq, err)
			}
			o, last, err := Parse(raw)
			if err != nil {
				return Digest{}, fmt.Errorf("digest %d: %w", seq, err)
			}
			prev, newest, newestAt = Hash([]byte(o.Body)), last.Positions, last.At
		}
		if err := skip(seq, newest, newestAt); err != nil {
			return Digest{}, err
		}
		// at never decreases along the chain: a verifier reports one that
		// does (at-decreased), and writers' clocks differ by milliseconds.
		at := w.Clock().UTC()
		if at.Before(newestAt) {
			at = newestAt.UTC()
		}
		d := Digest{Seq: seq + 1, Prev: prev, At: at, Positions: b.Positions, Gaps: b.Gaps, Rows: b.Rows}
		raw, hash, err := Seal(ctx, w.Signer, d)
		if err != nil {
			return Digest{}, err
		}
		until := d.At.Add(w.Retention)
		for _, r := range b.Rows {
			if t := time.Unix(r.RetainUntil, 0); t.After(until) {
				until = t
			}
		}
		err = w.Store.Put(ctx, d.Seq, raw, until)
		if errors.Is(err, ErrExists) {
			w.latest, w.mine, w.minePositions, w.mineAt = d.Seq, "", nil, time.Time{}
			continue
		}
		if err != nil {
			return Digest{}, fmt.Errorf("digest %d: store: %w", d.Seq, err)
		}
		w.latest, w.mine, w.minePositions, w.mineAt = d.Seq, hash, slices.Clone(b.Positions), d.At
		return d, nil
	}
	return Digest{}, errRaced
}
