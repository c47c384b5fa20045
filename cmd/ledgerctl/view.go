package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// The JSON shapes below are ledgerctl's output contract (explain --json and
// the export lines). Field names are snake_case; times are RFC 3339 UTC with
// nanoseconds; optional fields are omitted when empty. A ledger row holds no
// secret (no token, body or address), and neither do these views.

// rowView is one ledger row with its history and the chain's verification.
type rowView struct {
	DedupeKey string `json:"dedupe_key"`
	// IdempotencyKey is the key every transport attempt carried: the dedupe key.
	IdempotencyKey  string    `json:"idempotency_key"`
	Purpose         string    `json:"purpose"`
	ChallengeID     string    `json:"challenge_id"`
	Channel         string    `json:"channel"`
	Workflow        string    `json:"workflow"`
	WorkflowOrder   []string  `json:"workflow_order,omitempty"`
	State           string    `json:"state"`
	Version         int64     `json:"version"`
	ContentHash     string    `json:"content_hash"`
	DestinationRef  string    `json:"destination_ref"`
	SubjectRef      string    `json:"subject_ref,omitempty"`
	TemplateID      string    `json:"template_id"`
	TemplateVersion string    `json:"template_version"`
	PolicyVersion   string    `json:"policy_version"`
	ExpiresAt       string    `json:"expires_at"`
	CreatedAt       string    `json:"created_at"`
	UpdatedAt       string    `json:"updated_at"`
	RedriveAt       string    `json:"redrive_at,omitempty"`
	LeaseUntil      string    `json:"lease_until,omitempty"`
	NextCheckAt     string    `json:"next_check_at,omitempty"`
	FirstAttemptAt  string    `json:"first_attempt_at,omitempty"`
	NextAttemptAt   string    `json:"next_attempt_at,omitempty"`
	SlotAt          string    `json:"budget_slot_at,omitempty"`
	NotSentCode     string    `json:"not_sent_code,omitempty"`
	RetainUntil     string    `json:"retain_until,omitempty"`
	Attempts        int       `json:"attempts"`
	AckID           string    `json:"ack_id,omitempty"`
	Reason          string    `json:"reason,omitempty"`
	Mismatches      int       `json:"content_mismatches"`
	Chain           chainView `json:"chain"`
	// AttemptLog is one line per transport attempt, read from the history.
	AttemptLog []attemptView `json:"attempt_log"`
	History    []eventView   `json:"history"`
}

// attemptView is one transport attempt: when it started and what the
// provider's answer made of the row.
type attemptView struct {
	Attempt   int    `json:"attempt"`
	StartedAt string `json:"started_at"`
	// Result is the state the answer moved the row to ("" while in flight).
	Result        string `json:"result,omitempty"`
	Code          string `json:"not_sent_code,omitempty"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	AckID         string `json:"ack_id,omitempty"`
	By            string `json:"worker"`
}

// attemptLog reads the attempts from a history: each move to dispatching
// (and each same-key retry by reconcile) starts one; the next event of the
// same attempt that is not a side note (a content mismatch, a recheck)
// records what became of it.
func attemptLog(h []ledger.Event) []attemptView {
	var out []attemptView
	for _, ev := range h {
		starts := ev.To == ledger.Dispatching && ev.Kind == ledger.KindTransition ||
			ev.Kind == ledger.KindRetry && (len(out) == 0 || ev.Attempt > out[len(out)-1].Attempt)
		switch {
		case starts:
			out = append(out, attemptView{Attempt: ev.Attempt, StartedAt: jsonTime(ev.At), By: ev.Worker})
		case len(out) > 0 && out[len(out)-1].Result == "" && ev.Attempt == out[len(out)-1].Attempt &&
			ev.Kind != ledger.KindContentMismatch && ev.Kind != ledger.KindRecheck:
			a := &out[len(out)-1]
			a.Result, a.Code, a.NextAttemptAt, a.AckID = ev.To.String(), ev.Code, jsonTime(ev.NextAttemptAt), ev.AckID
		}
	}
	return out
}

// chainView says whether the row's hash chain verifies (ledger.Entry.Verify).
type chainView struct {
	Verified bool `json:"verified"`
	Entries  int  `json:"entries"`
	// BrokenAt is the index of the first history entry that fails (equal to
	// entries when an entry is missing at the end).
	BrokenAt *int   `json:"broken_at,omitempty"`
	Error    string `json:"error,omitempty"`
}

// eventView is one history entry.
type eventView struct {
	Index         int    `json:"index"`
	ID            string `json:"id"`
	Kind          string `json:"kind"`
	From          string `json:"from"`
	To            string `json:"to"`
	At            string `json:"at"`
	Worker        string `json:"worker"`
	Reason        string `json:"reason,omitempty"`
	PolicyVersion string `json:"policy_version"`
	Attempt       int    `json:"attempt"`
	AckID         string `json:"ack_id,omitempty"`
	Code          string `json:"not_sent_code,omitempty"`
	NextAttemptAt string `json:"next_attempt_at,omitempty"`
	// The fields of a provider-event entry (docs/intent-v2.md).
	ProviderType string `json:"provider_type,omitempty"`
	Detail       string `json:"detail,omitempty"`
	ProviderAt   string `json:"provider_at,omitempty"`
	Permanent    bool   `json:"permanent_failure,omitempty"`
	ContentHash  string `json:"content_hash,omitempty"`
	PrevHash     string `json:"prev_hash,omitempty"`
	Hash         string `json:"hash"`
}

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// textTime is the fixed-width time of text output.
// textTimeOf prints a jsonTime value the way textTime prints a time.
func textTimeOf(v string) string {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return v
	}
	return textTime(t)
}

func textTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// verifyChain runs Entry.Verify and keeps the index of the first failing
// entry.
func verifyChain(e ledger.Entry) chainView {
	cv := chainView{Entries: len(e.History)}
	err := e.Verify()
	if err == nil {
		cv.Verified = true
		return cv
	}
	cv.Error = err.Error()
	var ce *ledger.ChainError
	if errors.As(err, &ce) {
		cv.BrokenAt = &ce.Index
	}
	return cv
}

// brokenAt is the failing entry's index, or -1 if unknown.
func (cv chainView) brokenAt() int {
	if cv.BrokenAt == nil {
		return -1
	}
	return *cv.BrokenAt
}

func newEventView(i int, ev ledger.Event) eventView {
	return eventView{
		Index: i, ID: ev.ID, Kind: string(ev.Kind), From: ev.From.String(), To: ev.To.String(),
		At: jsonTime(ev.At), Worker: ev.Worker, Reason: ev.Reason, PolicyVersion: ev.PolicyVersion,
		Attempt: ev.Attempt, AckID: ev.AckID, Code: ev.Code, NextAttemptAt: jsonTime(ev.NextAttemptAt),
		ProviderType: ev.ProviderType, Detail: ev.Detail, ProviderAt: jsonTime(ev.ProviderAt), Permanent: ev.Permanent,
		ContentHash: ev.ContentHash, PrevHash: ev.Prev, Hash: ev.Hash,
	}
}

func newRowView(e ledger.Entry) rowView {
	v := rowView{
		DedupeKey: e.Key, IdempotencyKey: e.Key,
		Purpose: string(e.Identity.Purpose), ChallengeID: e.Identity.ChallengeID, Channel: string(e.Identity.Channel),
		Workflow: string(e.Workflow.Kind), State: e.State.String(), Version: e.Version,
		ContentHash: e.ContentHash, DestinationRef: e.DestinationRef, SubjectRef: e.SubjectRef,
		TemplateID: e.TemplateID, TemplateVersion: e.TemplateVersion, PolicyVersion: e.PolicyVersion,
		ExpiresAt: jsonTime(e.ExpiresAt), CreatedAt: jsonTime(e.CreatedAt), UpdatedAt: jsonTime(e.UpdatedAt),
		RedriveAt: jsonTime(e.RedriveAt), LeaseUntil: jsonTime(e.LeaseUntil), NextCheckAt: jsonTime(e.NextCheckAt), FirstAttemptAt: jsonTime(e.FirstAttemptAt),
		RetainUntil: jsonTime(e.RetainUntil), NextAttemptAt: jsonTime(e.NextAttemptAt), SlotAt: jsonTime(e.SlotAt),
		NotSentCode: e.NotSentCode, AttemptLog: attemptLog(e.History),
		Attempts: e.Attempts, AckID: e.AckID, Reason: e.Reason, Mismatches: e.Mismatches,
		Chain:   verifyChain(e),
		History: make([]eventView, len(e.History)),
	}
	for _, c := range e.Workflow.Order {
		v.WorkflowOrder = append(v.WorkflowOrder, string(c))
	}
	for i, ev := range e.History {
		v.History[i] = newEventView(i, ev)
	}
	return v
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printRow writes the readable timeline of one row.
// deadlineFields are the deadlines of an in-flight entry that are set.
func deadlineFields(e ledger.Entry) [][2]string {
	var out [][2]string
	for _, d := range []struct {
		name string
		at   time.Time
	}{{"re-drive at", e.RedriveAt}, {"lease until", e.LeaseUntil}, {"next check", e.NextCheckAt}} {
		if !d.at.IsZero() {
			out = append(out, [2]string{d.name, textTime(d.at)})
		}
	}
	return out
}

func printRow(w io.Writer, e ledger.Entry) {
	v := newRowView(e)
	fmt.Fprintf(w, "%s / %s  [%s]\n", e.Identity.ChallengeID, e.Identity.Channel, e.State)
	wf := string(e.Workflow.Kind)
	if len(v.WorkflowOrder) > 0 {
		wf += " (" + strings.Join(v.WorkflowOrder, " then ") + ")"
	}
	fields := [][2]string{
		{"dedupe key", e.Key + "  (the idempotency key of every attempt)"},
		{"purpose", string(e.Identity.Purpose)},
		{"workflow", wf},
		{"state", fmt.Sprintf("%s (version %d)", e.State, e.Version)},
		{"reason", orDash(e.Reason)},
		{"content hash", e.ContentHash},
		{"destination", orDash(e.DestinationRef) + "  (opaque reference)"},
		{"template", e.TemplateID + " v" + e.TemplateVersion},
		{"policy version", e.PolicyVersion},
		{"attempts", fmt.Sprintf("%d", e.Attempts)},
		{"ack id", orDash(e.AckID)},
		{"expires", textTime(e.ExpiresAt)},
		{"created", textTime(e.CreatedAt)},
		{"updated", textTime(e.UpdatedAt)},
	}
	if e.SubjectRef != "" {
		// Right after the destination: only rows whose intent named a subject have one.
		i := slices.IndexFunc(fields, func(f [2]string) bool { return f[0] == "destination" })
		fields = slices.Insert(fields, i+1, [2]string{"subject", e.SubjectRef + "  (opaque account reference)"})
	}
	fields = withLimitRule(fields, e)
	fields = append(fields, deadlineFields(e)...)
	if !e.NextAttemptAt.IsZero() {
		next := textTime(e.NextAttemptAt)
		if !e.SlotAt.IsZero() {
			next += "  (send-rate budget slot booked)"
		}
		fields = append(fields, [2]string{"next attempt", next}, [2]string{"not sent because", orDash(e.NotSentCode)})
	}
	if e.Mismatches > 0 {
		fields = append(fields, [2]string{"content mismatches", fmt.Sprintf("%d (blocked)", e.Mismatches)})
	}
	fields = append(fields, [2]string{"retained until", textTime(e.RetainUntil)})
	if v.Chain.Verified {
		fields = append(fields, [2]string{"hash chain", fmt.Sprintf("verified (%d entries)", v.Chain.Entries)})
	} else {
		fields = append(fields, [2]string{"hash chain", "BROKEN: " + v.Chain.Error})
	}
	for _, f := range fields {
		fmt.Fprintf(w, "  %-16s %s\n", f[0]+":", f[1])
	}
	if len(v.AttemptLog) > 0 {
		fmt.Fprintf(w, "  attempts:\n")
		for _, a := range v.AttemptLog {
			line := fmt.Sprintf("    #%d  %s  -> %s", a.Attempt, textTimeOf(a.StartedAt), orDash(a.Result))
			if a.Code != "" {
				line += "  not sent: " + a.Code
			}
			if a.NextAttemptAt != "" {
				line += "  next attempt " + textTimeOf(a.NextAttemptAt)
			}
			if a.AckID != "" {
				line += "  ack " + a.AckID
			}
			fmt.Fprintln(w, line+"  by "+orDash(a.By))
		}
	}
	fmt.Fprintf(w, "  history:\n")
	for i, ev := range e.History {
		mark := ""
		if !v.Chain.Verified && v.Chain.brokenAt() == i {
			mark = "  <-- chain broken here"
		}
		printEvent(w, "    ", i, ev, mark)
	}
}

// printEvent writes one history entry as a small block.
func printEvent(w io.Writer, indent string, i int, ev ledger.Event, mark string) {
	move := ev.From.String() + " -> " + ev.To.String()
	if ev.Kind != ledger.KindTransition {
		move += "  (" + string(ev.Kind) + ")"
	}
	fmt.Fprintf(w, "%s[%d] %s  %s%s\n", indent, i, textTime(ev.At), move, mark)
	pad := indent + "    "
	fmt.Fprintf(w, "%sreason:  %s\n", pad, orDash(ev.Reason))
	fmt.Fprintf(w, "%sworker:  %s   policy: %s   attempt: %d   ack id: %s\n", pad, orDash(ev.Worker), orDash(ev.PolicyVersion), ev.Attempt, orDash(ev.AckID))
	if ev.Code != "" || !ev.NextAttemptAt.IsZero() {
		fmt.Fprintf(w, "%snot sent: %s   next attempt: %s\n", pad, orDash(ev.Code), textTime(ev.NextAttemptAt))
	}
	if ev.Kind.Provider() {
		line := fmt.Sprintf("%sprovider: %s", pad, ev.ProviderType)
		if ev.Detail != "" {
			line += " " + ev.Detail
		}
		line += "   at " + textTime(ev.ProviderAt) + "   message: " + orDash(ev.AckID)
		if ev.Permanent {
			line += "   PERMANENT DELIVERY FAILURE"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "%scontent: %s\n", pad, orDash(ev.ContentHash))
	fmt.Fprintf(w, "%sevent:   %s   hash: %s\n", pad, orDash(ev.ID), shortHash(ev.Hash))
}

func shortHash(h string) string {
	if len(h) > 16 {
		return h[:16] + "..."
	}
	return orDash(h)
}

// enteredState returns when e entered its current state: the time of the
// last transition into it (UpdatedAt if the history does not say).
func enteredState(e ledger.Entry) time.Time {
	for i := len(e.History) - 1; i >= 0; i-- {
		if ev := e.History[i]; ev.Kind == ledger.KindTransition && ev.To == e.State {
			return ev.At
		}
	}
	return e.UpdatedAt
}

// age formats a duration for tables: whole seconds.
func age(d time.Duration) string {
	if d < 0 {
		return "-" + age(-d)
	}
	return d.Truncate(time.Second).String()
}

// withLimitRule adds, after the reason, the send limit rule that stopped e
// (the reason gives its window and count), if one did.
func withLimitRule(fields [][2]string, e ledger.Entry) [][2]string {
	rule, ok := ledger.LimitRule(e)
	if !ok {
		return fields
	}
	i := slices.IndexFunc(fields, func(f [2]string) bool { return f[0] == "reason" })
	return slices.Insert(fields, i+1, [2]string{"stopped by", "send limit rule " + string(rule) + "  (nothing sent)"})
}
