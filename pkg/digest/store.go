package digest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Store keeps digest objects by sequence number. Implementations must make
// Put a conditional write in the storage itself (S3 If-None-Match: *), so
// two writers racing for one number cannot both win and no digest is ever
// overwritten, and must keep each object at least until retainUntil
// (S3 Object Lock in COMPLIANCE mode).
type Store interface {
	// Put stores raw as digest seq unless one is stored, in which case it
	// returns an error wrapping ErrExists.
	Put(ctx context.Context, seq uint64, raw []byte, retainUntil time.Time) error
	// Get returns digest seq, or an error wrapping ErrNotFound.
	Get(ctx context.Context, seq uint64) ([]byte, error)
	// Exists reports whether digest seq is stored.
	Exists(ctx context.Context, seq uint64) (bool, error)
	// List returns the sequence numbers of every stored digest, ascending.
	List(ctx context.Context) ([]uint64, error)
}

// Latest returns the highest stored sequence number (0 if none), assuming
// numbers 1..n are taken (the writer only ever takes the next one), with
// O(log n) Exists calls starting from hint (a number known to be taken,
// or 0).
func Latest(ctx context.Context, s Store, hint uint64) (uint64, error) {
	lo := hint // known taken (or 0)
	step := uint64(1)
	hi := lo + step
	for {
		ok, err := s.Exists(ctx, hi)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		lo, step = hi, step*2
		hi = lo + step
	}
	// lo taken (or 0), hi free: the answer is in [lo, hi).
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		ok, err := s.Exists(ctx, mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// MemStore is an in-memory Store for tests and the simulator. Delete and
// Replace stand in for what Object Lock prevents, so tests can show that
// verify finds it.
type MemStore struct {
	mu      sync.Mutex
	objs    map[uint64][]byte
	foreign []string
	marked  map[uint64]int
	// Puts counts Put calls that wrote.
	Puts int
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{objs: map[uint64][]byte{}} }

// Put implements Store.
func (m *MemStore) Put(_ context.Context, seq uint64, raw []byte, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[seq]; ok {
		return fmt.Errorf("digest %d: %w", seq, ErrExists)
	}
	m.objs[seq] = slices.Clone(raw)
	m.Puts++
	return nil
}

// Get implements Store.
func (m *MemStore) Get(_ context.Context, seq uint64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.objs[seq]
	if !ok {
		return nil, fmt.Errorf("digest %d: %w", seq, ErrNotFound)
	}
	return slices.Clone(raw), nil
}

// Exists implements Store.
func (m *MemStore) Exists(_ context.Context, seq uint64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objs[seq]
	return ok, nil
}

// List implements Store.
func (m *MemStore) List(context.Context) ([]uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []uint64
	for k := range m.objs {
		out = append(out, k)
	}
	slices.Sort(out)
	return out, nil
}

// Delete removes digest seq (what Object Lock forbids): for tamper tests.
func (m *MemStore) Delete(seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, seq)
}

// Replace overwrites digest seq (what Object Lock forbids): for tamper tests.
func (m *MemStore) Replace(seq uint64, raw []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[seq] = slices.Clone(raw)
}

// AddForeign records an object under digests/ that is not a digest name:
// for tests of what verify finds.
func (m *MemStore) AddForeign(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.foreign = append(m.foreign, name)
}

// MarkDeleted records a delete marker put over digest seq (the digest's
// version stays, as Object Lock keeps it): for tests of what verify finds.
func (m *MemStore) MarkDeleted(seq uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.marked == nil {
		m.marked = map[uint64]int{}
	}
	m.marked[seq]++
}

// Foreign implements Anomalies.
func (m *MemStore) Foreign() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.foreign)
}

// DeleteMarked implements Anomalies.
func (m *MemStore) DeleteMarked() map[uint64]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[uint64]int, len(m.marked))
	for k, v := range m.marked {
		out[k] = v
	}
	return out
}

// errRaced is returned after too many lost races for the next number.
var errRaced = errors.New("digest: lost the race for the next sequence number too often")
