package dynamostore

import (
	"encoding/hex"
	"errors"
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
		AttrState:     s(string(e.State)),
		attrVersion:   n(e.Version),
		attrUpdatedAt: s(fmtTime(e.UpdatedAt)),
		attrAttempts:  n(int64(e.Attempts)),
		AttrTTL:       n(e.RetainUntil.Unix()),
	}
	m[attrMismatches] = nil // none, by far the most common, costs no bytes
	if e.Mismatches != 0 {
		m[attrMismatches] = n(int64(e.Mismatches))
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
	// One attribute for the two deadlines of an in-flight row: a claim's
	// re-drive time, a dispatching row's lease (only one is set in any
	// state; decode tells them apart by the state).
	lease := e.LeaseUntil
	if e.State == ledger.Claimed {
		lease = e.RedriveAt
	}
	optTime(attrLeaseUntil, lease)
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

// Stored returns e as the table holds it once written, which is what its
// stream record's new image carries: times at the store's precision, the
// retention in whole seconds.
func (st *Store) Stored(e ledger.Entry) (ledger.Entry, error) { return decode(st.item(e)) }

// item encodes a whole row for PutItem.
func (st *Store) item(e ledger.Entry) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		AttrPK:              s(e.Key),
		attrPurpose:         s(string(e.Identity.Purpose)),
		attrChallenge:       s(e.Identity.ChallengeID),
		attrChannel:         s(string(e.Identity.Channel)),
		attrWorkflow:        s(string(e.Workflow.Kind)),
		attrContentHash:     compact(e.ContentHash),
		attrTemplateID:      s(e.TemplateID),
		attrTemplateVersion: s(e.TemplateVersion),
		attrPolicyVersion:   s(e.PolicyVersion),
		attrExpiresAt:       s(fmtTime(e.ExpiresAt)),
		attrCreatedAt:       s(fmtTime(e.CreatedAt)),
	}
	if !e.IssuedAt.IsZero() {
		m[attrIssuedAt] = s(fmtTime(e.IssuedAt))
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
		hist[i] = event(ev, e, i)
	}
	m[attrHistory] = &types.AttributeValueMemberL{Value: hist}
	for k, v := range st.mutable(e) {
		if v != nil {
			m[k] = v
		}
	}
	return m
}

// event encodes history entry i of the row e. The row is charged write
// capacity on its whole size, so entries are kept small: hex hashes and ids
// are stored as raw bytes, and what decode can restore is not stored: the
// link to the previous entry (that entry's hash), the state it left when
// that is the state the previous entry reached, the kind when it is a
// transition, the policy version and content hash when they are the row's,
// an attempt of 0. A worker named after a Lambda request id stores the id
// as its 16 bytes (packWorker). Every omission is of a field that items
// written before it always carried, so decode reads both.
func event(ev ledger.Event, e ledger.Entry, i int) types.AttributeValue {
	m := map[string]types.AttributeValue{
		"id":   compact(ev.ID),
		"to":   s(ev.To.String()),
		"at":   s(fmtTime(ev.At)),
		"by":   packWorker(ev.Worker),
		"hash": compact(ev.Hash),
	}
	if ev.From != previousState(e.History, i) {
		m["from"] = s(ev.From.String())
	}
	if ev.Kind != ledger.KindTransition {
		m["kind"] = s(string(ev.Kind))
	}
	if ev.PolicyVersion != e.PolicyVersion {
		m["pv"] = s(ev.PolicyVersion)
	}
	if ev.Attempt != 0 {
		m["n"] = n(int64(ev.Attempt))
	}
	if ev.ContentHash != e.ContentHash {
		m["ch"] = s(ev.ContentHash)
	}
	if ev.Reason != "" {
		m["why"] = s(ev.Reason)
	}
	if ev.AckID != "" {
		m["ack"] = s(ev.AckID)
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

// previousState is the state history entry i starts from when it follows
// on from the entry before it: the state that entry reached, or none for
// the first.
func previousState(h []ledger.Event, i int) ledger.State {
	if i == 0 {
		return ledger.None
	}
	return h[i-1].To
}

// packWorker stores a worker named "<function>/<request id>", where the
// request id is a UUID in Lambda's lowercase form, as the function's name,
// the slash and the id's 16 bytes (36 bytes become 16); any other worker
// (an operator, a function without a request id) as a string.
func packWorker(w string) types.AttributeValue {
	i := strings.LastIndexByte(w, '/')
	if i < 0 {
		return s(w)
	}
	id, ok := uuidBytes(w[i+1:])
	if !ok {
		return s(w)
	}
	return &types.AttributeValueMemberB{Value: append([]byte(w[:i+1]), id...)}
}

// uuidBytes returns the 16 bytes of a UUID written in lowercase
// 8-4-4-4-12 form, and whether v is one; formatUUID writes them back.
func uuidBytes(v string) ([]byte, bool) {
	if len(v) != 36 || v[8] != '-' || v[13] != '-' || v[18] != '-' || v[23] != '-' {
		return nil, false
	}
	b, err := hex.DecodeString(v[:8] + v[9:13] + v[14:18] + v[19:23] + v[24:])
	if err != nil || formatUUID(b) != v {
		return nil, false
	}
	return b, true
}

func formatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// worker reads what packWorker wrote.
func (d *decoder) worker(name string) string {
	b, ok := d.m[name].(*types.AttributeValueMemberB)
	if !ok {
		return d.str(name)
	}
	n := len(b.Value) - 16
	if n < 1 || b.Value[n-1] != '/' {
		d.fail(name, "not a packed worker")
		return ""
	}
	return string(b.Value[:n]) + formatUUID(b.Value[n:])
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

// strOr reads a string attribute, or returns def when it is absent.
func (d *decoder) strOr(name, def string) string {
	if _, ok := d.m[name]; !ok {
		return def
	}
	return d.str(name)
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

// decodeEvent reads the history entry v that follows e's history so far,
// restoring what event left out.
func decodeEvent(v types.AttributeValue, e ledger.Entry) (ledger.Event, error) {
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
	// What event left out equals what was restored above; what it stored wins.
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
			ev, err := decodeEvent(v, e)
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
