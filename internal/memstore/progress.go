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

// Lagging implements ledger.Progress: the largest lateness within the window.
// Heard only moves forward here, a stronger promise than the interface's.
func (p *Progress) Lagging(_ context.Context, behind time.Duration, at, staleBefore time.Time) (ledger.Lag, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	heard := p.marks.Stream.Heard
	if l := p.marks.Stream; l.At.IsZero() || l.Behind <= behind || l.At.Before(staleBefore) {
		p.marks.Stream = ledger.Lag{Behind: behind, At: at}
	}
	p.marks.Stream.Heard = heard
	if at.After(heard) {
		p.marks.Stream.Heard = at
	}
	return p.marks.Stream, nil
}

// Advance implements ledger.Progress: the queue's mark never moves back.
func (p *Progress) Advance(_ context.Context, through, at time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if through.After(p.marks.Queue.Through) {
		p.marks.Queue = ledger.Mark{Through: through, At: at}
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

// Seen implements ledger.Progress: the stored marks, which are all there is.
func (p *Progress) Seen() ledger.Marks {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.marks
}
