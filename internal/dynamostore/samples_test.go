package dynamostore

import (
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"time"

	"github.com/resetledger/resetledger/pkg/ledger"
)

// sampleEntries returns n rows as the store holds them (times at the
// store's precision, retention in whole seconds, a valid hash chain) that
// together reach every state, every event kind, provider events with and
// without detail, operator workers and workers of every shape, content
// mismatches, quarantine and resolutions, reasons the encoding derives and
// reasons it cannot, and rows whose entries break the usual pattern (an
// entry that does not start where the previous one ended, a policy change,
// an ack that comes and goes). They are drawn from a seeded source: the
// same n gives the same rows.
func sampleEntries(n int) []ledger.Entry {
	r := rand.New(rand.NewSource(44))
	out := make([]ledger.Entry, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, sampleEntry(r, i))
	}
	return out
}

var (
	sampleKinds = []ledger.EventKind{
		ledger.KindTransition, ledger.KindContentMismatch, ledger.KindRetry, ledger.KindRecheck, ledger.KindDeferral,
		ledger.KindProviderSent, ledger.KindDelivered, ledger.KindBounced, ledger.KindComplained,
		ledger.KindDeliveryDelayed, ledger.KindProviderRejected, ledger.KindDeliveryFailed, "some_future_kind",
	}
	sampleWorkers = []string{
		"claim/9c4e1f7a-2b3d-4a5e-8f6c-1d7b3e9a5c2f", "dispatch/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3b",
		"events/0b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9", "reconcile/7e6d5c4b-3a29-4187-9605-f4e3d2c1b0a9",
		"expire/11111111-2222-4333-8444-555555555555", "ops/run/3f2b8a4c-6d1e-4f7a-9b0c-2e5d8f1a7c3b",
		"claim/3F2B8A4C-6D1E-4F7A-9B0C-2E5D8F1A7C3B", "operator:arn:aws:sts::123456789012:assumed-role/oncall/alice",
		"claim", "dispatch/not-a-uuid", "", "a/b/c/",
	}
	sampleReasons = []string{
		"", "intent claimed", "dispatch started", "transport accepted", "operator decision with transport evidence: ticket 7",
		"same-key retry budget of 3 attempts spent; outcome unknown", "retry after not sent: TooManyRequestsException",
		"provider reported Send", "provider reported Bounce (Permanent/General): permanent delivery failure",
		"abandoned, outcome unknown: x", "é unicode ✓",
	}
	sampleAcks = []string{
		"", "0100018c3f2a1b00-1b0ac0f6-ebd1-452b-9c7d-6edd3261cfc5-000000", "30709639-7682-46ad-b4d8-714f35cbc868",
		"010f0190abcdef@email.amazonses.com", "ACK-UPPER-1", "deadbeef", "a-", "-", "00",
	}
)

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.Intn(len(xs))] }

// sampleTime is a time at the store's precision near base.
func sampleTime(r *rand.Rand, base time.Time) time.Time {
	return base.Add(time.Duration(r.Int63n(int64(2*time.Hour))) - time.Hour).Truncate(time.Millisecond)
}

func sampleHex(r *rand.Rand, n int) string {
	b := make([]byte, n)
	r.Read(b)
	return hex.EncodeToString(b)
}

func sampleUUID(r *rand.Rand) string {
	h := sampleHex(r, 16)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// sampleEntry is row i: its state and its history's kinds cycle through
// every state and kind, its other fields are drawn from r.
func sampleEntry(r *rand.Rand, i int) ledger.Entry {
	base := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * 7 * time.Minute)
	ch := ledger.Channels[i%2]
	challenge := pick(r, []string{sampleUUID(r), strings.ToUpper(sampleUUID(r)), "ch:abc_123", strings.Repeat("c", 128), sampleHex(r, 16)})
	purpose := ledger.PurposePasswordReset
	if i%17 == 5 {
		purpose = "some-other-purpose"
	}
	id := ledger.Identity{Purpose: purpose, ChallengeID: challenge, Channel: ch}
	e := ledger.Entry{
		Key: id.Key(), Identity: id, State: ledger.States[i%len(ledger.States)],
		Workflow:        ledger.Workflow{Kind: ledger.Single},
		ContentHash:     pick(r, []string{sampleHex(r, 32), "not-hex-content", strings.ToUpper(sampleHex(r, 32))}),
		DestinationRef:  pick(r, []string{sampleHex(r, 32), "acct-7:" + string(ch), ""}),
		SubjectRef:      pick(r, []string{sampleHex(r, 32), "", "acct-7"}),
		TemplateID:      pick(r, []string{"password-reset-html", "t", strings.Repeat("T", 64)}),
		TemplateVersion: pick(r, []string{"2026-11-18.3", "1", ""}),
		PolicyVersion:   pick(r, []string{"policy-1", "policy-2", ""}),
		CreatedAt:       base,
		ExpiresAt:       base.Add(time.Duration(r.Intn(3600000)) * time.Millisecond),
		NotSentCode:     pick(r, []string{"", "", "TooManyRequestsException", "HTTP 429", ledger.BudgetCode}),
		Attempts:        r.Intn(4),
		Reason:          pick(r, sampleReasons),
		Mismatches:      pick(r, []int{0, 0, 1, 7}),
		RetainUntil:     base.Add(400 * 24 * time.Hour).Truncate(time.Second),
	}
	if i%5 == 3 {
		e.Workflow = ledger.Workflow{Kind: ledger.Fallback, Order: []ledger.Channel{ledger.Email, ledger.SMS}}
	}
	if i%4 != 0 {
		e.IssuedAt = base.Add(-time.Duration(r.Intn(5000)) * time.Millisecond)
	}
	for _, t := range []*time.Time{&e.NextCheckAt, &e.NextAttemptAt, &e.SlotAt, &e.AdmittedAt, &e.FirstAttemptAt} {
		if r.Intn(3) == 0 {
			*t = sampleTime(r, base)
		}
	}
	if r.Intn(2) == 0 {
		if e.State == ledger.Claimed {
			e.RedriveAt = sampleTime(r, base)
		} else {
			e.LeaseUntil = sampleTime(r, base)
		}
	}
	e.History = sampleHistory(r, e, i)
	e.Version = int64(len(e.History))
	e.UpdatedAt = e.History[len(e.History)-1].At
	e.AckID = pick(r, []string{e.Last().AckID, e.Last().AckID, pick(r, sampleAcks)})
	return e
}

// sampleHistory draws a chained history for e, ending in e.State.
func sampleHistory(r *rand.Rand, e ledger.Entry, i int) []ledger.Event {
	n := 1 + r.Intn(9)
	at := e.CreatedAt
	if r.Intn(4) == 0 {
		at = sampleTime(r, e.CreatedAt)
	}
	var h []ledger.Event
	state, ack, attempt, prev := ledger.None, "", 0, ""
	for j := 0; j < n; j++ {
		kind := sampleKinds[(i+j)%len(sampleKinds)]
		if j == 0 {
			kind = ledger.KindTransition
		}
		to := state
		if kind == ledger.KindTransition || j == n-1 {
			to = ledger.States[r.Intn(len(ledger.States))]
			if r.Intn(3) == 0 { // the not-sent loop, whose reasons form 2 derives
				to = map[ledger.State]ledger.State{ledger.Dispatching: ledger.Deferred, ledger.Deferred: ledger.Dispatching}[state]
				if to == ledger.None {
					to = ledger.Dispatching
				}
			}
		}
		if j == n-1 {
			to = e.State
		}
		from := state
		if r.Intn(8) == 0 {
			from = ledger.States[r.Intn(len(ledger.States))]
		}
		if r.Intn(3) == 0 {
			ack = pick(r, sampleAcks)
		}
		if r.Intn(3) == 0 {
			attempt = r.Intn(4)
		}
		at = at.Add(time.Duration(r.Intn(5000)-500) * time.Millisecond)
		ev := ledger.Event{
			ID: pick(r, []string{sampleHex(r, 16), sampleUUID(r), "pe-" + sampleHex(r, 16), "custom id"}), Kind: kind,
			From: from, To: to, At: at, Worker: pick(r, sampleWorkers), Reason: pick(r, sampleReasons),
			PolicyVersion: e.PolicyVersion, Attempt: attempt, AckID: ack, ContentHash: e.ContentHash,
		}
		if r.Intn(6) == 0 {
			ev.PolicyVersion = "policy-0"
		}
		if kind == ledger.KindContentMismatch {
			ev.ContentHash = sampleHex(r, 32)
		}
		if kind == ledger.KindDeferral || to == ledger.Deferred || state == ledger.Deferred || r.Intn(6) == 0 {
			ev.Code = pick(r, []string{"TooManyRequestsException", ledger.BudgetCode, "HTTP 429"})
			ev.NextAttemptAt = at.Add(time.Duration(r.Intn(90000)) * time.Millisecond)
		}
		if kind == ledger.KindTransition && from == ledger.Dispatching && to == ledger.Deferred && ev.Code != "" && r.Intn(2) == 0 {
			ev.Reason = fmt.Sprintf("transport did not take the message: %s; attempt %d; next attempt at %s",
				ev.Code, ev.Attempt, ev.NextAttemptAt.UTC().Format(time.RFC3339Nano))
		}
		if kind == ledger.KindTransition && from == ledger.Deferred && to == ledger.Dispatching && j > 0 && h[j-1].Code != "" && r.Intn(2) == 0 {
			ev.Reason = "retry after not sent: " + h[j-1].Code
		}
		if kind.Provider() {
			ev.ProviderType = pick(r, []string{"Send", "Delivery", "Bounce", "TEXT_SUCCESSFUL", "TEXT_DELIVERED", "DeliveryDelay"})
			ev.Detail = pick(r, []string{"", "SUCCESSFUL", "Permanent/General", "DELIVERED"})
			ev.ProviderAt = at.Add(-time.Duration(r.Intn(3000)) * time.Millisecond)
			ev.Permanent = r.Intn(4) == 0
			ev.ID = "pe-" + sampleHex(r, 16)
			ev.Reason = pick(r, []string{describeProvider(ev), describeProvider(ev), "", "provider said so"})
		}
		ev.Prev = prev
		ev.Hash = ledger.EventHash(e.Key, ev)
		prev = ev.Hash
		h = append(h, ev)
		state = to
	}
	return h
}

// describeProvider is the reason the ledger gives a provider event.
func describeProvider(ev ledger.Event) string {
	r := "provider reported " + ev.ProviderType
	if ev.Detail != "" {
		r += " (" + ev.Detail + ")"
	}
	if ev.Permanent {
		r += ": permanent delivery failure"
	}
	return r
}

// sampleName names sample i in failures.
func sampleName(i int, e ledger.Entry) string {
	return fmt.Sprintf("sample %d (%s, %d entries, key %.8s)", i, e.State, len(e.History), e.Key)
}
