package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/memstore"
	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// rowLengths are the lengths a row's free-length fields are given.
type rowLengths struct {
	name                 string
	challenge, subject   string
	destination          string
	template, version    string
	policy               string
	ack                  func(ch ledger.Channel) string
	eventType, detail    func(ch ledger.Channel, j int) string
	opReason, opEvidence string
}

// productionLengths are production's: a UUID challenge id, 64-character
// references, the shapes' template ids, provider message ids at their real
// length (SES 60 characters, SMS a UUID) and the provider's event types.
var productionLengths = rowLengths{
	name: "production", challenge: shapes.UUID("challenge", 1), subject: shapes.Ref64("subject", 1),
	destination: shapes.Ref64("destination", 1), template: shapes.EmailTemplate, version: shapes.TemplateVersion,
	policy: ledger.DefaultPolicy().Version,
	ack: func(ch ledger.Channel) string {
		if ch == ledger.SMS {
			return shapes.UUID("sms", 1)
		}
		return shapes.SESMessageID(1)
	},
	eventType: func(ch ledger.Channel, j int) string {
		return map[ledger.Channel][2]string{ledger.Email: {"Send", "Delivery"}, ledger.SMS: {"TEXT_SUCCESSFUL", "TEXT_DELIVERED"}}[ch][j]
	},
	detail: func(ch ledger.Channel, j int) string {
		if ch == ledger.SMS {
			return [2]string{"SUCCESSFUL", "DELIVERED"}[j]
		}
		return ""
	},
	opReason: "ticket OPS-1234: provider console shows the message delivered", opEvidence: shapes.SESMessageID(1),
}

// worstLengths are the longest the schema allows: a 128-character
// challenge id, 256-character references, a 64-character template id,
// 32-character template and policy versions (ledger.Intent.Validate), a
// 256-character provider message id, a 64-character event type and a
// 200-character detail (ledger.ProviderEvent.Validate), a 500-byte
// operator reason and evidence (ledger's checkFreeText), none of them hex,
// so nothing packs.
var worstLengths = rowLengths{
	name: "worst case", challenge: strings.Repeat("c", 128), subject: strings.Repeat("s", 256),
	destination: strings.Repeat("d", 256), template: strings.Repeat("t", 64), version: strings.Repeat("v", 32),
	policy: strings.Repeat("p", 32),
	ack:    func(ledger.Channel) string { return strings.Repeat("m", 256) },
	eventType: func(_ ledger.Channel, j int) string {
		return strings.Repeat(string(rune('T'+j)), 64)
	},
	detail:   func(_ ledger.Channel, j int) string { return strings.Repeat(string(rune('D'+j)), 200) },
	opReason: strings.Repeat("r", 500), opEvidence: strings.Repeat("e", 500),
}

// sizedTransport acknowledges every send with one id and keeps the last send.
type sizedTransport struct {
	id        string
	last      ledger.Send
	fail      bool
	throttles int // sends answered not sent (a throttle) before the first acknowledged
}

func (tr *sizedTransport) Capabilities() ledger.Capabilities {
	return ledger.Capabilities{Events: true}
}

func (tr *sizedTransport) Send(_ context.Context, s ledger.Send) (ledger.Ack, error) {
	tr.last = s
	if tr.fail {
		return ledger.Ack{}, fmt.Errorf("read response: connection reset")
	}
	if tr.throttles > 0 {
		tr.throttles--
		return ledger.Ack{}, &ledger.NotSent{Code: "TooManyRequestsException"}
	}
	return ledger.Ack{ID: tr.id}, nil
}

// rowWrite is one write of a row: what it did and the item's size after
// it (an UpdateItem is charged on the larger of the item before and after:
// the row only grows along these paths).
type rowWrite struct {
	what string
	size int
}

// sizing is a memstore that sizes every row it writes as dynamostore
// stores it.
type sizing struct {
	*memstore.Store
	enc    *dynamostore.Store
	writes []rowWrite
}

func (s *sizing) note(e ledger.Entry) {
	last := e.Last()
	what := string(last.Kind)
	if last.Kind == ledger.KindTransition {
		what = fmt.Sprintf("%s→%s", last.From, last.To)
		if last.From == ledger.None {
			what = "claim"
		}
	}
	s.writes = append(s.writes, rowWrite{what: what, size: ItemSize(s.enc.Item(e))})

}

func (s *sizing) Create(ctx context.Context, e ledger.Entry) (ledger.Entry, error) {
	got, err := s.Store.Create(ctx, e)
	if err == nil {
		s.note(e)
	}
	return got, err
}

func (s *sizing) Apply(ctx context.Context, c ledger.Change) (ledger.Entry, error) {
	got, err := s.Store.Apply(ctx, c)
	if err == nil {
		s.note(c.Next)
	}
	return got, err
}

// rowWrites runs one message of channel ch with lengths l through the
// ledger's use cases (as the functions call them, with Lambda request ids
// in the workers) and sizes the item after each write. The happy path is
// the claim, dispatching, accepted and the provider's two events; on the
// not-sent path the provider refuses the first two attempts for now (a
// throttle: deferred, retried) before the happy path's end; on the
// operator path the acknowledgement is lost instead, and the row goes
// unknown, quarantined (the retry budget is one attempt) and is resolved
// by an operator with transport evidence.
func rowWrites(t *testing.T, ch ledger.Channel, l rowLengths, path string) []rowWrite {
	operator := path == "operator"
	t.Helper()
	ctx := context.Background()
	store := &sizing{Store: &memstore.Store{}, enc: dynamostore.New(nil, "sizes", dynamostore.DefaultShards)}
	env := ledgertest.NewEnv(store)
	tr := &sizedTransport{id: l.ack(ch), fail: operator}
	env.Cases.Transports = map[ledger.Channel]ledger.Transport{ledger.Email: tr, ledger.SMS: tr}
	env.Cases.Policy.MaxAttempts = 1
	if path == "not sent" {
		tr.throttles, env.Cases.Policy.MaxAttempts = 2, 3
	}
	dispatches := 1 + tr.throttles
	env.Cases.Policy.Version = l.policy
	m := shapes.SMS(1, "+12065550100")
	if ch == ledger.Email {
		m = shapes.Email(1)
	}
	in := shapes.Intent("challenge", 1, ch, m, env.Clock.Now())
	in.ChallengeID, in.SubjectRef, in.DestinationRef = l.challenge, l.subject, l.destination
	in.TemplateID, in.TemplateVersion, in.PolicyVersion = l.template, l.version, l.policy
	in.ContentHash = ledger.ContentHash(in.TemplateID, in.TemplateVersion, m)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s %s: %s: %v", l.name, ch, what, err)
		}
	}
	_, err := env.Cases.Claim(ctx, in, ledgertest.Seal(m), ledger.Worker("claim/"+shapes.UUID("claim-request", 1)))
	must("claim", err)
	env.Clock.Advance(40 * time.Millisecond)
	for i := 0; i < dispatches; i++ { // each refusal's retry is a dispatch of its own
		if i > 0 {
			env.Clock.Advance(30 * time.Second) // past the deferral's next attempt
		}
		_, err = env.Cases.Dispatch(ctx, in.Key(), ledger.Worker("dispatch/"+shapes.UUID("dispatch-request", i)))
		must("dispatch", err)
	}
	if operator {
		env.Clock.Advance(10 * time.Minute)
		_, err = env.Cases.Reconcile(ctx, ledger.Worker("reconcile/"+shapes.UUID("reconcile-request", 1)), 0)
		must("reconcile", err)
		_, err = env.Cases.Resolve(ctx, in.Key(), ledger.DecideAccepted, l.opReason, l.opEvidence,
			"operator:arn:aws:sts::123456789012:assumed-role/ledger-operator/alice")
		must("resolve", err)
		return store.writes
	}
	for j := 0; j < 2; j++ {
		env.Clock.Advance(2 * time.Second)
		p := ledger.ProviderEvent{
			Key: in.Key(), Channel: ch, Kind: []ledger.EventKind{ledger.KindProviderSent, ledger.KindDelivered}[j],
			Type: l.eventType(ch, j), Detail: l.detail(ch, j), MessageID: l.ack(ch), At: env.Clock.Now().Add(-time.Second),
			Attempt: tr.last.Attempt, Proof: tr.last.Proof,
		}
		res, err := env.Cases.RecordProviderEvent(ctx, p, ledger.Worker("events/"+shapes.UUID(fmt.Sprint("events-request-", j), 1)))
		must("provider event", err)
		if res.Outcome != ledger.OutcomeRecorded {
			t.Fatalf("%s %s: provider event %d: %s", l.name, ch, j, res.Outcome)
		}
	}
	return store.writes
}

// TestRowWritesUnderOneKB: at production lengths every write of a row on
// its happy path (claim, dispatching, accepted, the provider's two events)
// and on the operator's path (unknown, quarantined, resolved with evidence
// and a 60-character reason) is under 1 KB, so each costs one write unit,
// for email and SMS. At the longest lengths the schema allows no stored
// form keeps a row under 1 KB: the claim alone is over it (the two
// references may be 538 B of names and values). Those sizes are held to
// the bounds docs/design.md states, so a change that grows them fails too.
func TestRowWritesUnderOneKB(t *testing.T) {
	under := func(n int) []int { // n writes, each under 1 KB
		b := make([]int, n)
		for i := range b {
			b[i] = WriteUnitBytes - 1
		}
		return b
	}
	// At production lengths: the happy and the operator's paths under 1 KB
	// at every write; on the not-sent path, each refusal for now adds a
	// deferral and a retry (about 180 B), and from the second retry on the
	// row is over 1 KB: those writes are held to their sizes, give or take
	// the retry's jitter (a deferral's next attempt, in ms after it, is a
	// number of 1 to 3 bytes).
	production := map[string][]int{
		"email happy":    under(5),
		"sms happy":      under(5),
		"email not sent": {WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, 1036, 1074, 1181, 1292},
		"sms not sent":   {WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, WriteUnitBytes - 1, 1034, 1054, 1184, 1312},
		"email operator": under(5),
		"sms operator":   under(5),
	}
	// At the longest lengths the schema allows, each write's size.
	worst := map[string][]int{
		"email happy":    {1101, 1203, 1463, 1833, 2202},
		"sms happy":      {1099, 1201, 1461, 1831, 2200},
		"email not sent": {1101, 1203, 1276, 1381, 1453, 1558, 1818, 2187, 2556},
		"sms not sent":   {1099, 1201, 1274, 1379, 1452, 1556, 1816, 2185, 2554},
		"email operator": {1101, 1203, 1267, 1377, 2189},
		"sms operator":   {1099, 1201, 1265, 1375, 2187},
	}
	for _, ch := range []ledger.Channel{ledger.Email, ledger.SMS} {
		for _, p := range []string{"happy", "not sent", "operator"} {
			path := fmt.Sprintf("%s %s", ch, p)
			for _, l := range []rowLengths{productionLengths, worstLengths} {
				writes := rowWrites(t, ch, l, p)
				var sizes []string
				for _, w := range writes {
					sizes = append(sizes, fmt.Sprintf("%s %d B", w.what, w.size))
				}
				t.Logf("%s path, %s lengths: %s", path, l.name, strings.Join(sizes, "; "))
				bounds := worst[path]
				if l.name == productionLengths.name {
					bounds = production[path]
				}
				if len(writes) != len(bounds) {
					t.Fatalf("%s: %d writes, want %d", path, len(writes), len(bounds))
				}
				jitter := 0
				if p == "not sent" {
					jitter = 2
				}
				for i, w := range writes {
					if w.size > bounds[i] && (bounds[i] < WriteUnitBytes || w.size > bounds[i]+jitter) {
						t.Errorf("%s path at %s lengths: %s is %d B, over %d B", path, l.name, w.what, w.size, bounds[i])
					}
				}
			}
		}
	}
}
