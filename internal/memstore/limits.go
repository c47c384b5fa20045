package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Limits is an in-memory ledger.Limiter and ledger.Challenges for tests: the
// same rules as the DynamoDB one (see dynamostore.Limits), under a mutex.
// It keeps each counter by its ledger.CounterID, where the DynamoDB store
// keeps a rule and key's counters as attributes of one item and removes
// those no worker reads any more: the same counts, read and released alike
// (ledgertest.RunLimitsContract holds both to it), and the form the
// simulator judges.
type Limits struct {
	// ItemsOf returns the counter items an admission counts in; nil is
	// ledger.Counters. A simulator sets it to plant a store's fault (fixed
	// windows) and see the ledger's checks catch it.
	ItemsOf func(c ledger.Count, now time.Time) []ledger.Counter

	mu       sync.Mutex
	counters map[string]int
	counted  map[string]admission
	newest   map[ledger.SubjectStream]ledger.Challenge
}

// admission is what a counted message holds: the counters it counted in,
// in their windows, and when.
type admission struct {
	ids []string
	at  time.Time
}

var (
	_ ledger.Limiter    = (*Limits)(nil)
	_ ledger.Challenges = (*Limits)(nil)
)

// Admit implements ledger.Limiter.
func (l *Limits) Admit(_ context.Context, key string, counts []ledger.Count, now, _ time.Time) (ledger.Admission, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counters == nil {
		l.counters, l.counted = map[string]int{}, map[string]admission{}
	}
	if a, ok := l.counted[key]; ok {
		return ledger.Admission{Limited: -1, Repeat: true, CountedAt: a.at}, nil
	}
	var ids []string
	for i, c := range counts {
		items := ledger.Counters
		if l.ItemsOf != nil {
			items = l.ItemsOf
		}
		for _, item := range items(c, now) {
			if n := l.counters[item.ID]; n >= c.Cap.Max {
				return ledger.Admission{Limited: i, Count: n, Window: item.From}, nil
			}
			ids = append(ids, item.ID)
		}
	}
	for _, id := range ids {
		l.counters[id]++
	}
	l.counted[key] = admission{ids, now}
	return ledger.Admission{Limited: -1, CountedAt: now}, nil
}

// Release implements ledger.Limiter.
func (l *Limits) Release(_ context.Context, key string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	a, ok := l.counted[key]
	if !ok {
		return nil
	}
	delete(l.counted, key)
	for _, id := range a.ids {
		l.counters[id]--
	}
	return nil
}

// Note implements ledger.Challenges.
func (l *Limits) Note(_ context.Context, ref ledger.SubjectStream, c ledger.Challenge) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.newest == nil {
		l.newest = map[ledger.SubjectStream]ledger.Challenge{}
	}
	if cur, ok := l.newest[ref]; !ok || !cur.Newer(c) {
		l.newest[ref] = c
	}
	return nil
}

// Newest implements ledger.Challenges.
func (l *Limits) Newest(_ context.Context, ref ledger.SubjectStream) (ledger.Challenge, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.newest[ref]
	return c, ok, nil
}

// Counters returns a copy of every counter (by ledger.CounterID) and how
// many messages it holds: for checks from outside the ledger.
func (l *Limits) Counters() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.counters))
	for id, n := range l.counters {
		out[id] = n
	}
	return out
}

// Add adds n to the counter id outside any admission or release: for a
// simulator that plants a limit store's fault (a release from the wrong
// window) and must see the ledger's checks catch it.
func (l *Limits) Add(id string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counters == nil {
		l.counters, l.counted = map[string]int{}, map[string]admission{}
	}
	l.counters[id] += n
}

// Counter returns how many messages the counter id (ledger.CounterID)
// holds: for checks from outside the ledger, such as the simulator's.
func (l *Limits) Counter(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counters[id]
}
