package wire_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/settings"
	"github.com/resetledger/resetledger/internal/usecase/assemble"
	"github.com/resetledger/resetledger/internal/wire"
	"github.com/resetledger/resetledger/internal/wire/dispatchports"
	"github.com/resetledger/resetledger/internal/wire/eventsports"
	"github.com/resetledger/resetledger/internal/wire/reconcileports"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// functions is each function's wiring, as its main.go has it: its own
// ports and its use case's constructor.
var functions = []struct {
	role  settings.Role
	ports wire.Ports
	build func(assemble.Ports) error
}{
	{settings.Claim, wire.ClaimPorts, func(p assemble.Ports) error { _, err := assemble.Claimer(p); return err }},
	{settings.Dispatch, dispatchports.Ports, func(p assemble.Ports) error { _, err := assemble.Dispatcher(p); return err }},
	{settings.Reconcile, reconcileports.Ports, func(p assemble.Ports) error { _, err := assemble.Reconciler(p); return err }},
	{settings.Expire, nil, func(p assemble.Ports) error { _, err := assemble.Expirer(p); return err }},
	{settings.Events, eventsports.Ports, func(p assemble.Ports) error { _, err := assemble.EventRecorder(p); return err }},
	{settings.Operate, nil, func(p assemble.Ports) error { _, err := assemble.Resolver(p); return err }},
}

// optional are the fields of assemble.Ports that are not ports a use case
// needs: defaults (Sleep, Jitter, NewID) and an observer (OnTransition).
var optional = map[string]bool{"Sleep": true, "Jitter": true, "NewID": true, "OnTransition": true}

// TestEachFunctionWiresItsUseCase: every function's use case builds from
// the ports its settings give it, on a stage with every control on (the
// send limits, supersession with the subject index, provider events on
// both channels); and every port the wiring gives is one the use case
// asks for: without it the constructor refuses, naming it. A port a
// function wires but its use case does not need, or a port it needs that
// the wiring forgot, fails here, not in a deployed function.
func TestEachFunctionWiresItsUseCase(t *testing.T) {
	for _, fn := range functions {
		t.Run(string(fn.role), func(t *testing.T) {
			p := portsOf(t, fn.role, fn.ports)
			if err := fn.build(p); err != nil {
				t.Fatalf("the function's own ports do not build its use case: %v", err)
			}
			v := reflect.ValueOf(p)
			wired := 0
			for i, f := range reflect.VisibleFields(v.Type()) {
				field := v.Field(i)
				if optional[f.Name] || !nilable(field) || field.IsNil() {
					continue
				}
				wired++
				without := p
				reflect.ValueOf(&without).Elem().Field(i).SetZero()
				err := fn.build(without)
				var missing *ledger.MissingPortError
				if !errors.As(err, &missing) || !strings.Contains(err.Error(), "missing port "+f.Name) {
					t.Errorf("without %s: %v; want the constructor to refuse, naming it (a port the function wires but its use case never needs?)", f.Name, err)
				}
			}
			if wired == 0 {
				t.Fatal("no port wired")
			}
		})
	}
}

// portsOf builds role's ports as its main does, from settings with every
// control on. No AWS call is made: the budget's rates are given.
func portsOf(t *testing.T, role settings.Role, ports wire.Ports) assemble.Ports {
	t.Helper()
	s := settings.Defaults()
	s.LedgerTable, s.ContentTable, s.BudgetTable, s.LimitsTable = "ledger", "content", "budget", "limits"
	s.ContentKeyARN, s.AttemptProofKeyARN, s.FingerprintKeyARN = "arn:content", "arn:proof", "arn:fingerprint"
	s.DispatchQueueURL = "https://sqs.example.test/q"
	s.SESFrom, s.SESConfigurationSet, s.SMSConfigurationSet = "no-reply@mail.example.com", "events", "events"
	s.SendRates[ledger.Email], s.SendRates[ledger.SMS] = 14, 20
	s.SubjectIndex, s.Limits.Supersede = true, true
	if problems := s.Check(role); len(problems) > 0 {
		t.Fatalf("settings: %v", problems)
	}
	p, err := wire.Build(context.Background(), aws.Config{Region: "us-east-1"}, s, slog.New(slog.NewJSONHandler(io.Discard, nil)), &metrics.Emitter{W: io.Discard}, ports)
	if err != nil {
		t.Fatal(err)
	}
	return *p
}

func nilable(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Interface, reflect.Map, reflect.Func, reflect.Pointer:
		return true
	}
	return false
}
