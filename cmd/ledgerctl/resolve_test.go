package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// operatorRole is the role an operator assumes to run ledgerctl resolve.
const operatorRole = "arn:aws:iam::" + emulator.Account + ":role/LedgerOperator"

// asOperator returns f's configuration with the credentials of session
// session of the LedgerOperator role, assumed through the emulator's STS as
// an operator assumes it on AWS.
func asOperator(f *fixture, session string) aws.Config {
	cfg := f.cfg.Copy()
	cfg.Credentials = aws.NewCredentialsCache(stscreds.NewAssumeRoleProvider(sts.NewFromConfig(f.cfg), operatorRole,
		func(o *stscreds.AssumeRoleOptions) { o.RoleSessionName = session }))
	return cfg
}

func TestResolveRecordsTheCallerARN(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	alice := asOperator(f, "alice")
	const wantWorker = "operator:arn:aws:sts::" + emulator.Account + ":assumed-role/LedgerOperator/alice"

	// The note is text in the reason; the worker is who STS says called.
	out, errOut, code := f.runAs(alice, "resolve", s.quarantined, "--decision", "accepted", "--evidence", "ses-0100-abc",
		"--reason", "provider console shows it delivered", "--note", "OPS-17, asked by bob", "--json")
	wantCode(t, code, exitOK, out, errOut)
	e := f.get(s.quarantined)
	last := e.Last()
	if last.Worker != wantWorker {
		t.Errorf("worker = %q, want %q", last.Worker, wantWorker)
	}
	if want := "operator decision with transport evidence: provider console shows it delivered; note: OPS-17, asked by bob"; last.Reason != want {
		t.Errorf("reason = %q, want %q", last.Reason, want)
	}
	if err := e.Verify(); err != nil {
		t.Errorf("resolved row does not verify: %v", err)
	}
	if !strings.Contains(out, `"worker": "`+wantWorker+`"`) {
		t.Errorf("resolve --json does not show the worker %q:\n%s", wantWorker, out)
	}

	// --operator, deprecated, names no one: its text is a note too.
	out, errOut, code = f.runAs(alice, "resolve", s.unknown, "--decision", "abandoned", "--reason", "provider has no record", "--operator", "mallory")
	wantCode(t, code, exitOK, out, errOut)
	last = f.get(s.unknown).Last()
	if last.Worker != wantWorker || last.Reason != "abandoned, outcome unknown: provider has no record; note: mallory" {
		t.Errorf("with --operator mallory: worker %q reason %q", last.Worker, last.Reason)
	}
	if !strings.Contains(errOut, "--operator is deprecated") {
		t.Errorf("no deprecation warning for --operator; stderr = %q", errOut)
	}
}

func TestResolveRefusesBadNotes(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	before := f.get(s.quarantined)
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"escape sequence", []string{"--note", "ok\x1b[2K forged line"}, "--note: contains a control character (U+001B)"},
		{"line break", []string{"--note", "a\nworker: operator:root"}, "--note: contains a control character (U+000A)"},
		{"bidirectional override", []string{"--note", "OPS-17 \u202eevil"}, "--note: contains a control character (U+202E)"},
		{"C1 control", []string{"--note", "OPS-17\u0085x"}, "--note: contains a control character (U+0085)"},
		{"invalid UTF-8", []string{"--note", "OPS-\xff"}, "--note: not valid UTF-8"},
		{"too long", []string{"--note", strings.Repeat("n", maxNoteLen+1)}, "--note: too long (200 bytes at most)"},
		{"control in the deprecated alias", []string{"--operator", "x\ty"}, "--operator: contains a control character"},
		{"control in the reason", []string{"--reason", "ok\x1b[2K"}, "--reason: contains a control character"},
		{"both note flags", []string{"--note", "a", "--operator", "b"}, "give one of them"},
		// The ledger's own check of the recorded reason, note included.
		{"address in the note", []string{"--note", "asked by bob@example.org"}, "--reason with the note appended: must not contain an email address; nothing recorded"},
		{"reason and note over 500 bytes", []string{"--reason", strings.Repeat("r", 400), "--note", strings.Repeat("n", 100)}, "--reason with the note appended: too long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"resolve", s.quarantined, "--decision", "abandoned", "--reason", "no record"}, tc.args...)
			out, errOut, code := f.run(args...)
			wantCode(t, code, exitUsage, out, errOut)
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.want)
			}
			if got := f.get(s.quarantined); got.Version != before.Version {
				t.Fatalf("a refused note wrote the row (version %d -> %d)", before.Version, got.Version)
			}
		})
	}
	// A note just at the limit is recorded whole.
	note := strings.Repeat("n", maxNoteLen)
	out, errOut, code := f.run("resolve", s.quarantined, "--decision", "abandoned", "--reason", "no record", "--note", note)
	wantCode(t, code, exitOK, out, errOut)
	if got := f.get(s.quarantined).Last().Reason; got != "abandoned, outcome unknown: no record; note: "+note {
		t.Errorf("reason = %q", got)
	}
}

// TestResolveWithoutIdentityWritesNothing: a request AWS does not
// authenticate, or that reaches the function without an IAM caller, records
// nothing; nor does ledgerctl without the function's URL (it no longer
// writes the table itself).
func TestResolveWithoutIdentityWritesNothing(t *testing.T) {
	for _, tc := range unauthenticatedResolves() {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			s := populate(f)
			cfg := tc.setup(t, f)
			before := f.get(s.quarantined)
			out, errOut, code := f.runAs(cfg, "resolve", s.quarantined, "--decision", "abandoned", "--reason", "no record", "--note", "OPS-17")
			wantCode(t, code, tc.code, out, errOut)
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			after := f.get(s.quarantined)
			if after.Version != before.Version || after.State != ledger.Quarantined || len(after.History) != len(before.History) {
				t.Errorf("a resolve without an authenticated caller wrote the row: version %d -> %d, state %s", before.Version, after.Version, after.State)
			}
		})
	}
}

// unauthenticatedResolve is a way a resolve reaches the operator function
// without an authenticated caller, and how ledgerctl must fail.
type unauthenticatedResolve struct {
	name string
	// setup prepares the fixture and returns the configuration ledgerctl
	// runs with.
	setup func(t *testing.T, f *fixture) aws.Config
	code  int
	want  string
}

func unauthenticatedResolves() []unauthenticatedResolve {
	return []unauthenticatedResolve{
		{
			// The operator's role session has expired: AWS refuses it.
			name: "expired session",
			setup: func(t *testing.T, f *fixture) aws.Config {
				out, err := sts.NewFromConfig(f.cfg).AssumeRole(context.Background(), &sts.AssumeRoleInput{
					RoleArn: aws.String(operatorRole), RoleSessionName: aws.String("alice"), DurationSeconds: aws.Int32(1),
				})
				if err != nil {
					t.Fatalf("AssumeRole: %v", err)
				}
				time.Sleep(1500 * time.Millisecond)
				c := out.Credentials
				cfg := f.cfg.Copy()
				cfg.Credentials = credentials.NewStaticCredentialsProvider(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken))
				return cfg
			},
			code: exitFailure, want: "the operator function's URL refused the request (403)",
		},
		{
			// A client that signs with a secret AWS did not issue for the key
			// (or whose request was changed after signing).
			name: "signature AWS does not accept",
			setup: func(t *testing.T, f *fixture) aws.Config {
				good := asOperator(f, "alice")
				f.run("stats") // registers the fixture's own credentials
				f.url.knows(good)
				f.url.frozen = true
				c, err := good.Credentials.Retrieve(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				bad := f.cfg.Copy()
				bad.Credentials = credentials.NewStaticCredentialsProvider(c.AccessKeyID, "not-"+c.SecretAccessKey, c.SessionToken)
				return bad
			},
			code: exitFailure, want: "the operator function's URL refused the request (403)",
		},
		{
			// A URL with AuthType NONE, or a request that is not a URL
			// request: the function has no caller to record.
			name: "no IAM context",
			setup: func(t *testing.T, f *fixture) aws.Config {
				f.run("stats")
				f.url.authNone = true
				return asOperator(f, "alice")
			},
			code: exitFailure, want: "the request carries no IAM-authenticated caller",
		},
		{
			name: "no operator URL",
			setup: func(t *testing.T, f *fixture) aws.Config {
				f.env = map[string]string{operatorURLEnv: ""}
				return asOperator(f, "alice")
			},
			code: exitUsage, want: "no operator function URL: set --operator-url or OPERATOR_URL",
		},
	}
}

// TestResolveGoesThroughTheFunction: ledgerctl resolve writes nothing
// itself. With the ledger table named wrongly it still resolves: the
// function, not ledgerctl, wrote the row, and the request reached it signed.
func TestResolveGoesThroughTheFunction(t *testing.T) {
	f := newFixture(t)
	s := populate(f)
	f.env = map[string]string{"LEDGER_TABLE": "no-such-table", "CONTENT_TABLE": ""}
	out, errOut, code := f.runAs(asOperator(f, "bob"), "resolve", s.quarantined, "--decision", "abandoned", "--reason", "no record")
	wantCode(t, code, exitOK, out, errOut)
	if f.url.reached != 1 {
		t.Errorf("%d requests reached the function, want 1", f.url.reached)
	}
	if got, want := f.get(s.quarantined).Last().Worker, "operator:arn:aws:sts::"+emulator.Account+":assumed-role/LedgerOperator/bob"; got != want {
		t.Errorf("worker = %q, want %q", got, want)
	}
}
