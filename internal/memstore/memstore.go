// Package memstore is an in-memory ledger.Store and ledger.ContentStore for
// fast tests. It passes the same contract suite (package ledgertest) as the
// DynamoDB store. A mutex stands in for the database's conditional writes.
package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Store is an in-memory ledger.Store. The zero value is ready to use.
type Store struct {
	mu   sync.Mutex
	rows map[string]ledger.Entry
}

var _ ledger.Store = (*Store)(nil)

func clone(e ledger.Entry) ledger.Entry {
	e.History = slices.Clone(e.History)
	e.Workflow.Order = slices.Clone(e.Workflow.Order)
	return e
}

// Create implements ledger.Store.
func (s *Store) Create(_ context.Context, e ledger.Entry) (ledger.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows == nil {
		s.rows = map[string]ledger.Entry{}
	}
	if old, ok := s.rows[e.Key]; ok {
		if len(e.History) > 0 && old.Holds(e.History[0].ID) {
			return clone(old), nil // the same create, repeated
		}
		return clone(old), fmt.Errorf("create %s: %w", e.Key, ledger.ErrConflict)
	}
	s.rows[e.Key] = clone(e)
	return clone(e), nil
}

// Get implements ledger.Store.
func (s *Store) Get(_ context.Context, key string) (ledger.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.rows[key]
	if !ok {
		return ledger.Entry{}, fmt.Errorf("get %s: %w", key, ledger.ErrNotFound)
	}
	return clone(e), nil
}

// Apply implements ledger.Store.
func (s *Store) Apply(_ context.Context, c ledger.Change) (ledger.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.rows[c.Next.Key]
	if !ok {
		return ledger.Entry{}, fmt.Errorf("apply %s: %w", c.Next.Key, ledger.ErrNotFound)
	}
	if cur.Holds(c.Event.ID) {
		return clone(cur), nil // the same change, repeated
	}
	if cur.State != c.From || cur.Version != c.Version {
		return clone(cur), fmt.Errorf("apply %s: %w", c.Next.Key, ledger.ErrConflict)
	}
	if !c.NotExpiredBy.IsZero() && !cur.ExpiresAt.After(c.NotExpiredBy) {
		return clone(cur), fmt.Errorf("apply %s: expiry condition: %w", c.Next.Key, ledger.ErrConflict)
	}
	// Like the DynamoDB store, only the event is appended: the stored
	// history is never rewritten from the caller's copy.
	next := clone(c.Next)
	next.History = append(slices.Clone(cur.History), c.Event)
	s.rows[c.Next.Key] = next
	return clone(next), nil
}

// ListOpen implements ledger.Store.
func (s *Store) ListOpen(_ context.Context, st ledger.State, dueBy time.Time, limit int) ([]ledger.Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ledger.Entry
	for _, e := range s.rows {
		if e.State != st || !st.Open() {
			continue
		}
		if !dueBy.IsZero() && e.OpenDue().After(dueBy) {
			continue
		}
		out = append(out, clone(e))
	}
	// Oldest due first; equal due times by key, so a listing never depends
	// on map order (the simulator replays runs byte for byte).
	slices.SortFunc(out, func(a, b ledger.Entry) int {
		if c := a.OpenDue().Compare(b.OpenDue()); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DueTimes implements ledger.Store.
func (s *Store) DueTimes(ctx context.Context, st ledger.State, dueBy time.Time) ([]time.Time, error) {
	rows, err := s.ListOpen(ctx, st, dueBy, 0)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(rows))
	for i, e := range rows {
		out[i] = e.OpenDue()
	}
	return out, nil
}

// ListExpired implements ledger.Store.
func (s *Store) ListExpired(_ context.Context, st ledger.State, by time.Time, limit int) ([]ledger.Entry, error) {
	if st != ledger.Held && st != ledger.Claimed {
		return nil, fmt.Errorf("list expired %s: not a state that waits for its expiry", st)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ledger.Entry
	for _, e := range s.rows {
		if e.State == st && !e.ExpiresAt.After(by) {
			out = append(out, clone(e))
		}
	}
	slices.SortFunc(out, func(a, b ledger.Entry) int {
		if c := a.ExpiresAt.Compare(b.ExpiresAt); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Expiries implements ledger.Store.
func (s *Store) Expiries(ctx context.Context, st ledger.State, by time.Time) ([]time.Time, error) {
	rows, err := s.ListExpired(ctx, st, by, 0)
	if err != nil {
		return nil, err
	}
	out := make([]time.Time, len(rows))
	for i, e := range rows {
		out[i] = e.ExpiresAt
	}
	return out, nil
}

// Content is an in-memory ledger.ContentStore. The zero value is ready to use.
type Content struct {
	mu    sync.Mutex
	blobs map[string][]byte
}

var _ ledger.ContentStore = (*Content)(nil)

// Put implements ledger.ContentStore.
func (c *Content) Put(_ context.Context, key string, sealed []byte, _ time.Time) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blobs == nil {
		c.blobs = map[string][]byte{}
	}
	if _, ok := c.blobs[key]; ok {
		return false, nil
	}
	c.blobs[key] = slices.Clone(sealed)
	return true, nil
}

// Get implements ledger.ContentStore.
func (c *Content) Get(_ context.Context, key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.blobs[key]
	if !ok {
		return nil, fmt.Errorf("content %s: %w", key, ledger.ErrNotFound)
	}
	return slices.Clone(b), nil
}

// Delete implements ledger.ContentStore.
func (c *Content) Delete(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.blobs, key)
	return nil
}

// Len returns how many blobs are stored.
func (c *Content) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.blobs)
}
