package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/vectors"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// The evidence vectors: export.jsonl is what `ledgerctl export` writes for
// a few rows with real histories (and a few tampered with), and chain.json
// says, for each line, whether its hash chain verifies, where it breaks,
// and the preimage of every entry's hash, so that a reviewer's own verifier
// can be checked against them (docs/intent-v2.md, part 2).
const (
	exportFile = "export.jsonl"
	chainFile  = "chain.json"
)

type chainDoc struct {
	Description string        `json:"description"`
	Rows        []chainVector `json:"rows"`
}

type chainVector struct {
	Name string `json:"name"`
	// Line is the row's line number in export.jsonl, from 1.
	Line      int    `json:"line"`
	DedupeKey string `json:"dedupe_key"`
	Verified  bool   `json:"verified"`
	// BrokenAt is the first entry that fails; len(history) when an entry
	// is missing at the end.
	BrokenAt *int `json:"broken_at"`
	// Preimages are the bytes each entry's hash is the SHA-256 of (as
	// text), computed from the entry as exported.
	Preimages []string `json:"preimages"`
}

// historyRows runs the ledger's use cases on a memory store with a fixed
// clock, fixed event ids and a scripted transport, and returns the rows they
// leave, each named.
func historyRows(t *testing.T) ([]string, []ledger.Entry) {
	t.Helper()
	ctx := context.Background()
	env := ledgertest.NewEnv(&memstore.Store{})
	ids := 0
	env.Cases.NewID = func() string { ids++; return fmt.Sprintf("%032x", ids) }
	env.Cases.Jitter = func() float64 { return 0.5 }
	env.Cases.Sleep = func(context.Context, time.Duration) error { return nil }
	env.Clock.Advance(1234567 * time.Microsecond) // times with a millisecond fraction
	script := map[string][]ledgertest.Behavior{}
	env.Transport.Script = func(s ledger.Send) ledgertest.Behavior {
		b := ledgertest.Accept
		if q := script[s.IdempotencyKey]; len(q) > 0 {
			b, script[s.IdempotencyKey] = q[0], q[1:]
		}
		return b
	}
	var names []string
	var keys []string
	claim := func(name string, i int, ch ledger.Channel, ttl time.Duration, behaviors ...ledgertest.Behavior) ledger.Intent {
		in, sealed := ledgertest.Intent(i, ch, env.Clock.Now(), ttl)
		script[in.Key()] = behaviors
		if _, err := env.Cases.Claim(ctx, in, sealed, "claim/4d1c3f7e-0001"); err != nil {
			t.Fatalf("%s: claim: %v", name, err)
		}
		names, keys = append(names, name), append(keys, in.Key())
		return in
	}
	dispatch := func(in ledger.Intent) {
		env.Clock.Advance(73 * time.Millisecond)
		if _, err := env.Cases.Dispatch(ctx, in.Key(), "dispatch/9b2e6a10-0002"); err != nil {
			t.Fatalf("dispatch %s: %v", in.ChallengeID, err)
		}
	}

	accepted := claim("email accepted", 1, ledger.Email, 10*time.Minute)
	dispatch(accepted)
	// The same identity again with other content: blocked and recorded.
	other, sealed := ledgertest.Intent(1, ledger.Email, env.Clock.Now(), 10*time.Minute)
	other.ContentHash = ledger.ContentHash(other.TemplateID, "4", ledgertest.Message(1, ledger.Email))
	env.Clock.Advance(time.Second)
	if _, err := env.Cases.Claim(ctx, other, sealed, "claim/4d1c3f7e-0003"); err != nil {
		t.Fatal(err)
	}

	throttled := claim("sms throttled, then accepted", 2, ledger.SMS, 10*time.Minute, ledgertest.Throttle)
	dispatch(throttled)
	env.Clock.Advance(5 * time.Second)
	dispatch(throttled)

	rejected := claim("sms rejected", 3, ledger.SMS, 10*time.Minute, ledgertest.Reject)
	dispatch(rejected)

	claim("email arrived expired", 4, ledger.Email, -time.Second)

	lost := claim("email acknowledgement lost, abandoned by an operator", 5, ledger.Email, 10*time.Minute, ledgertest.AcceptThenDrop)
	dispatch(lost)
	env.Clock.Advance(2 * time.Minute)
	if _, err := env.Cases.Reconcile(ctx, "reconcile/5e0f1a2b-0004", 10); err != nil {
		t.Fatal(err)
	}
	env.Clock.Advance(90 * time.Second)
	if _, err := env.Cases.Resolve(ctx, lost.Key(), ledger.DecideAbandoned, "provider has no record", "", "operator:arn:aws:iam::111122223333:user/oncall"); err != nil {
		t.Fatal(err)
	}

	// From here the provider publishes events, so dispatch signs the send
	// and the events carry its attempt proof back (only genuine events count).
	env.Transport.Events = true
	bounced := claim("email accepted, then delivered and hard-bounced (provider events)", 6, ledger.Email, 10*time.Minute)
	dispatch(bounced)
	recordBouncedEvents(t, ctx, env, bounced)
	return names, storedRows(t, ctx, env.Store, keys)
}

// storedRows reads the rows of keys back from the store.
func storedRows(t *testing.T, ctx context.Context, store ledger.Store, keys []string) []ledger.Entry {
	t.Helper()
	rows := make([]ledger.Entry, len(keys))
	for i, k := range keys {
		e, err := store.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = e
	}
	return rows
}

// recordBouncedEvents records the provider's delivery and hard bounce of the
// bounced send, each carrying the send's attempt proof back.
func recordBouncedEvents(t *testing.T, ctx context.Context, env *ledgertest.Env, bounced ledger.Intent) {
	t.Helper()
	attempt, proof, ok := env.Transport.Carried(bounced.Key())
	if !ok || proof == "" {
		t.Fatalf("the send of %s carried no attempt proof", bounced.ChallengeID)
	}
	for _, p := range []ledger.ProviderEvent{
		{Kind: ledger.KindDelivered, Type: "Delivery"},
		{Kind: ledger.KindBounced, Type: "Bounce", Detail: "Permanent/General", Permanent: true},
	} {
		env.Clock.Advance(2 * time.Second)
		p.Key, p.Channel, p.MessageID, p.At = bounced.Key(), ledger.Email, "0102018f3a7e-4b1c-example-000000", env.Clock.Now().Add(-time.Second)
		p.Attempt, p.Proof = attempt, proof
		if _, err := env.Cases.RecordProviderEvent(ctx, p, "events/6a7b8c9d-0005"); err != nil {
			t.Fatal(err)
		}
	}

}

// tampered returns rows edited the ways the chain must detect, each named.
func tampered(rows []ledger.Entry) ([]string, []ledger.Entry) {
	edit := func(e ledger.Entry, f func(e *ledger.Entry)) ledger.Entry {
		e.History = slices.Clone(e.History)
		f(&e)
		return e
	}
	accepted, throttled := rows[0], rows[1]
	return []string{
			"tampered: reason of entry 1 edited",
			"tampered: entry 1 removed",
			"tampered: entries 1 and 2 swapped",
			"tampered: last entry cut off (row state left)",
			"tampered: not-sent code of the deferral edited",
		}, []ledger.Entry{
			edit(accepted, func(e *ledger.Entry) { e.History[1].Reason = "dispatch started by hand" }),
			edit(accepted, func(e *ledger.Entry) { e.History = slices.Delete(e.History, 1, 2) }),
			edit(accepted, func(e *ledger.Entry) { e.History[1], e.History[2] = e.History[2], e.History[1] }),
			edit(throttled, func(e *ledger.Entry) { e.History = e.History[:len(e.History)-1] }),
			edit(throttled, func(e *ledger.Entry) {
				for i := range e.History {
					if e.History[i].Code != "" {
						e.History[i].Code = "SendingPausedException"
						return
					}
				}
			}),
		}
}

// TestVectorsChain writes the evidence of real histories as export lines,
// then reads them back the way an independent verifier would (from the
// JSON alone, following docs/intent-v2.md): it rebuilds each entry's hash
// preimage, checks that the Go implementation's hashes are their SHA-256,
// and that the documented verdict (verified, or the first broken entry)
// matches Entry.Verify's.
func TestVectorsChain(t *testing.T) {
	names, rows := historyRows(t)
	tn, tr := tampered(rows)
	names, rows = append(names, tn...), append(rows, tr...)

	var export bytes.Buffer
	enc := json.NewEncoder(&export) // as the export command writes its lines
	doc := chainDoc{Description: "For each line of export.jsonl (ledgerctl export output): whether its hash chain verifies, " +
		"the first entry that breaks it (len(history) when one is missing at the end) and the preimage of every entry's hash " +
		"as the exported entry gives it. See docs/intent-v2.md, part 2."}
	for i, row := range rows {
		if err := enc.Encode(newRowView(row)); err != nil {
			t.Fatal(err)
		}
		v := chainVector{Name: names[i], Line: i + 1, DedupeKey: row.Key, Verified: row.Verify() == nil}
		var ce *ledger.ChainError
		if err := row.Verify(); errors.As(err, &ce) {
			v.BrokenAt = &ce.Index
		}
		doc.Rows = append(doc.Rows, v)
	}

	// Read the lines back as a verifier would and fill in the preimages.
	lines := strings.Split(strings.TrimSuffix(export.String(), "\n"), "\n")
	for i, line := range lines {
		got, err := verifyExportLine([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		want := doc.Rows[i]
		if got.Verified != want.Verified || !equalIndex(got.BrokenAt, want.BrokenAt) {
			t.Errorf("%s: independent verifier says verified=%v broken_at=%v; Entry.Verify says %v %v",
				want.Name, got.Verified, deref(got.BrokenAt), want.Verified, deref(want.BrokenAt))
		}
		doc.Rows[i].Preimages = got.Preimages
	}
	if len(lines) != len(rows) {
		t.Fatalf("%d export lines for %d rows", len(lines), len(rows))
	}

	if !vectors.Updating() {
		var file chainDoc
		vectors.Load(t, chainFile, &file)
		raw, err := os.ReadFile(filepath.Join(vectors.Dir(t), exportFile))
		if err != nil {
			t.Fatal(err)
		}
		fileLines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		if len(fileLines) != len(file.Rows) {
			t.Fatalf("%s has %d lines, %s %d rows", exportFile, len(fileLines), chainFile, len(file.Rows))
		}
		for i, want := range file.Rows {
			t.Run(want.Name, func(t *testing.T) {
				got, err := verifyExportLine([]byte(fileLines[i]))
				if err != nil {
					t.Fatal(err)
				}
				if got.Verified != want.Verified || !equalIndex(got.BrokenAt, want.BrokenAt) || !slices.Equal(got.Preimages, want.Preimages) {
					t.Errorf("verified=%v broken_at=%v preimages differ=%v; file says %v %v",
						got.Verified, deref(got.BrokenAt), !slices.Equal(got.Preimages, want.Preimages), want.Verified, deref(want.BrokenAt))
				}
				// The Go implementation agrees on the line as exported.
				e, err := entryFromExport([]byte(fileLines[i]))
				if err != nil {
					t.Fatal(err)
				}
				var ce *ledger.ChainError
				verr := e.Verify()
				if (verr == nil) != want.Verified || (errors.As(verr, &ce) && !equalIndex(&ce.Index, want.BrokenAt)) {
					t.Errorf("Entry.Verify = %v; file says verified=%v broken_at=%v", verr, want.Verified, deref(want.BrokenAt))
				}
			})
		}
	}
	vectors.Sync(t, chainFile, doc)
	syncRaw(t, exportFile, export.Bytes())
}

func equalIndex(a, b *int) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// syncRaw is vectors.Sync for a file that is not one JSON document.
func syncRaw(t *testing.T, name string, want []byte) {
	t.Helper()
	path := filepath.Join(vectors.Dir(t), name)
	if vectors.Updating() {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the Go implementation exports (%v); if deliberate, rewrite it with VECTORS_UPDATE=1", path, err)
	}
}

// exportedRow is the part of an export line a chain verifier reads.
type exportedRow struct {
	DedupeKey string `json:"dedupe_key"`
	State     string `json:"state"`
	Version   int64  `json:"version"`
	History   []struct {
		ID            string `json:"id"`
		Kind          string `json:"kind"`
		From          string `json:"from"`
		To            string `json:"to"`
		At            string `json:"at"`
		Worker        string `json:"worker"`
		Reason        string `json:"reason"`
		PolicyVersion string `json:"policy_version"`
		Attempt       int    `json:"attempt"`
		AckID         string `json:"ack_id"`
		Code          string `json:"not_sent_code"`
		NextAttemptAt string `json:"next_attempt_at"`
		ProviderType  string `json:"provider_type"`
		Detail        string `json:"detail"`
		ProviderAt    string `json:"provider_at"`
		Permanent     bool   `json:"permanent_failure"`
		ContentHash   string `json:"content_hash"`
		PrevHash      string `json:"prev_hash"`
		Hash          string `json:"hash"`
	} `json:"history"`
}

type verdict struct {
	Verified  bool
	BrokenAt  *int
	Preimages []string
}

// verifyExportLine verifies one export line from its JSON alone, as
// docs/intent-v2.md tells a reviewer to, without pkg/ledger.
func verifyExportLine(line []byte) (verdict, error) {
	var r exportedRow
	if err := json.Unmarshal(line, &r); err != nil {
		return verdict{}, err
	}
	var v verdict
	broken := func(i int) {
		if v.BrokenAt == nil {
			v.BrokenAt = &i
		}
	}
	prev := ""
	for i, ev := range r.History {
		from := ev.From
		if from == "none" {
			from = "" // the state before the first entry is hashed as ""
		}
		fields := []string{"ledger-event-v1", r.DedupeKey, ev.PrevHash, ev.ID, ev.Kind, from, ev.To, ev.At, ev.Worker,
			ev.Reason, ev.PolicyVersion, strconv.Itoa(ev.Attempt), ev.AckID, ev.ContentHash}
		if ev.Code != "" || ev.NextAttemptAt != "" {
			next := ev.NextAttemptAt
			if next == "" {
				next = "0001-01-01T00:00:00Z"
			}
			fields = append(fields, ev.Code, next)
		}
		if ev.ProviderType != "" || ev.Detail != "" || ev.ProviderAt != "" || ev.Permanent {
			pat := ev.ProviderAt
			if pat == "" {
				pat = "0001-01-01T00:00:00Z"
			}
			fields = append(fields, "provider-event", ev.ProviderType, ev.Detail, pat, strconv.FormatBool(ev.Permanent))
		}
		var pre strings.Builder
		for _, f := range fields {
			pre.WriteString(strconv.Itoa(len(f)) + ":" + f)
		}
		v.Preimages = append(v.Preimages, pre.String())
		sum := sha256.Sum256([]byte(pre.String()))
		if ev.PrevHash != prev || hex.EncodeToString(sum[:]) != ev.Hash {
			broken(i)
		}
		prev = ev.Hash
	}
	n := len(r.History)
	if int64(n) != r.Version {
		broken(int(min(int64(n), r.Version)))
	}
	if n > 0 && r.History[n-1].To != r.State {
		broken(n - 1)
	}
	v.Verified = v.BrokenAt == nil
	return v, nil
}

// entryFromExport rebuilds the ledger.Entry of an export line, for
// Entry.Verify.
func entryFromExport(line []byte) (ledger.Entry, error) {
	var r exportedRow
	if err := json.Unmarshal(line, &r); err != nil {
		return ledger.Entry{}, err
	}
	e := ledger.Entry{Key: r.DedupeKey, State: ledger.State(r.State), Version: r.Version}
	parse := func(s string) (time.Time, error) {
		if s == "" {
			return time.Time{}, nil
		}
		return time.Parse(time.RFC3339Nano, s)
	}
	for _, ev := range r.History {
		at, err := parse(ev.At)
		if err != nil {
			return e, err
		}
		next, err := parse(ev.NextAttemptAt)
		if err != nil {
			return e, err
		}
		pat, err := parse(ev.ProviderAt)
		if err != nil {
			return e, err
		}
		from := ledger.State(ev.From)
		if ev.From == "none" {
			from = ledger.None
		}
		e.History = append(e.History, ledger.Event{
			ID: ev.ID, Kind: ledger.EventKind(ev.Kind), From: from, To: ledger.State(ev.To), At: at,
			Worker: ev.Worker, Reason: ev.Reason, PolicyVersion: ev.PolicyVersion, Attempt: ev.Attempt,
			AckID: ev.AckID, ContentHash: ev.ContentHash, Code: ev.Code, NextAttemptAt: next,
			ProviderType: ev.ProviderType, Detail: ev.Detail, ProviderAt: pat, Permanent: ev.Permanent,
			Prev: ev.PrevHash, Hash: ev.Hash,
		})
	}
	return e, nil
}
