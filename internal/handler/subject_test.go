package handler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/testkit/pipelinetest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// TestSubjectRefTravelsFromProducerToRow: a subject_ref published by the Go
// producer reaches the claim function through SQS, is stored on the row,
// travels in the stream image dispatch reads, and lists the row on the
// subject's timeline; an intent without one is stored without one and is
// sent as before.
func TestSubjectRefTravelsFromProducerToRow(t *testing.T) {
	p := pipelinetest.New(t, nil)
	with := p.Notification(1, ledger.Email, 10*time.Minute)
	with.SubjectRef = "tenant-7:acct_000001.eu"
	without := p.Notification(2, ledger.Email, 10*time.Minute)
	p.Publish(with)
	p.Publish(without)
	if failed := p.PumpQueue(); failed != 0 {
		t.Fatalf("%d records failed", failed)
	}
	ev := p.ReadStream()
	if len(ev.Records) != 2 {
		t.Fatalf("want two new claims on the stream, got %d", len(ev.Records))
	}
	subjects := map[string]bool{}
	for _, r := range ev.Records {
		v, ok := r.Change.NewImage[dynamostore.AttrSubjectRef]
		if !ok {
			subjects[""] = true
			continue
		}
		subjects[v.String()] = true
	}
	if !subjects[with.SubjectRef] || !subjects[""] {
		t.Errorf("stream images carry subjects %v, want %q and none", subjects, with.SubjectRef)
	}
	if resp, err := p.Dispatch.Handle(p.Ctx, ev); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("dispatch: %v %v", err, resp.BatchItemFailures)
	}
	for _, n := range []struct {
		to, subject string
		row         ledger.Entry
	}{{with.Message.To, with.SubjectRef, p.Row(with)}, {without.Message.To, "", p.Row(without)}} {
		if n.row.SubjectRef != n.subject || n.row.State != ledger.Accepted || p.SESMessages(n.to) != 1 {
			t.Errorf("row %s: subject %q state %s, %d emails; want subject %q, accepted, 1 email",
				n.row.Identity.ChallengeID, n.row.SubjectRef, n.row.State, p.SESMessages(n.to), n.subject)
		}
	}
	rows, err := dynamostore.New(p.DB, p.LedgerTable, dynamostore.DefaultShards).ListByRef(p.Ctx, ledger.BySubject, with.SubjectRef, time.Time{}, 0)
	if err != nil || len(rows) != 1 || !strings.HasSuffix(rows[0].Identity.ChallengeID, "1") {
		t.Errorf("subject timeline: %d rows, %v", len(rows), err)
	}
	p.AssertNoSecrets()
}
