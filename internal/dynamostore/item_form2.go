package dynamostore

import (
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// The compact stored form (form 2, issue 44): every write of a
// production-shaped row under 1 KB, so each costs one write unit. A row
// keeps form 1's names and types for what other components read by name
// (the key, state, ttl, the index keys open_pk, open_due, subject_ref,
// destination_ref and created_at, and history with its entries' hash);
// everything else has a short name, times are Unix milliseconds (numbers),
// fixed-format ids are bytes, and nothing decode can restore is stored.
// docs/digests.md §2.1 describes it for a reader outside this package.
//
// An attribute whose value equals its default is left out; one whose value
// is "" while its default is not is stored as NULL.
const (
	// attrForm marks a row in form 2 (the number 2); form 1 has no marker.
	attrForm = "f"

	f2Purpose         = "p"  // absent: password-reset
	f2Challenge       = "c"  // packID
	f2Channel         = "ch" //
	f2Workflow        = "wf" // absent: single
	f2Order           = "wo" // list of channels
	f2Version         = "v"  //
	f2ContentHash     = "h"  // hexText
	f2TemplateID      = "t"  //
	f2TemplateVersion = "tv" //
	f2PolicyVersion   = "pv" //
	f2ExpiresAt       = "x"  // Unix ms, as are all times below
	f2IssuedAt        = "i"  //
	f2UpdatedAt       = "u"  // always stored: the export's scan filters on it
	f2Lease           = "l"  // a claim's re-drive time or a dispatching row's lease
	f2NextCheckAt     = "nc" //
	f2FirstAttemptAt  = "fa" //
	f2AdmittedAt      = "ad" //
	f2NextAttemptAt   = "na" //
	f2SlotAt          = "sl" //
	f2NotSentCode     = "ns" // packText
	f2Attempts        = "a"  // absent: 0
	f2AckID           = "ak" // packID; absent: the newest history entry's ack
	f2Reason          = "r"  // packText; absent: the newest transition entry's reason
	f2Mismatches      = "mm" // absent: 0
)

// The keys of a history entry in form 2. Defaults come from the entry
// before it (for the first, an entry in state none at the row's creation
// with no worker, attempt or ack) and from the row's immutable attributes,
// never from its mutable ones: an entry is written once and must read the
// same after every later write.
const (
	evHash     = attrHash // hexText
	evID       = "id"     // hexText
	evPID      = "pe"     // a provider event's id "pe-<32 hex>": its 16 bytes
	evFrom     = "from"   // state code; absent: the previous entry's to
	evTo       = "to"     // state code; absent: from
	evAt       = "at"     // ms after the previous entry's at; absent: 0
	evBy       = "by"     // packBy; absent: the previous entry's worker
	evKind     = "k"      // kind code; absent: transition
	evPolicy   = "pv"     // absent: the row's policy version
	evAttempt  = "n"      // absent: the previous entry's attempt
	evContent  = "ch"     // hexText; absent: the row's content hash
	evReason   = "why"    // packText; absent: derivedReason
	evAck      = "ack"    // packID; absent: the previous entry's ack
	evCode     = "c"      // packText
	evNext     = "nx"     // ms after at
	evPType    = "pt"     //
	evDetail   = "d"      //
	evPAt      = "pa"     // ms after at
	evPermanen = "p"      // BOOL; absent: false
)

// stateCodes and kindCodes are the numbers form 2 stores states and event
// kinds as (their index). They are part of the stored form: append only.
// A state or kind not listed is stored as its text.
var (
	stateCodes = []ledger.State{
		ledger.None, ledger.Held, ledger.Claimed, ledger.Dispatching, ledger.Deferred, ledger.Accepted, ledger.Rejected,
		ledger.Unknown, ledger.Expired, ledger.Quarantined, ledger.Abandoned, ledger.Suppressed, ledger.Limited,
	}
	kindCodes = []ledger.EventKind{
		ledger.KindTransition, ledger.KindContentMismatch, ledger.KindRetry, ledger.KindRecheck, ledger.KindDeferral,
		// providerCodes: the provider-event kinds, as derivedReason knows them
		ledger.KindProviderSent, ledger.KindDelivered, ledger.KindBounced, ledger.KindComplained,
		ledger.KindDeliveryDelayed, ledger.KindProviderRejected, ledger.KindDeliveryFailed,
	}
	providerCodes = kindCodes[5:12]
)

// form2Row and form2Entry list the attributes form 2 may hold: decode
// refuses an item with any other, as it refuses a value it cannot read.
var (
	form2Row = names(AttrPK, AttrState, AttrTTL, AttrOpenPK, AttrOpenDue, attrDestinationRef, AttrSubjectRef,
		attrCreatedAt, attrHistory, attrForm, f2Purpose, f2Challenge, f2Channel, f2Workflow, f2Order, f2Version,
		f2ContentHash, f2TemplateID, f2TemplateVersion, f2PolicyVersion, f2ExpiresAt, f2IssuedAt, f2UpdatedAt,
		f2Lease, f2NextCheckAt, f2FirstAttemptAt, f2AdmittedAt, f2NextAttemptAt, f2SlotAt, f2NotSentCode,
		f2Attempts, f2AckID, f2Reason, f2Mismatches)
	form2Entry = names(evHash, evID, evPID, evFrom, evTo, evAt, evBy, evKind, evPolicy, evAttempt, evContent,
		evReason, evAck, evCode, evNext, evPType, evDetail, evPAt, evPermanen)
)

func names(ns ...string) map[string]bool {
	m := make(map[string]bool, len(ns))
	for _, n := range ns {
		m[n] = true
	}
	return m
}

// derivedReason is the reason an entry that follows p is stored without:
// the text the ledger gives the most common entries (a claim, a dispatch's
// start, a transport's acceptance, a provider event, a not-sent answer's
// deferral and its retry). It is part of the stored form: an entry whose
// reason is anything else stores it, and this text must never change, or
// rows stored without it would read differently.
func derivedReason(ev, p ledger.Event) string {
	if slices.Contains(providerCodes, ev.Kind) {
		r := "provider reported " + ev.ProviderType
		if ev.Detail != "" {
			r += " (" + ev.Detail + ")"
		}
		if ev.Permanent {
			r += ": permanent delivery failure"
		}
		return r
	}
	if ev.Kind != ledger.KindTransition {
		return ""
	}
	switch [2]ledger.State{ev.From, ev.To} {
	case [2]ledger.State{ledger.None, ledger.Claimed}:
		return "intent claimed"
	case [2]ledger.State{ledger.Claimed, ledger.Dispatching}:
		return "dispatch started"
	case [2]ledger.State{ledger.Dispatching, ledger.Accepted}:
		return "transport accepted"
	case [2]ledger.State{ledger.Dispatching, ledger.Deferred}:
		if ev.Code != "" && !ev.NextAttemptAt.IsZero() {
			return fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s",
				ev.Code, ev.Attempt, ev.NextAttemptAt.UTC().Format(time.RFC3339Nano))
		}
	case [2]ledger.State{ledger.Deferred, ledger.Dispatching}:
		if p.Code != "" {
			return "retry after not sent: " + p.Code
		}
	}
	return ""
}

// before is what history entry i of e follows: entry i-1, or for the
// first an entry in state none at the row's creation.
func before(e ledger.Entry, i int) ledger.Event {
	if i == 0 {
		return ledger.Event{At: e.CreatedAt}
	}
	return e.History[i-1]
}

// transitionReason is the reason of the newest transition entry of h: the
// row's reason unless a write set another.
func transitionReason(h []ledger.Event) string {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Kind == ledger.KindTransition {
			return h[i].Reason
		}
	}
	return ""
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

var null types.AttributeValue = &types.AttributeValueMemberNULL{Value: true}

// text is v as a string, and "" as NULL (one byte, and no empty string).
func text(v string) types.AttributeValue {
	if v == "" {
		return null
	}
	return s(v)
}

// hexText is compact for a field that may be "".
func hexText(v string) types.AttributeValue {
	if v == "" {
		return null
	}
	return compact(v)
}

// packID stores an id as bytes when it is made of lowercase hex: a UUID
// as its 16 bytes, ids like an SES message id ("0100018c…-<uuid>-000000")
// as their dash-separated hex runs, each its length in bytes and its
// bytes; anything else as text. unpackID reads it back.
func packID(v string) types.AttributeValue {
	if b, ok := uuidBytes(v); ok {
		return &types.AttributeValueMemberB{Value: b}
	}
	var out []byte
	for _, seg := range strings.Split(v, "-") {
		b, err := hex.DecodeString(seg)
		if err != nil || len(b) > 255 || hex.EncodeToString(b) != seg {
			return text(v)
		}
		out = append(append(out, byte(len(b))), b...)
	}
	if len(out) == 16 || len(out) >= len(v) {
		return text(v)
	}
	return &types.AttributeValueMemberB{Value: out}
}

func unpackID(b []byte) (string, bool) {
	if len(b) == 16 {
		return formatUUID(b), true
	}
	var segs []string
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return "", false
		}
		segs = append(segs, hex.EncodeToString(b[1:1+n]))
		b = b[1+n:]
	}
	return strings.Join(segs, "-"), len(segs) > 0
}

func unhex(b []byte) (string, bool) { return hex.EncodeToString(b), true }

// enum stores v as its index in codes, or as text if it has none.
func enum[T ~string](codes []T, v T) types.AttributeValue {
	if i := slices.Index(codes, v); i >= 0 {
		return n(int64(i))
	}
	return text(string(v))
}

// setText sets m[name] to v, encoded by enc, unless v is def.
func setText(m map[string]types.AttributeValue, name, v, def string, enc func(string) types.AttributeValue) {
	switch {
	case v == def:
	case v == "":
		m[name] = null
	default:
		m[name] = enc(v)
	}
}

// setMs sets m[name] to t in Unix ms, unless t is zero.
func setMs(m map[string]types.AttributeValue, name string, t time.Time) {
	if !t.IsZero() {
		m[name] = n(ms(t))
	}
}

// event2 encodes history entry i of the row e in form 2.
func event2(ev ledger.Event, e ledger.Entry, i int) types.AttributeValue {
	p := before(e, i)
	m := map[string]types.AttributeValue{evHash: hexText(ev.Hash)}
	if id, ok := strings.CutPrefix(ev.ID, "pe-"); ok && len(id) == 32 && strings.ToLower(id) == id {
		if b, err := hex.DecodeString(id); err == nil {
			m[evPID] = &types.AttributeValueMemberB{Value: b}
		}
	}
	if m[evPID] == nil {
		m[evID] = hexText(ev.ID)
	}
	if ev.From != p.To {
		m[evFrom] = enum(stateCodes, ev.From)
	}
	if ev.To != ev.From {
		m[evTo] = enum(stateCodes, ev.To)
	}
	if d := ms(ev.At) - ms(p.At); d != 0 {
		m[evAt] = n(d)
	}
	setText(m, evBy, ev.Worker, p.Worker, packBy)
	if ev.Kind != ledger.KindTransition {
		m[evKind] = enum(kindCodes, ev.Kind)
	}
	setText(m, evPolicy, ev.PolicyVersion, e.PolicyVersion, s)
	if ev.Attempt != p.Attempt {
		m[evAttempt] = n(int64(ev.Attempt))
	}
	setText(m, evContent, ev.ContentHash, e.ContentHash, compact)
	setText(m, evReason, ev.Reason, derivedReason(ev, p), packText)
	setText(m, evAck, ev.AckID, p.AckID, packID)
	setText(m, evCode, ev.Code, "", packText)
	setText(m, evPType, ev.ProviderType, "", s)
	setText(m, evDetail, ev.Detail, "", s)
	if !ev.NextAttemptAt.IsZero() {
		m[evNext] = n(ms(ev.NextAttemptAt) - ms(ev.At))
	}
	if !ev.ProviderAt.IsZero() {
		m[evPAt] = n(ms(ev.ProviderAt) - ms(ev.At))
	}
	if ev.Permanent {
		m[evPermanen] = &types.AttributeValueMemberBOOL{Value: true}
	}
	return &types.AttributeValueMemberM{Value: m}
}

// item encodes a whole row in form 2, for PutItem.
func (st *Store) item(e ledger.Entry) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		AttrPK:        s(e.Key),
		attrForm:      n(2),
		attrCreatedAt: s(fmtTime(e.CreatedAt)),
	}
	setText(m, f2Purpose, string(e.Identity.Purpose), string(ledger.PurposePasswordReset), s)
	setText(m, f2Challenge, e.Identity.ChallengeID, "", packID)
	setText(m, f2Channel, string(e.Identity.Channel), "", s)
	setText(m, f2Workflow, string(e.Workflow.Kind), string(ledger.Single), s)
	setText(m, f2ContentHash, e.ContentHash, "", compact)
	setText(m, f2TemplateID, e.TemplateID, "", s)
	setText(m, f2TemplateVersion, e.TemplateVersion, "", s)
	setText(m, f2PolicyVersion, e.PolicyVersion, "", s)
	setMs(m, f2ExpiresAt, e.ExpiresAt)
	setMs(m, f2IssuedAt, e.IssuedAt)
	// The timeline indexes' keys: an index key attribute may not be an
	// empty string, and a row without a subject is in no subject's index.
	if e.DestinationRef != "" {
		m[attrDestinationRef] = s(e.DestinationRef)
	}
	if e.SubjectRef != "" {
		m[AttrSubjectRef] = s(e.SubjectRef)
	}
	if len(e.Workflow.Order) > 0 {
		order := make([]types.AttributeValue, len(e.Workflow.Order))
		for i, c := range e.Workflow.Order {
			order[i] = s(string(c))
		}
		m[f2Order] = &types.AttributeValueMemberL{Value: order}
	}
	hist := make([]types.AttributeValue, len(e.History))
	for i, ev := range e.History {
		hist[i] = event2(ev, e, i)
	}
	m[attrHistory] = &types.AttributeValueMemberL{Value: hist}
	for k, v := range st.mutable(e) {
		if v != nil {
			m[k] = v
		}
	}
	return m
}

// mutable returns the attributes a transition may change; a nil value means
// the attribute is removed.
func (st *Store) mutable(e ledger.Entry) map[string]types.AttributeValue {
	m := map[string]types.AttributeValue{
		AttrState:   s(string(e.State)),
		f2Version:   n(e.Version),
		f2UpdatedAt: n(ms(e.UpdatedAt)),
		AttrTTL:     n(e.RetainUntil.Unix()),
	}
	for _, name := range []string{f2Attempts, f2Mismatches, f2Lease, f2NextCheckAt, f2FirstAttemptAt, f2AdmittedAt,
		f2NextAttemptAt, f2SlotAt, f2NotSentCode, f2AckID, f2Reason, AttrOpenPK, AttrOpenDue} {
		m[name] = nil
	}
	if e.Attempts != 0 {
		m[f2Attempts] = n(int64(e.Attempts))
	}
	if e.Mismatches != 0 {
		m[f2Mismatches] = n(int64(e.Mismatches))
	}
	// One attribute for the two deadlines of an in-flight row: a claim's
	// re-drive time, a dispatching row's lease (only one is set in any
	// state; decode tells them apart by the state).
	lease := e.LeaseUntil
	if e.State == ledger.Claimed {
		lease = e.RedriveAt
	}
	setMs(m, f2Lease, lease)
	setMs(m, f2NextCheckAt, e.NextCheckAt)
	setMs(m, f2FirstAttemptAt, e.FirstAttemptAt)
	setMs(m, f2AdmittedAt, e.AdmittedAt)
	setMs(m, f2NextAttemptAt, e.NextAttemptAt)
	setMs(m, f2SlotAt, e.SlotAt)
	setText(m, f2NotSentCode, e.NotSentCode, "", packText)
	setText(m, f2AckID, e.AckID, e.Last().AckID, packID)
	setText(m, f2Reason, e.Reason, transitionReason(e.History), packText)
	if e.State.Open() {
		m[AttrOpenPK] = s(st.openPK(e.State, e.Key))
		m[AttrOpenDue] = s(openDue(e))
	}
	return m
}

// text2 reads a string field of form 2: absent is def, NULL is "", bytes
// are read by bin (nil: bytes are refused).
func (d *decoder) text2(name, def string, bin func([]byte) (string, bool)) string {
	switch v := d.m[name].(type) {
	case nil:
		return def
	case *types.AttributeValueMemberNULL:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberB:
		if bin != nil {
			if t, ok := bin(v.Value); ok {
				return t
			}
		}
		d.fail(name, "bytes that do not read as its value")
		return ""
	}
	d.fail(name, "not a string")
	return ""
}

// numOr reads a number, or returns def when it is absent.
func (d *decoder) numOr(name string, def int64) int64 {
	if _, ok := d.m[name]; !ok {
		return def
	}
	return d.num(name)
}

// msTime reads a time in Unix ms; absent is the zero time.
func (d *decoder) msTime(name string) time.Time {
	if _, ok := d.m[name]; !ok {
		return time.Time{}
	}
	return fromMs(d.num(name))
}

// after reads a time stored as ms after t; absent is the zero time.
func (d *decoder) after(name string, t time.Time) time.Time {
	if _, ok := d.m[name]; !ok {
		return time.Time{}
	}
	return fromMs(ms(t) + d.num(name))
}

// code reads what enum wrote.
func code[T ~string](d *decoder, name string, codes []T, def T) T {
	if v, ok := d.m[name].(*types.AttributeValueMemberN); ok {
		i := d.num(name)
		if i < 0 || i >= int64(len(codes)) {
			d.fail(name, "unknown code "+v.Value)
			return def
		}
		return codes[i]
	}
	return T(d.text2(name, string(def), nil))
}

// strict fails d if its item holds an attribute not in known.
func (d *decoder) strict(known map[string]bool) {
	for _, k := range slices.Sorted(maps.Keys(d.m)) {
		if !known[k] {
			d.fail(k, "not an attribute of a row in form 2")
		}
	}
}

// decodeEvent2 reads the form-2 history entry v that follows e's history
// so far, restoring what event2 left out.
func decodeEvent2(v types.AttributeValue, e ledger.Entry) (ledger.Event, error) {
	mv, ok := v.(*types.AttributeValueMemberM)
	if !ok {
		return ledger.Event{}, errors.New("entry is not a map")
	}
	h := &decoder{m: mv.Value}
	h.strict(form2Entry)
	p := before(e, len(e.History))
	ev := ledger.Event{Hash: h.text2(evHash, "", unhex), ID: h.text2(evID, "", unhex), Prev: p.Hash}
	if _, ok := mv.Value[evHash]; !ok {
		h.fail(evHash, "missing")
	}
	if b, ok := mv.Value[evPID].(*types.AttributeValueMemberB); ok && len(b.Value) == 16 {
		ev.ID = "pe-" + hex.EncodeToString(b.Value)
	} else if ok || mv.Value[evPID] != nil {
		h.fail(evPID, "not 16 bytes")
	}
	ev.From = code(h, evFrom, stateCodes, p.To)
	ev.To = code(h, evTo, stateCodes, ev.From)
	ev.At = fromMs(ms(p.At) + h.numOr(evAt, 0))
	ev.Worker = h.text2(evBy, p.Worker, unpackBy)
	ev.Kind = code(h, evKind, kindCodes, ledger.KindTransition)
	ev.PolicyVersion = h.text2(evPolicy, e.PolicyVersion, nil)
	ev.Attempt = int(h.numOr(evAttempt, int64(p.Attempt)))
	ev.ContentHash = h.text2(evContent, e.ContentHash, unhex)
	ev.AckID = h.text2(evAck, p.AckID, unpackID)
	ev.Code, ev.ProviderType, ev.Detail = h.text2(evCode, "", unpackText), h.text2(evPType, "", nil), h.text2(evDetail, "", nil)
	ev.NextAttemptAt, ev.ProviderAt = h.after(evNext, ev.At), h.after(evPAt, ev.At)
	ev.Permanent = h.flag(evPermanen)
	ev.Reason = h.text2(evReason, derivedReason(ev, p), unpackText)
	return ev, h.err
}

// decodeForm2 reads a row in form 2. It rejects items it cannot read
// rather than returning a half-filled row.
func decodeForm2(m map[string]types.AttributeValue) (ledger.Entry, error) {
	d := &decoder{m: m}
	d.strict(form2Row)
	if f := d.num(attrForm); f != 2 {
		d.fail(attrForm, fmt.Sprintf("form %d is not one this store reads", f))
	}
	e := ledger.Entry{
		Key: d.str(AttrPK),
		Identity: ledger.Identity{
			Purpose:     ledger.Purpose(d.text2(f2Purpose, string(ledger.PurposePasswordReset), nil)),
			ChallengeID: d.text2(f2Challenge, "", unpackID),
			Channel:     ledger.Channel(d.text2(f2Channel, "", nil)),
		},
		Workflow:        ledger.Workflow{Kind: ledger.WorkflowKind(d.text2(f2Workflow, string(ledger.Single), nil))},
		State:           d.state(AttrState),
		Version:         d.num(f2Version),
		ContentHash:     d.text2(f2ContentHash, "", unhex),
		DestinationRef:  d.str(attrDestinationRef),
		SubjectRef:      d.str(AttrSubjectRef),
		TemplateID:      d.text2(f2TemplateID, "", nil),
		TemplateVersion: d.text2(f2TemplateVersion, "", nil),
		PolicyVersion:   d.text2(f2PolicyVersion, "", nil),
		ExpiresAt:       d.msTime(f2ExpiresAt),
		CreatedAt:       d.time(attrCreatedAt),
		IssuedAt:        d.msTime(f2IssuedAt),
		UpdatedAt:       fromMs(d.num(f2UpdatedAt)),
		LeaseUntil:      d.msTime(f2Lease),
		NextCheckAt:     d.msTime(f2NextCheckAt),
		FirstAttemptAt:  d.msTime(f2FirstAttemptAt),
		AdmittedAt:      d.msTime(f2AdmittedAt),
		NextAttemptAt:   d.msTime(f2NextAttemptAt),
		SlotAt:          d.msTime(f2SlotAt),
		NotSentCode:     d.text2(f2NotSentCode, "", unpackText),
		Attempts:        int(d.num(f2Attempts)),
		Mismatches:      int(d.num(f2Mismatches)),
	}
	if e.State == ledger.Claimed {
		e.RedriveAt, e.LeaseUntil = e.LeaseUntil, time.Time{}
	}
	if ttl := d.num(AttrTTL); ttl != 0 {
		e.RetainUntil = time.Unix(ttl, 0).UTC()
	}
	e.Workflow.Order = d.channels(f2Order)
	d.history(&e, decodeEvent2)
	e.AckID = d.text2(f2AckID, e.Last().AckID, unpackID)
	e.Reason = d.text2(f2Reason, transitionReason(e.History), unpackText)
	if e.Key == "" {
		d.fail(AttrPK, "missing")
	}
	if d.err != nil {
		return ledger.Entry{}, d.err
	}
	return e, nil
}

// channels reads a list of channels.
func (d *decoder) channels(name string) []ledger.Channel {
	l, ok := d.m[name].(*types.AttributeValueMemberL)
	if !ok {
		if d.m[name] != nil {
			d.fail(name, "not a list")
		}
		return nil
	}
	var out []ledger.Channel
	for _, v := range l.Value {
		if sv, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, ledger.Channel(sv.Value))
		} else {
			d.fail(name, "not a list of strings")
		}
	}
	return out
}

// history reads the history list into e, entry by entry with decodeEntry.
func (d *decoder) history(e *ledger.Entry, decodeEntry func(types.AttributeValue, ledger.Entry) (ledger.Event, error)) {
	l, ok := d.m[attrHistory].(*types.AttributeValueMemberL)
	if !ok {
		d.fail(attrHistory, "not a list")
		return
	}
	for _, v := range l.Value {
		ev, err := decodeEntry(v, *e)
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("history: %w", err)
		}
		e.History = append(e.History, ev)
	}
}
