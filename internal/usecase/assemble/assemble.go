// Package assemble builds each use case from one set of parts, Ports: the
// way the functions' wiring, the simulator and the tests reach the use
// cases. Each use case's own constructor takes typed dependencies; this is
// the one place that picks them out of the set.
package assemble

import (
	"context"
	"time"

	"github.com/resetledger/resetledger/internal/usecase/admission"
	"github.com/resetledger/resetledger/internal/usecase/claim"
	"github.com/resetledger/resetledger/internal/usecase/dispatch"
	"github.com/resetledger/resetledger/internal/usecase/evidence"
	"github.com/resetledger/resetledger/internal/usecase/expire"
	"github.com/resetledger/resetledger/internal/usecase/reconcile"
	"github.com/resetledger/resetledger/internal/usecase/resolve"
	"github.com/resetledger/resetledger/internal/usecase/sending"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// Ports is every part a use case may take: the wiring's, the simulator's
// and the tests' one set, from which each function below picks what its
// use case's constructor takes. A control a stage turns off is given as
// its explicit off value (ledger.NoBudget, NoScheduler, NoProgress,
// NoTimeline, or limits whose rules are all off), never as a nil.
type Ports struct {
	// Store and Content are the ledger's tables; Clock and Policy every use
	// case's. Every use case needs them.
	Store   ledger.Store
	Content ledger.ContentStore
	Clock   ledger.Clock
	Policy  ledger.Policy
	// Opener opens sealed content (dispatch; reconcile where a transport
	// allows a same-key retry). Transports send per channel (dispatch,
	// reconcile).
	Opener     ledger.Opener
	Transports map[ledger.Channel]ledger.Transport
	// Budget paces sends per channel (dispatch; NoBudget: unpaced).
	// Scheduler hands deferred and re-driven entries back to dispatch
	// (dispatch, reconcile; NoScheduler where nothing is handed back).
	Budget    ledger.Budget
	Scheduler ledger.Scheduler
	// Progress keeps how far dispatch has read the stream and the dispatch
	// queue (dispatch writes it, reconcile's re-drive reads it), so that
	// Redrive hands back only entries neither can still deliver. NoProgress:
	// every due entry is handed back.
	Progress ledger.Progress
	// Proofs signs every attempt through a transport that reports events
	// (dispatch) and verifies the proof a provider event carries back
	// (provider events).
	Proofs ledger.Proofs
	// Limits is the send-limit policy (claim reads whether older
	// challenges are superseded; dispatch applies it); Limiter keeps its
	// counters (dispatch alone counts, and gives back a count nothing was
	// sent for), Challenges the newest challenge per subject (claim notes
	// it, dispatch reads it),
	// Fingerprints the destination keys and NumberOf the SMS regions and
	// number kinds (dispatch).
	Limits       ledger.Limits
	Limiter      ledger.Limiter
	Challenges   ledger.Challenges
	Fingerprints ledger.Fingerprinter
	NumberOf     ledger.NumberOf
	// Timeline lets a refused admission find the subject's older
	// challenges that hold counts while they wait, supersede them and give
	// the counts back (admission.Gate's admitReclaiming). NoTimeline: they keep
	// their counts until they wake.
	Timeline ledger.Timeline
	// FirstReads reads a stream record's row, newest challenge and content
	// in one round trip (dispatch; ReadRowAlone: the row alone).
	FirstReads ledger.FirstReads
	// Sleep waits for d or until ctx ends; a timer if nil.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1) for backoff jitter; math/rand if nil.
	Jitter func() float64
	// NewID returns a unique event id; random 128-bit hex if nil.
	NewID func() string
	// OnTransition, if set, is called once for every stored state change
	// (a new entry included), wherever it was made: the one place metrics
	// of transitions are counted.
	OnTransition func(e ledger.Entry)
}

// Expirer builds the expire use case.
func Expirer(p Ports) (*expire.Expirer, error) {
	c, err := core("expire", p)
	if err != nil {
		return nil, err
	}
	return expire.New(c), nil
}

// Resolver builds the operator use case.
func Resolver(p Ports) (*resolve.Resolver, error) {
	c, err := core("operate", p)
	if err != nil {
		return nil, err
	}
	return resolve.New(c), nil
}

// EventRecorder builds the provider-events use case.
func EventRecorder(p Ports) (*evidence.Recorder, error) {
	c, err := core("events", p)
	if err != nil {
		return nil, err
	}
	return evidence.New(c, p.Proofs)
}

// Claimer builds the claim use case.
func Claimer(p Ports) (*claim.Claimer, error) {
	c, err := core("claim", p)
	if err != nil {
		return nil, err
	}
	return claim.New(c, p.Limits.Supersede, p.Challenges)
}

// Reconciler builds the reconcile use case.
func Reconciler(p Ports) (*reconcile.Reconciler, error) {
	c, err := core("reconcile", p)
	if err != nil {
		return nil, err
	}
	return reconcile.New(c, sendPorts(p), p.Scheduler, p.Progress)
}

// sendPorts are the parts a Sender sends with.
func sendPorts(p Ports) sending.Ports {
	return sending.Ports{Transports: p.Transports, Opener: p.Opener, Proofs: p.Proofs}
}

// Dispatcher builds the dispatch use case.
func Dispatcher(p Ports) (*dispatch.Dispatcher, error) {
	c, err := core("dispatch", p)
	if err != nil {
		return nil, err
	}
	return dispatch.New(c, dispatch.Deps{
		Send: sendPorts(p),
		Admission: admission.Ports{Limits: p.Limits, Limiter: p.Limiter, Challenges: p.Challenges,
			Fingerprints: p.Fingerprints, NumberOf: p.NumberOf, Timeline: p.Timeline},
		Budget: p.Budget, Scheduler: p.Scheduler, Progress: p.Progress, FirstReads: p.FirstReads,
		Sleep: p.Sleep, Jitter: p.Jitter,
	})
}

// core builds the write path every use case holds.
func core(role string, p Ports) (ledger.Core, error) {
	return ledger.NewCore(role, p.Store, p.Content, p.Clock, p.Policy,
		ledger.Hooks{NewID: p.NewID, OnTransition: p.OnTransition})
}
