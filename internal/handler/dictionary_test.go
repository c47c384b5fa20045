package handler

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestClaimRefusesADictionaryTheStageLacks: an intent whose content was
// sealed against a dictionary this stage does not hold could never be
// opened, so claim refuses it before any row (reason
// sealed_content.dict, dead-lettered), and claims it once the stage holds
// that dictionary. Version 2 content, which names none, is claimed by a
// stage with no dictionaries at all.
func TestClaimRefusesADictionaryTheStageLacks(t *testing.T) {
	now := time.Now()
	dict := []byte(`{"to":"","subject":"Reset your password","body":"Reset your password: "}`)
	sealer := handlertest.Sealer()
	sealer.Dictionary = dict
	in, _, body := handlertest.WireIntent(t, sealer, 1, now)
	held, err := envelope.NewDictionaries(dict)
	if err != nil {
		t.Fatal(err)
	}
	another, err := envelope.NewDictionaries([]byte("another"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		set   envelope.Dictionaries
		body  string
		claim bool
	}{
		{"no dictionaries", nil, body, false},
		{"another dictionary", another, body, false},
		{"the dictionary", held, body, true},
		{"version 2, no dictionaries", nil, wireV2(t, now), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases, tr := memUseCases(now)
			var out bytes.Buffer
			h := &Claim{Deps: Deps{Log: quiet(), Metrics: &metrics.Emitter{W: &out}}, UseCase: cases, Seals: handlertest.Seals(), Dictionaries: tc.set}
			resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-1", tc.body)}})
			_, err := cases.Store.Get(context.Background(), in.Key())
			if tc.claim {
				if len(resp.BatchItemFailures) != 0 || err != nil {
					t.Fatalf("not claimed: %+v, get %v", resp, err)
				}
				return
			}
			if len(resp.BatchItemFailures) != 1 || !errors.Is(err, ledger.ErrNotFound) ||
				!strings.Contains(out.String(), `"Reason":"sealed_content.dict"`) {
				t.Fatalf("not refused with reason sealed_content.dict: %+v, get %v, metrics %s", resp, err, out.String())
			}
			if tr.Calls() != 0 {
				t.Fatal("claim sent something")
			}
		})
	}
}

func wireV2(t *testing.T, now time.Time) string {
	_, _, body := handlertest.WireIntent(t, handlertest.Sealer(), 1, now)
	if strings.Contains(body, `"dict"`) {
		t.Fatal("handlertest.Sealer wrote a dictionary")
	}
	return body
}
