package digest

import (
	"context"
	"errors"
	"fmt"
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
	// written over it later cannot mislead it.
	mine string
}

// Write signs and stores one digest for b, chained to the newest stored
// digest, and returns it.
func (w *Writer) Write(ctx context.Context, b Batch) (Digest, error) {
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
		switch {
		case seq > 0 && seq == w.latest && w.mine != "":
			prev = w.mine
		case seq > 0:
			raw, err := w.Store.Get(ctx, seq)
			if err != nil {
				return Digest{}, fmt.Errorf("digest %d: read: %w", seq, err)
			}
			o, _, err := Parse(raw)
			if err != nil {
				return Digest{}, fmt.Errorf("digest %d: %w", seq, err)
			}
			prev = Hash([]byte(o.Body))
		}
		d := Digest{Seq: seq + 1, Prev: prev, At: w.Clock().UTC(), Positions: b.Positions, Gaps: b.Gaps, Rows: b.Rows}
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
			w.latest, w.mine = d.Seq, ""
			continue
		}
		if err != nil {
			return Digest{}, fmt.Errorf("digest %d: store: %w", d.Seq, err)
		}
		w.latest, w.mine = d.Seq, hash
		return d, nil
	}
	return Digest{}, errRaced
}
