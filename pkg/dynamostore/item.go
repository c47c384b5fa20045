package dynamostore

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// Attribute and index names other components depend on: the stack defines the
// tables and the index with them, and the ledger stream's filter and the
// dispatch function read a change's state from AttrState in its images.
const (
	// AttrPK is the partition key of the ledger, content and budget tables.
	AttrPK = "pk"
	// AttrState is a ledger row's current state (a ledger.State).
	AttrState = "state"
	// AttrTTL is the expiry (Unix seconds) DynamoDB's TTL deletes a row at.
	AttrTTL = "ttl"
	// AttrOpenPK and AttrOpenDue are the keys of the sparse open-row index:
	// only rows in an open state carry them.
	AttrOpenPK  = "open_pk"
	AttrOpenDue = "open_due"

	// IndexName is the sparse index of open rows.
	IndexName = "open"
)

// The other attribute names of a ledger item. Times are UTC strings in
// timeLayout, whose fixed width makes string order equal time order, so
// conditions and the index sort key compare them directly.
const (
	attrPurpose         = "purpose"
	attrChallenge       = "challenge_id"
	attrChannel         = "channel"
	attrWorkflow        = "workflow"
	attrOrder           = "workflow_order"
	attrVersion         = "version"
	attrContentHash     = "content_hash"
	attrDestinationRef  = "destination_ref"
	attrTemplateID      = "template_id"
	attrTemplateVersion = "template_version"
	attrPolicyVersion   = "policy_version"
	attrExpiresAt       = "expires_at"
	attrCreatedAt       = "created_at"
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
	attrHistory         = "history"

	timeLayout = "2006-01-02T15:04:05.000Z" // ledger.Precision
)

func fmtTime(t time.Time) string { return t.UTC().Format(timeLayout) }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// mutable returns the attributes a transition may change; a nil value means
// the attribute is removed.
func (st *Store) mutable(e ledger.Entry) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		AttrState:      s(string(e.State)),
		attrVersion:    n(e.Version),
		attrUpdatedAt:  s(fmtTime(e.UpdatedAt)),
		attrAttempts:   n(int64(e.Attempts)),
		attrMismatches: n(int64(e.Mismatches)),
		AttrTTL:        n(e.RetainUntil.Unix()),
	}
	optTime := func(name string, t time.Time) {
		m[name] = nil
		if !t.IsZero() {
			m[name] = s(fmtTime(t))
		}
	}
	optStr := func(name, v string) {
		m[name] = nil
		if v != "" {
			m[name] = s(v)
		}
	}
	optTime(attrLeaseUntil, e.LeaseUntil)
	optTime(attrNextCheckAt, e.NextCheckAt)
	optTime(attrFirstAttemptAt, e.FirstAttemptAt)
	optTime(attrAdmittedAt, e.AdmittedAt)
	optTime(attrNextAttemptAt, e.NextAttemptAt)
	optTime(attrSlotAt, e.SlotAt)
	optStr(attrNotSentCode, e.NotSentCode)
	optStr(attrAckID, e.AckID)
	optStr(attrReason, e.Reason)
	m[AttrOpenPK], m[AttrOpenDue] = nil, nil
	if e.State.Open() {
		m[AttrOpenPK] = s(st.openPK(e.State, e.Key))
		m[AttrOpenDue] = s(openDue(e))
	}
	return m
}

// item encodes a whole row for PutItem.
func (st *Store) item(e ledger.Entry) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		AttrPK:              s(e.Key),
		attrPurpose:         s(string(e.Identity.Purpose)),
		attrChallenge:       s(e.Identity.ChallengeID),
		attrChannel:         s(string(e.Identity.Channel)),
		attrWorkflow:        s(string(e.Workflow.Kind)),
		attrContentHash:     s(e.ContentHash),
		attrTemplateID:      s(e.TemplateID),
		attrTemplateVersion: s(e.TemplateVersion),
		attrPolicyVersion:   s(e.PolicyVersion),
		attrExpiresAt:       s(fmtTime(e.ExpiresAt)),
		attrCreatedAt:       s(fmtTime(e.CreatedAt)),
	}
	// The timeline indexes' keys: an index key attribute may not be an
	// empty string, and a row without a subject is in no subject's index.
	if e.DestinationRef != "" {
		m[AttrDestinationRef] = s(e.DestinationRef)
	}
	if e.SubjectRef != "" {
		m[AttrSubjectRef] = s(e.SubjectRef)
	}
	if len(e.Workflow.Order) > 0 {
		order := make([]types.AttributeValue, len(e.Workflow.Order))
		for i, c := range e.Workflow.Order {
			order[i] = s(string(c))
		}
		m[attrOrder] = &types.AttributeValueMemberL{Value: order}
	}
	hist := make([]types.AttributeValue, len(e.History))
	for i, ev := range e.History {
		hist[i] = event(ev, e.ContentHash)
	}
	m[attrHistory] = &types.AttributeValueMemberL{Value: hist}
	for k, v := range st.mutable(e) {
		if v != nil {
			m[k] = v
		}
	}
	return m
}

// event encodes one history entry. The row is charged write capacity on its
// whole size, so entries are kept small: hex hashes and ids are stored as
// raw bytes, the link to the previous entry is not stored (it is that
// entry's hash; decode restores it), and the content hash only when it
// differs from the row's.
func event(ev ledger.Event, rowContentHash string) types.AttributeValue {
	m := map[string]types.AttributeValue{
		"id":   compact(ev.ID),
		"kind": s(string(ev.Kind)),
		"from": s(ev.From.String()),
		"to":   s(ev.To.String()),
		"at":   s(fmtTime(ev.At)),
		"by":   s(ev.Worker),
		"pv":   s(ev.PolicyVersion),
		"n":    n(int64(ev.Attempt)),
		"hash": compact(ev.Hash),
	}
	if ev.Reason != "" {
		m["why"] = s(ev.Reason)
	}
	if ev.AckID != "" {
		m["ack"] = s(ev.AckID)
	}
	if ev.ContentHash != rowContentHash {
		m["ch"] = s(ev.ContentHash)
	}
	if ev.Code != "" {
		m["code"] = s(ev.Code)
	}
	if !ev.NextAttemptAt.IsZero() {
		m["next"] = s(fmtTime(ev.NextAttemptAt))
	}
	if ev.ProviderType != "" {
		m["ptype"] = s(ev.ProviderType)
	}
	if ev.Detail != "" {
		m["detail"] = s(ev.Detail)
	}
	if !ev.ProviderAt.IsZero() {
		m["pat"] = s(fmtTime(ev.ProviderAt))
	}
	if ev.Permanent {
		m["perm"] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// compact stores a lowercase hex string as its bytes (half the size) and
// anything else as a string.
func compact(v string) types.AttributeValue {
	if len(v) > 0 && len(v)%2 == 0 && strings.ToLower(v) == v {
		if b, err := hex.DecodeString(v); err == nil {
			return &types.AttributeValueMemberB{Value: b}
		}
	}
	return s(v)
}

// decoder reads attributes and keeps the first error.
type decoder struct {
	m   map[string]types.AttributeValue
	err error
}

func (d *decoder) str(name string) string {
	switch v := d.m[name].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		d.fail(name, "not a string")
		return ""
	}
}

// hexOrStr reads what compact wrote.
func (d *decoder) hexOrStr(name string) string {
	if b, ok := d.m[name].(*types.AttributeValueMemberB); ok {
		return hex.EncodeToString(b.Value)
	}
	return d.str(name)
}

func (d *decoder) num(name string) int64 {
	switch v := d.m[name].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		i, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			d.fail(name, "not an integer")
		}
		return i
	default:
		d.fail(name, "not a number")
		return 0
	}
}

// flag reads a boolean attribute; absent is false.
func (d *decoder) flag(name string) bool {
	switch v := d.m[name].(type) {
	case nil:
		return false
	case *types.AttributeValueMemberBOOL:
		return v.Value
	}
	d.fail(name, "not a boolean")
	return false
}

func (d *decoder) time(name string) time.Time {
	v := d.str(name)
	if v == "" {
		return time.Time{}
	}
	t, err := time.Parse(timeLayout, v)
	if err != nil {
		d.fail(name, "not a time")
	}
	return t
}

func (d *decoder) state(name string) ledger.State {
	v := d.str(name)
	if v == "none" || v == "" {
		return ledger.None
	}
	st, err := ledger.ParseState(v)
	if err != nil {
		d.fail(name, "unknown state")
	}
	return st
}

func (d *decoder) fail(name, why string) {
	if d.err == nil {
		d.err = fmt.Errorf("dynamostore: attribute %s: %s", name, why)
	}
}

// DecodeItem reads a ledger item as the store wrote it, for callers that get
// items from elsewhere (a stream record's image). It rejects items it cannot
// read rather than returning a half-filled row.
func DecodeItem(m map[string]types.AttributeValue) (ledger.Entry, error) { return decode(m) }

// decode reads a ledger item. It rejects items it cannot read rather than
// returning a half-filled row.
func decode(m map[string]types.AttributeValue) (ledger.Entry, error) {
	d := &decoder{m: m}
	e := ledger.Entry{
		Key: d.str(AttrPK),
		Identity: ledger.Identity{
			Purpose: ledger.Purpose(d.str(attrPurpose)), ChallengeID: d.str(attrChallenge), Channel: ledger.Channel(d.str(attrChannel)),
		},
		Workflow:        ledger.Workflow{Kind: ledger.WorkflowKind(d.str(attrWorkflow))},
		State:           d.state(AttrState),
		Version:         d.num(attrVersion),
		ContentHash:     d.str(attrContentHash),
		DestinationRef:  d.str(attrDestinationRef),
		SubjectRef:      d.str(AttrSubjectRef),
		TemplateID:      d.str(attrTemplateID),
		TemplateVersion: d.str(attrTemplateVersion),
		PolicyVersion:   d.str(attrPolicyVersion),
		ExpiresAt:       d.time(attrExpiresAt),
		CreatedAt:       d.time(attrCreatedAt),
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
			mv, ok := v.(*types.AttributeValueMemberM)
			if !ok {
				d.fail(attrHistory, "entry is not a map")
				continue
			}
			h := &decoder{m: mv.Value}
			ev := ledger.Event{
				ID: h.hexOrStr("id"), Kind: ledger.EventKind(h.str("kind")), From: h.state("from"), To: h.state("to"),
				At: h.time("at"), Worker: h.str("by"), Reason: h.str("why"), PolicyVersion: h.str("pv"),
				Attempt: int(h.num("n")), AckID: h.str("ack"), ContentHash: h.str("ch"), Hash: h.hexOrStr("hash"),
				Code: h.str("code"), NextAttemptAt: h.time("next"),
				ProviderType: h.str("ptype"), Detail: h.str("detail"), ProviderAt: h.time("pat"), Permanent: h.flag("perm"),
			}
			if ev.ContentHash == "" {
				ev.ContentHash = e.ContentHash
			}
			if k := len(e.History); k > 0 {
				ev.Prev = e.History[k-1].Hash
			}
			e.History = append(e.History, ev)
			if h.err != nil && d.err == nil {
				d.err = fmt.Errorf("history: %w", h.err)
			}
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
