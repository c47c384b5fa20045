package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Progress is an in-memory ledger.Progress. The zero value is ready to use.
type Progress struct {
	mu    sync.Mutex
	marks ledger.Marks
}

var _ ledger.Progress = (*Progress)(nil)

// Advance implements ledger.Progress: the mark never moves back.
func (p *Progress) Advance(_ context.Context, src ledger.Source, through, at time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := &p.marks.Stream
	if src == ledger.FromQueue {
		m = &p.marks.Queue
	}
	if through.After(m.Through) {
		*m = ledger.Mark{Through: through, At: at}
	}
	return nil
}

// Redriven implements ledger.Progress.
func (p *Progress) Redriven(_ context.Context, at time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks.Redriven = at
	return nil
}

// Marks implements ledger.Progress.
func (p *Progress) Marks(context.Context) (ledger.Marks, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marks, nil
}
