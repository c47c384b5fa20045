package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/credentials/stscreds"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/resetledger/resetledger/internal/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
	"github.com/resetledger/resetledger/pkg/sdkhttp"
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

func TestResolveWithoutIdentityWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup runs before the fixture loads its configuration and returns
		// the configuration ledgerctl runs with.
		setup func(t *testing.T) func(f *fixture) aws.Config
		want  string
	}{
		{
			// STS cannot be reached (a VPC without an STS endpoint, a
			// proxy refusing it). The configuration is loaded as main
			// loads it, from the environment: the emulator for every
			// service, and the SDK's own per-service variable sending STS
			// to a closed port.
			name: "STS unreachable",
			setup: func(t *testing.T) func(f *fixture) aws.Config {
				ep, ok := emulator.Endpoint()
				if !ok {
					return func(*fixture) aws.Config { return aws.Config{} } // newFixture skips or fails
				}
				dir := t.TempDir()
				for k, v := range map[string]string{
					"AWS_ENDPOINT_URL": ep, "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:1",
					"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
					"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
				} {
					t.Setenv(k, v)
				}
				if os.Getenv("AWS_REGION") == "" {
					t.Setenv("AWS_REGION", "us-east-1")
				}
				return func(f *fixture) aws.Config {
					cfg, err := sdkhttp.LoadDefaultConfig(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					return cfg
				}
			},
			want: "connection refused",
		},
		{
			// The operator's role session has expired: STS refuses it.
			name: "expired session",
			setup: func(t *testing.T) func(f *fixture) aws.Config {
				return func(f *fixture) aws.Config {
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
				}
			},
			want: "AWS rejected the credentials calling sts:GetCallerIdentity (ExpiredToken)",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgFor := tc.setup(t)
			f := newFixture(t)
			s := populate(f)
			cfg := cfgFor(f)
			before := f.get(s.quarantined)
			out, errOut, code := f.runAs(cfg, "resolve", s.quarantined, "--decision", "abandoned", "--reason", "no record", "--note", "OPS-17")
			wantCode(t, code, exitFailure, out, errOut)
			for _, want := range []string{"nothing recorded: the operator's identity (sts:GetCallerIdentity) could not be read", tc.want} {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr = %q, want it to contain %q", errOut, want)
				}
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			after := f.get(s.quarantined)
			if after.Version != before.Version || after.State != ledger.Quarantined || len(after.History) != len(before.History) {
				t.Errorf("a resolve without the caller's identity wrote the row: version %d -> %d, state %s", before.Version, after.Version, after.State)
			}
		})
	}
}
