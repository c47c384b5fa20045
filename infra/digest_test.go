package main

import (
	"strings"
	"testing"
	"time"

	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/settings"
)

// TestDigestBucket: the digest bucket keeps what the emulator cannot show it keeps (its
// CloudFormation creates the bucket without Object Lock; docs/development.md): Object Lock with a
// COMPLIANCE default retention of HISTORY_RETENTION in days, rounded up; versioning; no public
// access; SSE-S3; TLS only; retained with the stack whatever the stage; and a policy that denies
// every delete to everyone and every write to everyone but the digest role.
func TestDigestBucket(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
		days      float64
		protect   bool
	}{
		{"default retention", 0, 0, true},
		{"hours rounded up, throw-away stage", 90*24*time.Hour + time.Hour, 91, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var days float64
			s := synth(t, func(p *LedgerStackProps) {
				if tc.retention > 0 {
					p.Functions.Policy.Retention = tc.retention
				}
				p.DeletionProtection = tc.protect
				days = tc.days
				if days == 0 {
					days = float64(int((p.Functions.Policy.Retention + 24*time.Hour - 1) / (24 * time.Hour)))
				}
			})
			id := s.constructID(t, "AWS::S3::Bucket", digestBucketID)
			r := s.resources("AWS::S3::Bucket")[id]
			if r["DeletionPolicy"] != "Retain" || r["UpdateReplacePolicy"] != "Retain" {
				t.Errorf("digest bucket DeletionPolicy %v, UpdateReplacePolicy %v, want Retain", r["DeletionPolicy"], r["UpdateReplacePolicy"])
			}
			b := props(r)
			want := map[string]string{
				"ObjectLockEnabled": `true`,
				"ObjectLockConfiguration": `{"ObjectLockEnabled":"Enabled","Rule":{"DefaultRetention":{"Days":` +
					mustJSON(days) + `,"Mode":"COMPLIANCE"}}}`,
				"VersioningConfiguration": `{"Status":"Enabled"}`,
				"PublicAccessBlockConfiguration": `{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,` +
					`"RestrictPublicBuckets":true}`,
				"BucketEncryption": `{"ServerSideEncryptionConfiguration":[{"ServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"}}]}`,
			}
			for k, w := range want {
				if got := mustJSON(b[k]); got != w {
					t.Errorf("digest bucket %s = %s, want %s", k, got, w)
				}
			}
			if _, ok := b["LifecycleConfiguration"]; ok {
				t.Errorf("digest bucket has a lifecycle configuration: %s", mustJSON(b["LifecycleConfiguration"]))
			}

			checkDigestBucketPolicy(t, s)
		})
	}
}

// checkDigestBucketPolicy: the digest bucket's policy denies requests without
// TLS, every delete to every principal, and writes to all but the digest role.
func checkDigestBucketPolicy(t *testing.T, s *synthesized) {
	t.Helper()
	var policy map[string]any
	for _, bp := range s.resources("AWS::S3::BucketPolicy") {
		if label(props(bp)["Bucket"]) == "DigestBucket" {
			policy = props(bp)["PolicyDocument"].(map[string]any)
		}
	}
	if policy == nil {
		t.Fatal("no bucket policy on the digest bucket")
	}
	digestRole := s.constructID(t, "AWS::IAM::Role", "DigestRole")
	sids := map[string]map[string]any{}
	tlsOnly := false
	for _, st := range list(policy["Statement"]) {
		stmt := st.(map[string]any)
		if sid, ok := stmt["Sid"].(string); ok {
			sids[sid] = stmt
		}
		if stmt["Effect"] == "Deny" && mustJSON(stmt["Condition"]) == `{"Bool":{"aws:SecureTransport":"false"}}` {
			tlsOnly = true
		}
	}
	if !tlsOnly {
		t.Error("the digest bucket's policy does not deny requests without TLS")
	}
	del, ok := sids["NoDigestDeletes"]
	if !ok || del["Effect"] != "Deny" || mustJSON(del["Principal"]) != `{"AWS":"*"}` || del["Condition"] != nil ||
		!strings.Contains(mustJSON(del["Action"]), `"s3:DeleteObject"`) || !strings.Contains(mustJSON(del["Action"]), `"s3:DeleteObjectVersion"`) {
		t.Errorf("NoDigestDeletes = %s, want a Deny of every delete to every principal", mustJSON(del))
	}
	wr, ok := sids["OnlyDigestWrites"]
	if !ok || wr["Effect"] != "Deny" || !strings.Contains(mustJSON(wr["Action"]), `"s3:PutObject"`) ||
		!strings.Contains(mustJSON(wr["Condition"]), `"ArnNotEquals":{"aws:PrincipalArn":{"Fn::GetAtt":["`+digestRole+`","Arn"]}}`) {
		t.Errorf("OnlyDigestWrites = %s, want a Deny of s3:PutObject to every principal but %s", mustJSON(wr), digestRole)
	}
}

// TestDigestKey: an ECC_NIST_P256 signing key that only the digest role may sign with (a Deny
// every other principal meets, root and administrators included) and any principal of the account
// may read the public key of and verify with.
func TestDigestKey(t *testing.T) {
	s := synth(t, nil)
	key := props(s.resources("AWS::KMS::Key")[s.constructID(t, "AWS::KMS::Key", digestKeyID)])
	if key["KeySpec"] != "ECC_NIST_P256" || key["KeyUsage"] != "SIGN_VERIFY" || key["EnableKeyRotation"] == true {
		t.Errorf("digest key = %v/%v rotation %v, want ECC_NIST_P256/SIGN_VERIFY without rotation", key["KeySpec"], key["KeyUsage"], key["EnableKeyRotation"])
	}
	digestRole := s.constructID(t, "AWS::IAM::Role", "DigestRole")
	var signs, verifies bool
	for _, st := range list(key["KeyPolicy"].(map[string]any)["Statement"]) {
		stmt := st.(map[string]any)
		switch stmt["Sid"] {
		case "OnlyDigestSigns":
			signs = stmt["Effect"] == "Deny" && mustJSON(stmt["Principal"]) == `{"AWS":"*"}` && stmt["Action"] == "kms:Sign" &&
				mustJSON(stmt["Condition"]) == `{"ArnNotEquals":{"aws:PrincipalArn":[{"Fn::GetAtt":["`+digestRole+`","Arn"]}]}}`
		case "AccountVerifies":
			verifies = stmt["Effect"] == "Allow" && mustJSON(stmt["Action"]) == `["kms:DescribeKey","kms:GetPublicKey","kms:Verify"]` &&
				mustJSON(stmt["Condition"]) == `{"StringEquals":{"kms:CallerAccount":{"Ref":"AWS::AccountId"}}}`
		}
	}
	if !signs {
		t.Error("the digest key's policy has no OnlyDigestSigns Deny of kms:Sign to every principal but the digest role")
	}
	if !verifies {
		t.Error("the digest key's policy does not let the account's principals verify (AccountVerifies)")
	}
}

// TestDigestFunction: the digest function reads every record of the ledger stream (no filter),
// a batch per DIGEST_INTERVAL, in order, whole (no bisection), retried until it succeeds or its
// records leave the stream, then sent to its on-failure queue; it is given the bucket, the key,
// the interval and the retention; the outputs name the bucket and the key for ledgerctl.
func TestDigestFunction(t *testing.T) {
	s := synth(t, func(p *LedgerStackProps) { p.Functions.DigestInterval = 45 * time.Second })
	fn := s.logicalID(t, "AWS::Lambda::Function", "DigestFunction")
	var mapping map[string]any
	for _, m := range s.resources("AWS::Lambda::EventSourceMapping") {
		if mustJSON(props(m)["FunctionName"]) == `{"Ref":"`+fn+`"}` {
			if mapping != nil {
				t.Fatal("the digest function has more than one event source")
			}
			mapping = props(m)
		}
	}
	if mapping == nil {
		t.Fatal("the digest function has no event source")
	}
	ledger := s.logicalID(t, "AWS::DynamoDB::Table", "LedgerTable")
	dlq := s.constructID(t, "AWS::SQS::Queue", digestDLQID)
	want := map[string]string{
		"EventSourceArn":                 `{"Fn::GetAtt":["` + ledger + `","StreamArn"]}`,
		"StartingPosition":               `"TRIM_HORIZON"`,
		"BatchSize":                      `10000`,
		"MaximumBatchingWindowInSeconds": `45`,
		"ParallelizationFactor":          `1`,
		"BisectBatchOnFunctionError":     `false`,
		"MaximumRetryAttempts":           `-1`,
		"MaximumRecordAgeInSeconds":      `-1`,
		"DestinationConfig":              `{"OnFailure":{"Destination":{"Fn::GetAtt":["` + dlq + `","Arn"]}}}`,
		"FilterCriteria":                 `null`,
		"TumblingWindowInSeconds":        `null`,
	}
	for k, w := range want {
		if got := mustJSON(mapping[k]); got != w {
			t.Errorf("digest mapping %s = %s, want %s", k, got, w)
		}
	}
	env := s.function(t, settings.Digest)["Environment"].(map[string]any)["Variables"].(map[string]any)
	for v, w := range map[*settings.Var]string{
		settings.DigestBucket:   `{"Ref":"` + s.constructID(t, "AWS::S3::Bucket", digestBucketID) + `"}`,
		settings.DigestKeyARN:   `{"Fn::GetAtt":["` + s.constructID(t, "AWS::KMS::Key", digestKeyID) + `","Arn"]}`,
		settings.DigestInterval: `"45s"`,
	} {
		if got := mustJSON(env[v.Env]); got != w {
			t.Errorf("digest function %s = %s, want %s", v.Env, got, w)
		}
	}
	if env[settings.HistoryRetention.Env] == nil && settings.HistoryRetention.Default == "" {
		t.Error("the digest function is not given the history retention")
	}
	for _, o := range []outputs.Output{outputs.DigestBucket, outputs.DigestKeyARN} {
		if _, ok := s.json["Outputs"].(map[string]any)[o.Name]; !ok || o.Env == "" {
			t.Errorf("output %s missing, or it has no Env for ledgerctl and devstack", o.Name)
		}
	}
}

// TestDigestHeartbeatPeriod: three intervals, whole minutes, at least five minutes.
func TestDigestHeartbeatPeriod(t *testing.T) {
	for _, tc := range []struct{ interval, want time.Duration }{
		{5 * time.Minute, 15 * time.Minute},
		{5 * time.Second, 5 * time.Minute},
		{110 * time.Second, 6 * time.Minute},
	} {
		p := &LedgerStackProps{}
		p.Functions.DigestInterval = tc.interval
		if got := p.digestHeartbeatPeriod(); got != tc.want {
			t.Errorf("interval %v: heartbeat period %v, want %v", tc.interval, got, tc.want)
		}
	}
}

// TestDigestHeartbeatSpansTwoTicks: for every interval a stage may set (whole seconds up to 5m),
// the DigestHeartbeat period holds at least two of the schedule's ticks, so one late or lost tick
// does not page, and a stopped tick does within the period after the next.
func TestDigestHeartbeatSpansTwoTicks(t *testing.T) {
	for i := time.Second; i <= 5*time.Minute; i += time.Second {
		p := &LedgerStackProps{}
		p.Functions.DigestInterval = i
		if hb, tick := p.digestHeartbeatPeriod(), p.digestTickRate(); hb < 2*tick || tick%time.Minute != 0 {
			t.Fatalf("interval %v: heartbeat period %v, tick %v: want a tick of whole minutes, at least two per period", i, hb, tick)
		}
	}
}

// TestDigestValidate: a batching window in fractions of a second fails the synth, naming the
// setting; a retention beyond Object Lock's 100-year default does not (each digest's own
// retain-until date carries it), and the default is capped.
func TestDigestValidate(t *testing.T) {
	p := testProps(t)
	p.Functions.DigestInterval = 1500 * time.Millisecond
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "digestInterval") {
		t.Errorf("Validate() with a 1.5 s digest interval = %v", err)
	}
	p = testProps(t)
	p.Functions.Policy.Retention = (maxObjectLockDays + 1) * 24 * time.Hour
	if got := p.digestRetentionDays(); got != maxObjectLockDays {
		t.Errorf("default retention for %v = %v days, want %d", p.Functions.Policy.Retention, got, maxObjectLockDays)
	}
}
