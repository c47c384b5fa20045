package handler

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/resetledger/resetledger/internal/handler/handlertest"
	"github.com/resetledger/resetledger/internal/metrics"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/intent"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestClaimRefusesAnIntentChangedAfterSealing: a sealed intent read from
// the queue (or its DLQ) and replayed with any decision field changed is
// refused before any row exists, counted with reason intent_mac and
// reported failed (so the queue dead-letters it); the genuine intent,
// arriving after the tampered copy, is then claimed. A seal made under
// another key is refused the same way. From version 3 the seal binds the envelope
// too, so a copy with one bit of its sealed content flipped is refused the
// same way instead of being claimed (and quarantined at dispatch).
func TestClaimRefusesAnIntentChangedAfterSealing(t *testing.T) {
	now := time.Now()
	_, _, genuine := handlertest.WireIntent(t, handlertest.Sealer(), 1, now)
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(genuine), &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	later := now.Add(50 * time.Minute).UTC().Format(time.RFC3339Nano)
	for _, tc := range []struct {
		name string
		body string
	}{
		{"a later expires_at", edit(func(m map[string]any) { m["expires_at"] = later })},
		{"another subject_ref", edit(func(m map[string]any) { m["subject_ref"] = "acct-victim" })},
		{"another destination_ref", edit(func(m map[string]any) { m["destination_ref"] = "acct-victim:email" })},
		{"another workflow", edit(func(m map[string]any) {
			m["workflow"] = map[string]any{"kind": "fallback", "order": []string{"email", "sms"}}
		})},
		{"an earlier issued_at", edit(func(m map[string]any) { m["issued_at"] = now.Add(-time.Hour).UTC().Format(time.RFC3339) })},
		{"another template_version", edit(func(m map[string]any) { m["template_version"] = "4" })},
		{"one bit of sealed_content.ct flipped", edit(func(m map[string]any) { flipCT(t, m) })},
		{"another sealed_content.nonce", edit(func(m map[string]any) {
			m["sealed_content"].(map[string]any)["nonce"] = base64.StdEncoding.EncodeToString(make([]byte, 12))
		})},
		{"a seal under another key", edit(func(m map[string]any) {
			// Re-sealed honestly, but not with the intent key.
			m["intent_mac"] = strings.Repeat("A", 43)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases, tr := memUseCases(now)
			var out bytes.Buffer
			h := &Claim{Deps: Deps{Log: quiet(), Metrics: &metrics.Emitter{W: &out}}, UseCase: cases, Seals: handlertest.Seals()}
			resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-forged", tc.body)}})
			if err != nil || len(resp.BatchItemFailures) != 1 {
				t.Fatalf("tampered intent: %+v %v, want it reported failed", resp, err)
			}
			if !strings.Contains(out.String(), `"Reason":"intent_mac"`) || !strings.Contains(out.String(), `"RejectedIntents":1`) {
				t.Fatalf("no RejectedIntents with reason intent_mac: %s", out.String())
			}
			in, _ := ledgertest.Intent(1, ledger.Email, now, time.Hour)
			if _, err := cases.Store.Get(context.Background(), in.Key()); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("a tampered intent left a row (get: %v)", err)
			}
			// The genuine intent, arriving second, is claimed.
			resp, _ = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-genuine", genuine)}})
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("the genuine intent after a tampered copy: %+v", resp)
			}
			if row, err := cases.Store.Get(context.Background(), in.Key()); err != nil || row.State != ledger.Claimed {
				t.Fatalf("genuine row: %+v %v", row.State, err)
			}
			if tr.Calls() != 0 {
				t.Fatal("claim sent something")
			}
		})
	}
}

// TestClaimTakesVersion1OnlyWhereTheStageAllows: a version 1 intent seals
// nothing but its content; claim refuses it (reason schema_version, no
// row) unless ACCEPT_INTENT_V1 is set, and then records the claim's time
// as its issued_at.
func TestClaimTakesVersion1OnlyWhereTheStageAllows(t *testing.T) {
	now := time.Now()
	_, _, v2 := handlertest.WireIntent(t, handlertest.Sealer(), 1, now)
	var m map[string]any
	if err := json.Unmarshal([]byte(v2), &m); err != nil {
		t.Fatal(err)
	}
	m["schema_version"] = 1
	delete(m, "issued_at")
	delete(m, "intent_mac")
	b, _ := json.Marshal(m)
	in, _ := ledgertest.Intent(1, ledger.Email, now, time.Hour)
	for _, accept := range []bool{false, true} {
		cases, _ := memUseCases(now)
		var out bytes.Buffer
		h := &Claim{Deps: Deps{Log: quiet(), Metrics: &metrics.Emitter{W: &out}}, UseCase: cases, Seals: handlertest.Seals(), AcceptV1: accept}
		resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-1", string(b))}})
		row, err := cases.Store.Get(context.Background(), in.Key())
		switch {
		case !accept && (len(resp.BatchItemFailures) != 1 || !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(out.String(), `"Reason":"schema_version"`)):
			t.Fatalf("version 1 not accepted: %+v, row err %v, metrics %s", resp, err, out.String())
		case accept && (len(resp.BatchItemFailures) != 0 || err != nil || !row.IssuedAt.Equal(row.CreatedAt)):
			t.Fatalf("version 1 accepted: %+v, row %+v %v", resp, row, err)
		}
	}
}

// flipCT flips one bit in the middle of the intent document's
// sealed_content.ct, leaving every other member and intent_mac as they are.
func flipCT(t *testing.T, m map[string]any) {
	t.Helper()
	sc := m["sealed_content"].(map[string]any)
	ct, err := base64.StdEncoding.DecodeString(sc["ct"].(string))
	if err != nil {
		t.Fatal(err)
	}
	ct[len(ct)/2] ^= 0x01
	sc["ct"] = base64.StdEncoding.EncodeToString(ct)
}

// TestClaimTakesVersion2OnlyWhereTheStageAllows: a version 2 intent seals
// its fields but not its envelope; claim refuses it (reason
// schema_version, no row) unless ACCEPT_INTENT_V2 is set, and then
// verifies its version 2 seal. A version 3 intent relabelled version 2
// (to shed the envelope from the binding) fails that seal: the binding
// names its version, so a stage that accepts version 2 cannot be used to
// downgrade a version 3 intent.
func TestClaimTakesVersion2OnlyWhereTheStageAllows(t *testing.T) {
	now := time.Now()
	_, _, v3 := handlertest.WireIntent(t, handlertest.Sealer(), 1, now)
	var m map[string]any
	if err := json.Unmarshal([]byte(v3), &m); err != nil {
		t.Fatal(err)
	}
	m["schema_version"] = 2
	relabelled, _ := json.Marshal(m)
	dec, err := intent.Decode(relabelled)
	if err != nil || dec.Version != intent.SchemaVersionV2 {
		t.Fatalf("version 2: %v", err)
	}
	seal, err := handlertest.Seals().Sign(context.Background(), dec.Binding)
	if err != nil {
		t.Fatal(err)
	}
	m["intent_mac"] = seal
	v2, _ := json.Marshal(m)
	in, _ := ledgertest.Intent(1, ledger.Email, now, time.Hour)
	for _, tc := range []struct {
		name   string
		body   []byte
		accept bool
		reason string // "" when claimed
	}{
		{"version 2, not accepted", v2, false, "schema_version"},
		{"version 2, accepted", v2, true, ""},
		{"version 3 relabelled version 2, not accepted", relabelled, false, "schema_version"},
		{"version 3 relabelled version 2, accepted", relabelled, true, "intent_mac"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cases, _ := memUseCases(now)
			var out bytes.Buffer
			h := &Claim{Deps: Deps{Log: quiet(), Metrics: &metrics.Emitter{W: &out}}, UseCase: cases, Seals: handlertest.Seals(), AcceptV2: tc.accept}
			resp, _ := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{handlertest.SQSMessage("m-1", string(tc.body))}})
			_, err := cases.Store.Get(context.Background(), in.Key())
			if tc.reason == "" {
				if len(resp.BatchItemFailures) != 0 || err != nil {
					t.Fatalf("not claimed: %+v, row err %v, metrics %s", resp, err, out.String())
				}
				return
			}
			if len(resp.BatchItemFailures) != 1 || !errors.Is(err, ledger.ErrNotFound) || !strings.Contains(out.String(), `"Reason":"`+tc.reason+`"`) {
				t.Fatalf("want refused with %s and no row: %+v, row err %v, metrics %s", tc.reason, resp, err, out.String())
			}
		})
	}
}
