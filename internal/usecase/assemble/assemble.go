// Package assemble builds each use case from one set of parts, Ports: the
// way the functions' wiring, the simulator and the tests reach the use
// cases. Each use case's own constructor takes typed dependencies; this is
// the one place that picks them out of the set.
package assemble

import (
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

// Ports is every part a use case may take.
type Ports = ledger.Ports

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
