package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/testkit/ledgertest"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// claimRef claims challenge i on ch for subject (none if "") and, if
// destination is not "", that destination_ref, expiring ttl from now.
func (f *fixture) claimRef(i int, ch ledger.Channel, subject, destination string, ttl time.Duration) string {
	f.t.Helper()
	in, sealed := ledgertest.Intent(i, ch, f.clock.Now(), ttl)
	in.SubjectRef = subject
	if destination != "" {
		in.DestinationRef = destination
	}
	res, err := f.cases.Claim(context.Background(), in, sealed, ledger.Worker("claim/req-"+in.ChallengeID))
	if err != nil {
		f.t.Fatalf("claim %d %s: %v", i, ch, err)
	}
	return res.Entry.Key
}

// timelineScenario: subject acct-9 asked three times (accepted, rejected,
// expired on arrival), acct-8 once; a row without a subject shares
// chal-21's destination.
//
//	Epoch     chal-21 email acct-9, accepted
//	Epoch+1m  chal-22 email acct-9, rejected
//	Epoch+2m  chal-23 sms acct-9, expired on arrival
//	Epoch+3m  chal-24 email acct-8, claimed
//	Epoch+4m  chal-25 email no subject, to chal-21's destination, claimed
type timelineScenario struct{ c21, c22, c23, c24, c25 string }

func populateTimeline(f *fixture) timelineScenario {
	f.t.Helper()
	var s timelineScenario
	s.c21 = f.claimRef(21, ledger.Email, "acct-9", "", time.Hour)
	if out := f.dispatch(s.c21, ledgertest.Accept); out != ledger.OutcomeAccepted {
		f.t.Fatalf("dispatch chal-21: %s", out)
	}
	f.clock.Advance(time.Minute)
	s.c22 = f.claimRef(22, ledger.Email, "acct-9", "", time.Hour)
	if out := f.dispatch(s.c22, ledgertest.Reject); out != ledger.OutcomeRejected {
		f.t.Fatalf("dispatch chal-22: %s", out)
	}
	f.clock.Advance(time.Minute)
	s.c23 = f.claimRef(23, ledger.SMS, "acct-9", "", -time.Second)
	f.clock.Advance(time.Minute)
	s.c24 = f.claimRef(24, ledger.Email, "acct-8", "", time.Hour)
	f.clock.Advance(time.Minute)
	s.c25 = f.claimRef(25, ledger.Email, "", "acct-000021:email", time.Hour)
	f.clock.Advance(time.Minute)
	return s
}

type timelineJSON struct {
	By           string         `json:"by"`
	Ref          string         `json:"ref"`
	Limit        int            `json:"limit"`
	LimitReached bool           `json:"limit_reached"`
	Rows         []timelineView `json:"rows"`
}

func (f *fixture) timelineJSON(args ...string) timelineJSON {
	f.t.Helper()
	out, errOut, code := f.run(append([]string{"timeline", "--json"}, args...)...)
	wantCode(f.t, code, exitOK, out, errOut)
	var got timelineJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		f.t.Fatalf("%v\n%s", err, out)
	}
	return got
}

func timelineKeys(rows []timelineView) []string {
	var keys []string
	for _, r := range rows {
		keys = append(keys, r.DedupeKey)
	}
	return keys
}

func TestTimeline(t *testing.T) {
	f := newFixture(t)
	s := populateTimeline(f)

	out, errOut, code := f.run("timeline", "--subject", "acct-9")
	wantCode(t, code, exitOK, out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || lines[0] != "subject acct-9: 3 rows, newest first" || !strings.HasPrefix(lines[1], "CREATED ") {
		t.Fatalf("timeline --subject acct-9 printed:\n%s", out)
	}
	for i, want := range []struct{ created, challenge, channel, state, key, reason string }{
		{"2026-11-30 09:02:00.000Z", chal(23), "sms", "expired", s.c23, "expired"},
		{"2026-11-30 09:01:00.000Z", chal(22), "email", "rejected", s.c22, "destination suppressed"},
		{"2026-11-30 09:00:00.000Z", chal(21), "email", "accepted", s.c21, "transport accepted"},
	} {
		l := lines[i+2]
		for _, part := range []string{want.created, want.challenge, want.channel, want.state, want.key, want.reason, "acct-0000"} {
			if !strings.Contains(l, part) {
				t.Errorf("line %d = %q, want it to show %q", i+2, l, part)
			}
		}
	}
	for _, other := range []string{s.c24, s.c25} {
		if strings.Contains(out, other) {
			t.Errorf("acct-9's timeline lists %s", other)
		}
	}

	got := f.timelineJSON("--subject", "acct-9")
	if want := []string{s.c23, s.c22, s.c21}; !slices.Equal(timelineKeys(got.Rows), want) || got.By != "subject_ref" || got.Ref != "acct-9" || got.LimitReached {
		t.Errorf("timeline --json = %+v, want rows %v", got, want)
	}
	if len(got.Rows) == 3 {
		r := got.Rows[1]
		if r.State != "rejected" || r.Attempts != 1 || r.SubjectRef != "acct-9" || r.DestinationRef != "acct-000022:email" ||
			r.CreatedAt != "2026-11-30T09:01:00Z" || r.ExpiresAt != "2026-11-30T10:01:00Z" || !strings.Contains(r.Reason, "destination suppressed") {
			t.Errorf("chal-22's row = %+v", r)
		}
		if got.Rows[0].Attempts != 0 || got.Rows[2].AckID == "" {
			t.Errorf("attempts or ack of chal-23 / chal-21: %+v %+v", got.Rows[0], got.Rows[2])
		}
	}

	// --limit keeps the newest and says so; --since is inclusive.
	got = f.timelineJSON("--subject", "acct-9", "--limit", "2")
	if want := []string{s.c23, s.c22}; !slices.Equal(timelineKeys(got.Rows), want) || !got.LimitReached {
		t.Errorf("--limit 2 = %v (limit reached %v), want %v", timelineKeys(got.Rows), got.LimitReached, want)
	}
	out, errOut, code = f.run("timeline", "--subject", "acct-9", "--limit", "2")
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "the newest 2; older rows may exist") {
		t.Errorf("--limit 2 text does not say older rows may exist:\n%s", out)
	}
	got = f.timelineJSON("--subject", "acct-9", "--since", "2026-11-30T09:01:00Z")
	if want := []string{s.c23, s.c22}; !slices.Equal(timelineKeys(got.Rows), want) {
		t.Errorf("--since 09:01 = %v, want %v", timelineKeys(got.Rows), want)
	}

	checkTimelineByDestination(t, f, s)
}

// checkTimelineByDestination: a destination's rows, with and without a subject;
// an unknown subject's none; and explain shows the subject.
func checkTimelineByDestination(t *testing.T, f *fixture, s timelineScenario) {
	t.Helper()
	// A destination's rows, with and without a subject.
	out, errOut, code := f.run("timeline", "--destination-ref", "acct-000021:email")
	wantCode(t, code, exitOK, out, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "destination acct-000021:email: 2 rows, newest first" || !strings.Contains(lines[1], "SUBJECT") ||
		!strings.Contains(lines[2], s.c25) || !strings.Contains(lines[3], s.c21) || !strings.Contains(lines[3], "acct-9") {
		t.Errorf("timeline --destination-ref printed:\n%s", out)
	}

	out, errOut, code = f.run("timeline", "--subject", "acct-none")
	wantCode(t, code, exitOK, out, errOut)
	if strings.TrimSpace(out) != "no rows for subject acct-none" {
		t.Errorf("an unknown subject printed %q", out)
	}

	// explain shows the subject.
	out, errOut, code = f.run("explain", chal(21))
	wantCode(t, code, exitOK, out, errOut)
	if !strings.Contains(out, "subject:         acct-9  (opaque account reference)") {
		t.Errorf("explain does not show the subject:\n%s", out)
	}
	out, errOut, code = f.run("explain", chal(25))
	wantCode(t, code, exitOK, out, errOut)
	if strings.Contains(out, "subject:") {
		t.Errorf("explain shows a subject for a row without one:\n%s", out)
	}
}

func TestTimelineUsage(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"timeline"}, "give exactly one of --subject and --destination-ref"},
		{[]string{"timeline", "--subject", "acct-1", "--destination-ref", "acct-1:email"}, "give exactly one"},
		// An address is refused without being echoed (run checks that
		// no output holds "@example.test").
		{[]string{"timeline", "--subject", "player@example.test"}, "--subject: contains a character outside"},
		{[]string{"timeline", "--destination-ref", "+15550001234"}, "--destination-ref: contains a character outside"},
		{[]string{"timeline", "--subject", strings.Repeat("s", 257)}, "--subject: too long"},
		{[]string{"timeline", "--subject", "acct-1", "--since", "yesterday"}, "--since:"},
		{[]string{"timeline", "--subject", "acct-1", "--limit", "-1"}, "--limit"},
		{[]string{"timeline", "--subject", "acct-1", "extra"}, "unexpected argument"},
	} {
		out, errOut, code := f.run(c.args...)
		wantCode(t, code, exitUsage, out, errOut)
		if !strings.Contains(errOut, c.want) {
			t.Errorf("%v: stderr %q, want %q", c.args, errOut, c.want)
		}
		if strings.Contains(errOut, "+15550001234") {
			t.Errorf("%v: stderr echoes the phone number: %q", c.args, errOut)
		}
	}
}
