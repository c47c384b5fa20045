package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/envelope"
	"github.com/resetledger/resetledger/pkg/envelope/wireform"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// replaceContent swaps the content item of row for b, as another writer
// (an earlier release of the claim function, a corruption) would leave it.
func replaceContent(t *testing.T, p *pipelinetest.Pipeline, row ledger.Entry, b []byte) {
	t.Helper()
	key := ledger.ContentKey(row)
	if err := p.Content().Delete(p.Ctx, key); err != nil {
		t.Fatal(err)
	}
	if wrote, err := p.Content().Put(p.Ctx, key, b, row.ExpiresAt); err != nil || !wrote {
		t.Fatalf("put content: %v %v", wrote, err)
	}
}

// TestContentStoredBeforeTheCompactFormStillSends: the claim function
// stores the envelope's compact stored form; a content item an earlier
// release wrote (the envelope's JSON form) is still opened and sent by
// the new dispatch, as it is after a deploy with rows in flight.
func TestContentStoredBeforeTheCompactFormStillSends(t *testing.T) {
	p := pipelinetest.New(t, nil)
	before := p.Notification(1, ledger.Email, 10*time.Minute)
	after := p.Notification(2, ledger.Email, 10*time.Minute)
	p.Publish(before)
	p.Publish(after)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d records failed", failed)
	}
	for _, n := range []struct {
		name string
		row  ledger.Entry
	}{{"before", p.Row(before)}, {"after", p.Row(after)}} {
		stored, err := p.Content().Get(p.Ctx, ledger.ContentKey(n.row))
		if err != nil {
			t.Fatal(err)
		}
		if stored[0] != wireform.FormCompact {
			t.Fatalf("%s: the claim stored content whose first byte is %#x, not the compact form's tag", n.name, stored[0])
		}
		if n.name != "before" {
			continue
		}
		env, err := envelope.ParseStored(stored)
		if err != nil {
			t.Fatal(err)
		}
		legacy, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if len(stored) >= len(legacy) {
			t.Fatalf("stored form %d B is not smaller than the JSON form %d B", len(stored), len(legacy))
		}
		replaceContent(t, p, n.row, legacy)
	}
	p.PumpStream()
	for _, n := range []struct {
		name string
		to   string
		row  ledger.Entry
	}{{"before (JSON form)", before.Message.To, p.Row(before)}, {"after (compact form)", after.Message.To, p.Row(after)}} {
		if n.row.State != ledger.Accepted {
			t.Fatalf("%s: %s %q", n.name, n.row.State, n.row.Reason)
		}
		if got := p.SESMessages(n.to); got != 1 {
			t.Fatalf("%s: captured %d emails, want 1", n.name, got)
		}
		if _, err := p.Content().Get(p.Ctx, ledger.ContentKey(n.row)); err == nil {
			t.Fatalf("%s: sealed content survived the terminal state", n.name)
		}
	}
	p.AssertNoSecrets()
}

// TestCorruptStoredContentIsQuarantinedNothingSent: a content item whose
// stored form does not decode is treated as an envelope that does not
// parse always was: the row is quarantined with the content-unavailable
// reason and nothing is sent (the opener's error names the fault,
// package envelope's TestOpenRefusesCorruptStoredForm).
func TestCorruptStoredContentIsQuarantinedNothingSent(t *testing.T) {
	p := pipelinetest.New(t, nil)
	n := p.Notification(1, ledger.Email, 10*time.Minute)
	p.Publish(n)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d records failed", failed)
	}
	row := p.Row(n)
	stored, err := p.Content().Get(p.Ctx, ledger.ContentKey(row))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), stored[:len(stored)-1]...) // ct one byte short of its length
	replaceContent(t, p, row, corrupt)
	p.PumpStream()
	row = p.Row(n)
	if row.State != ledger.Quarantined || !strings.Contains(row.Reason, "sealed content unavailable") {
		t.Fatalf("row %s %q, want quarantined for unavailable content", row.State, row.Reason)
	}
	if got := p.SESMessages(n.Message.To); got != 0 {
		t.Fatalf("captured %d emails from corrupt content", got)
	}
	if err := row.Verify(); err != nil {
		t.Fatal(err)
	}
	p.AssertNoSecrets()
}
