package assemble_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// constructors builds each use case from ports.
var constructors = map[string]func(assemble.Ports) error{
	"claim":     func(p assemble.Ports) error { _, err := assemble.Claimer(p); return err },
	"dispatch":  func(p assemble.Ports) error { _, err := assemble.Dispatcher(p); return err },
	"reconcile": func(p assemble.Ports) error { _, err := assemble.Reconciler(p); return err },
	"expire":    func(p assemble.Ports) error { _, err := assemble.Expirer(p); return err },
	"events":    func(p assemble.Ports) error { _, err := assemble.EventRecorder(p); return err },
	"operate":   func(p assemble.Ports) error { _, err := assemble.Resolver(p); return err },
}

// needs is every port each use case needs on a stage with every control
// on (limits counting, supersession, events on the transports, a retry
// window on the transports). Only dispatch takes the counters (Limiter):
// it alone counts and gives counts back.
var needs = map[string][]string{
	"claim":     {"Store", "Content", "Clock", "Challenges"},
	"dispatch":  {"Store", "Content", "Clock", "Limiter", "Opener", "Transports", "Proofs", "Budget", "Scheduler", "Progress", "Challenges", "Fingerprints", "NumberOf", "Timeline", "FirstReads"},
	"reconcile": {"Store", "Content", "Clock", "Opener", "Transports", "Proofs", "Scheduler", "Progress"},
	"expire":    {"Store", "Content", "Clock"},
	"events":    {"Store", "Content", "Clock", "Proofs"},
	"operate":   {"Store", "Content", "Clock"},
}

// TestConstructorsNameMissingPorts: each use case builds from every port
// it needs, and without any one of them refuses to build, naming it; a
// port it does not need can be left out.
func TestConstructorsNameMissingPorts(t *testing.T) {
	hour := ledger.Cap{Max: 1, Window: time.Hour}
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Subject: hour, Destination: hour, SMSCountryCap: hour, Supersede: true})
	e.Transport.Events, e.Transport.Window = true, time.Hour
	full := e.Cases.Filled()
	full.Scheduler = &ledgertest.RecordingScheduler{}
	for name, build := range constructors {
		t.Run(name, func(t *testing.T) {
			if err := build(full); err != nil {
				t.Fatalf("with every port: %v", err)
			}
			v := reflect.ValueOf(full)
			for i, f := range reflect.VisibleFields(v.Type()) {
				if k := v.Field(i).Kind(); k != reflect.Interface && k != reflect.Map && k != reflect.Func {
					continue
				}
				without := full
				reflect.ValueOf(&without).Elem().Field(i).SetZero()
				err := build(without)
				var missing *ledger.MissingPortError
				needed := slices.Contains(needs[name], f.Name)
				switch {
				case needed && (!errors.As(err, &missing) || !strings.Contains(err.Error(), "missing port "+f.Name)):
					t.Errorf("without %s: %v, want a MissingPortError naming it", f.Name, err)
				case !needed && err != nil:
					t.Errorf("without %s, which it does not use: %v", f.Name, err)
				}
			}
		})
	}
}

// TestDispatchWithoutLimiterRefusedWhileLimitsOn: a dispatch wired without
// its counters while the stage's limits are on does not start (it would
// send without limits). With them, the limits hold.
func TestDispatchWithoutLimiterRefusedWhileLimitsOn(t *testing.T) {
	e, _ := ledgertest.LimitedScenario(t, ledger.Limits{Subject: ledger.Cap{Max: 1, Window: time.Hour}})
	p := e.Cases.Filled()
	p.Limiter = nil
	_, err := assemble.Dispatcher(p)
	var missing *ledger.MissingPortError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "missing port Limiter") {
		t.Errorf("dispatch with limits on and no Limiter: %v, want it refused, naming Limiter", err)
	}
	first := e.ClaimTo(t, 1, ledger.Email, "a@example.com", "acct-1", 0)
	second := e.ClaimTo(t, 2, ledger.Email, "b@example.com", "acct-1", time.Second)
	ledgertest.MustDispatch(t, e, first.Key(), ledger.OutcomeAccepted)
	ledgertest.MustDispatch(t, e, second.Key(), ledger.OutcomeLimited)
}
