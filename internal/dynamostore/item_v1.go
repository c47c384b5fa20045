package dynamostore

import (
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// The first stored form (form 1): long attribute names, times as UTC text
// in timeLayout, a history whose entries store what they cannot restore
// under the names below. Rows written in it before the compact form (form
// 2, item.go) still read: decode picks the form by the marker attrForm,
// which only form 2 writes, and the first write to such a row rewrites it
// in form 2 (Store.migrate).
const (
	attrPurpose         = "purpose"
	attrChallenge       = "challenge_id"
	attrChannel         = "channel"
	attrWorkflow        = "workflow"
	attrOrder           = "workflow_order"
	attrVersion         = "version"
	attrContentHash     = "content_hash"
	attrTemplateID      = "template_id"
	attrTemplateVersion = "template_version"
	attrPolicyVersion   = "policy_version"
	attrExpiresAt       = "expires_at"
	attrIssuedAt        = "issued_at"
	attrUpdatedAt       = "updated_at"
	attrLeaseUntil      = "lease_until"
	attrNextCheckAt     = "next_check_at"
	attrFirstAttemptAt  = "first_attempt_at"
	attrAdmittedAt      = "admitted_at"
	attrNextAttemptAt   = "next_attempt_at"
	attrSlotAt          = "slot_at"
	attrNotSentCode     = "not_sent_code"
	attrAttempts        = "attempts"
	attrAckID           = "ack_id"
	attrReason          = "reason"
	attrMismatches      = "mismatches"
)

// decodeEventV1 reads the history entry v that follows e's history so far,
// restoring what form 1 left out.
func decodeEventV1(v types.AttributeValue, e ledger.Entry) (ledger.Event, error) {
	mv, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return ledger.Event{}, errors.New("entry is not a map")
	}
	h := &decoder{m: mv.Value}
	ev := ledger.Event{
		ID: h.hexOrStr("id"), Kind: ledger.KindTransition, From: previousState(e.History, len(e.History)), To: h.state("to"),
		At: h.time("at"), Worker: h.worker("by"), Reason: h.str("why"), PolicyVersion: e.PolicyVersion,
		Attempt: int(h.num("n")), AckID: h.str("ack"), ContentHash: e.ContentHash, Hash: h.hexOrStr("hash"),
		Code: h.str("code"), NextAttemptAt: h.time("next"),
		ProviderType: h.str("ptype"), Detail: h.str("detail"), ProviderAt: h.time("pat"), Permanent: h.flag("perm"),
	}
	// What form 1 left out equals what was restored above; what it stored wins.
	ev.Kind = ledger.EventKind(h.strOr("kind", string(ev.Kind)))
	ev.PolicyVersion = h.strOr("pv", ev.PolicyVersion)
	ev.ContentHash = h.strOr("ch", ev.ContentHash)
	if _, ok := mv.Value["from"]; ok {
		ev.From = h.state("from")
	}
	if k := len(e.History); k > 0 {
		ev.Prev = e.History[k-1].Hash
	}
	return ev, h.err
}

// decodeV1 reads a row in form 1.
func decodeV1(m map[string]types.AttributeValue) (ledger.Entry, error) {
	d := &decoder{m: m}
	e := ledger.Entry{
		Key: d.str(AttrPK),
		Identity: ledger.Identity{
			Purpose: ledger.Purpose(d.str(attrPurpose)), ChallengeID: d.str(attrChallenge), Channel: ledger.Channel(d.str(attrChannel)),
		},
		Workflow:        ledger.Workflow{Kind: ledger.WorkflowKind(d.str(attrWorkflow))},
		State:           d.state(AttrState),
		Version:         d.num(attrVersion),
		ContentHash:     d.hexOrStr(attrContentHash),
		DestinationRef:  d.str(attrDestinationRef),
		SubjectRef:      d.str(AttrSubjectRef),
		TemplateID:      d.str(attrTemplateID),
		TemplateVersion: d.str(attrTemplateVersion),
		PolicyVersion:   d.str(attrPolicyVersion),
		ExpiresAt:       d.time(attrExpiresAt),
		CreatedAt:       d.time(attrCreatedAt),
		IssuedAt:        d.time(attrIssuedAt),
		UpdatedAt:       d.time(attrUpdatedAt),
		LeaseUntil:      d.time(attrLeaseUntil),
		NextCheckAt:     d.time(attrNextCheckAt),
		FirstAttemptAt:  d.time(attrFirstAttemptAt),
		AdmittedAt:      d.time(attrAdmittedAt),
		NextAttemptAt:   d.time(attrNextAttemptAt),
		SlotAt:          d.time(attrSlotAt),
		NotSentCode:     d.str(attrNotSentCode),
		Attempts:        int(d.num(attrAttempts)),
		AckID:           d.str(attrAckID),
		Reason:          d.str(attrReason),
		Mismatches:      int(d.num(attrMismatches)),
	}
	if e.State == ledger.Claimed {
		e.RedriveAt, e.LeaseUntil = e.LeaseUntil, time.Time{}
	}
	if ttl := d.num(AttrTTL); ttl != 0 {
		e.RetainUntil = time.Unix(ttl, 0).UTC()
	}
	if l, ok := m[attrOrder].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			if sv, ok := v.(*types.AttributeValueMemberS); ok {
				e.Workflow.Order = append(e.Workflow.Order, ledger.Channel(sv.Value))
			} else {
				d.fail(attrOrder, "not a list of strings")
			}
		}
	}
	if l, ok := m[attrHistory].(*types.AttributeValueMemberL); ok {
		for _, v := range l.Value {
			ev, err := decodeEventV1(v, e)
			if err != nil && d.err == nil {
				d.err = fmt.Errorf("history: %w", err)
			}
			e.History = append(e.History, ev)
		}
	}
	if e.Key == "" {
		d.fail(AttrPK, "missing")
	}
	if d.err != nil {
		return ledger.Entry{}, d.err
	}
	return e, nil
}

// previousState is the state form-1 history entry i starts from when it
// follows on from the entry before it: the state that entry reached, or
// none for the first.
func previousState(h []ledger.Event, i int) ledger.State {
	if i == 0 {
		return ledger.None
	}
	return h[i-1].To
}
