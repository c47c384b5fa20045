package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/resetledger/resetledger/internal/dynamostore"
	"github.com/resetledger/resetledger/internal/outputs"
	"github.com/resetledger/resetledger/internal/testkit/emulator"
	"github.com/resetledger/resetledger/pkg/ledger"
)

// tamperSuffix ends the challenge id of the row TestDigest tampers with. Its rewrite and its
// restore are both stream records the digest function digests, each with a gap on that row
// (an older entry changed): the deployed digests keep that evidence for good, which is the
// point. Later runs tell those findings apart from new ones by the row's challenge id.
const tamperSuffix = "-digest-tamper"

// digestTimeout is how long TestDigest waits for the digests of its rows: the local stage's
// DIGEST_INTERVAL is 5 s (localstack/deploy-local.sh).
const digestTimeout = 90 * time.Second

// TestDigest: on the deployed local stack the digest function digests the rows the pipeline
// writes into the Object Lock bucket, signed with the stack's ECC_NIST_P256 key;
// `ledgerctl verify --digest-bucket --digest-key` (the built binary, as an operator runs it)
// passes on them; and fails, naming the row, once an entry of one of them is rewritten in the
// deployed table with its chain recomputed, which the row's own hash chain cannot show.
//
// What the emulator cannot show (Object Lock refusing a delete, the policies' Denies) is proven
// by infra's TestDigestBucket and TestBoundaries (docs/development.md).
func TestDigest(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	named := e.outputs(t, outputs.DigestBucket, outputs.DigestKeyARN)
	bucket, keyARN := named[0], named[1]
	run := fmt.Sprintf("e2e-dg-%d", time.Now().UnixNano())

	// Rows of the pipeline: two accepted emails, and the row to tamper with.
	var challenges, keys []string
	for _, c := range []string{run + "-a", run + "-b", run + tamperSuffix} {
		n := notification(c, ledger.Email, "success+"+c+"@"+simulatorDomain, time.Now().Add(10*time.Minute))
		if _, err := e.producer.Publish(ctx, n); err != nil {
			t.Fatalf("publish %s: %v", c, err)
		}
		challenges, keys = append(challenges, c), append(keys, key(n))
	}
	for _, k := range keys {
		if row := e.terminal(t, k, sendTimeout); row.State != ledger.Accepted {
			t.Fatalf("row %s is %s (%s), want accepted", k, row.State, row.Reason)
		}
	}
	written := time.Now()

	ledgerctl := filepath.Join(t.TempDir(), "ledgerctl")
	if out, err := exec.Command("go", "build", "-o", ledgerctl, "../cmd/ledgerctl").CombinedOutput(); err != nil {
		t.Fatalf("build ledgerctl: %v\n%s", err, out)
	}
	// The emulator's credentials, as the suite's own clients use them.
	creds, err := e.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "LEDGER_TABLE="+e.out.LedgerTable, "AWS_ENDPOINT_URL="+e.endpoint, "AWS_REGION="+e.cfg.Region,
		"AWS_ACCESS_KEY_ID="+creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY="+creds.SecretAccessKey, "AWS_SESSION_TOKEN="+creds.SessionToken)
	verify := func(challenge string) (string, int) {
		cmd := exec.Command(ledgerctl, "verify", challenge, "--digest-bucket", bucket, "--digest-key", keyARN)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("ledgerctl verify %s: %v", challenge, err)
		}
		return string(out), code
	}
	waitForDigests(t, ctx, e, verify, challenges, keys, written, bucket)
	checkRewriteFound(t, e, ledgerctl, env, verify, challenges, keys)
}

// waitForDigests: digests appear and cover the rows, verify passing for each
// with nothing pending; findings about earlier runs' tampered rows are
// expected, any other finding fails.
func waitForDigests(t *testing.T, ctx context.Context, e *env, verify func(string) (string, int), challenges, keys []string, written time.Time, bucket string) {
	t.Helper()
	tampered := e.tamperedKeys(t)
	// 1. Digests appear and cover the rows: verify passes for each, with nothing pending. Findings
	// about earlier runs' tampered rows are expected (they stay in the digests for good); any
	// other finding fails.
	for i, c := range challenges {
		var out string
		var code int
		err := Poll(ctx, digestTimeout, time.Second, func(context.Context) (bool, string, error) {
			out, code = verify(c)
			if strings.Contains(out, "pending ROW "+keys[i]+":") {
				return false, "row not digested yet", nil
			}
			all, bad := findings(out, tampered)
			// Exit 0, or 1 with findings that all name an earlier run's tampered row.
			if code == 0 || (code == 1 && len(all) > 0 && len(bad) == 0) {
				return true, "", nil
			}
			return false, fmt.Sprintf("exit %d, findings %q", code, bad), nil
		})
		if err != nil {
			t.Fatalf("verify %s (%v after its row was written): %v\n%s", c, time.Since(written).Round(time.Second), err, out)
		}
		if all, _ := findings(out, tampered); len(all) > 0 {
			t.Logf("verify %s: its row is digested; %d findings, each on a row an earlier run tampered with", c, len(all))
		} else {
			t.Logf("verify %s: %s", c, lastLine(out))
		}
	}
	if n := e.digestCount(t, bucket); n == 0 {
		t.Fatal("the digest bucket holds no digest")
	}
}

// checkRewriteFound: an insider rewrites entry 1 of the tamper row and
// recomputes its chain; the row's own chain still verifies, the digests do not.
func checkRewriteFound(t *testing.T, e *env, ledgerctl string, env []string, verify func(string) (string, int), challenges, keys []string) {
	t.Helper()
	// 2. An insider rewrites entry 1 of the tamper row and recomputes its chain: the row's own
	// chain still verifies, the digests do not. (The digest function also records the rewrite as
	// a gap on that row when it digests it; the check below needs only the earlier digest.)
	victim := keys[2]
	original := e.rawItem(t, victim)
	defer e.putItem(t, original) // a restore is a change too: the digests record it, and later runs expect that
	e.rewriteRecomputed(t, victim, 1, "operator decision: accepted")
	if row := e.rowNow(t, victim); row.Verify() != nil {
		t.Fatalf("the rewrite should leave a valid chain: %v", row.Verify())
	}
	// Without the digests, verify checks the row's own chain only, and the rewrite passes it.
	plain := exec.Command(ledgerctl, "verify", challenges[2])
	plain.Env = env
	if out, err := plain.CombinedOutput(); err != nil {
		t.Fatalf("verify %s without the digests: %v, want the recomputed chain to pass it:\n%s", challenges[2], err, out)
	}
	out, code := verify(challenges[2])
	if code != 1 || !strings.Contains(out, "rewritten ROW "+victim+" digest ") {
		t.Fatalf("verify after the rewrite: exit %d, want 1 naming rewritten ROW %s:\n%s", code, victim, out)
	}
	t.Logf("verify %s after the rewrite: %s", challenges[2], firstLine(out, "rewritten ROW "+victim))
}

// findingLine is a finding line of verify (its code first, docs/digests.md §7), and the key it
// names, if any.
var findingLine = regexp.MustCompile(`^([a-z][a-z-]*) (?:ROW ([0-9a-f]{64}|\S*)|DIGEST \d+|OBJECT \S+)[ :]`)

// findings are the failing lines of verify's output, and those of them that name no row in
// tolerated.
func findings(out string, tolerated map[string]bool) (all, bad []string) {
	for _, line := range strings.Split(out, "\n") {
		m := findingLine.FindStringSubmatch(line)
		if m == nil || m[1] == "pending" || m[1] == "removed" { // not failures
			continue
		}
		all = append(all, line)
		if m[2] == "" || !tolerated[m[2]] {
			bad = append(bad, line)
		}
	}
	return all, bad
}

// tamperedKeys are the keys of the rows earlier runs of TestDigest tampered with.
func (e *env) tamperedKeys(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	sc := dynamostore.NewScanner(dynamodb.NewFromConfig(e.cfg), e.out.LedgerTable)
	err := sc.All(context.Background(), dynamostore.ScanFilter{}, func(r ledger.Entry) error {
		if strings.HasSuffix(r.Identity.ChallengeID, tamperSuffix) {
			out[r.Key] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) digestCount(t *testing.T, bucket string) int {
	t.Helper()
	client := s3.NewFromConfig(e.cfg, func(o *s3.Options) { o.UsePathStyle = true })
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: aws.String("digests/")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

func (e *env) rawItem(t *testing.T, key string) map[string]types.AttributeValue {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{TableName: &e.out.LedgerTable,
		ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}})
	if err != nil || out.Item == nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return out.Item
}

func (e *env) putItem(t *testing.T, item map[string]types.AttributeValue) {
	t.Helper()
	if _, err := dynamodb.NewFromConfig(e.cfg).PutItem(context.Background(), &dynamodb.PutItemInput{TableName: &e.out.LedgerTable, Item: item}); err != nil {
		t.Fatal(err)
	}
}

// rewriteRecomputed rewrites the reason of entry i of key's history and every hash from it on,
// directly in the table, as an insider with write access could (cmd/ledgerctl's digest tests do
// the same): the row's own chain still verifies.
func (e *env) rewriteRecomputed(t *testing.T, key string, i int, reason string) {
	t.Helper()
	item := e.rawItem(t, key)
	if err := emulator.RewriteRecomputed(item, e.rowNow(t, key), i, reason); err != nil {
		t.Fatal(err)
	}
	e.putItem(t, item)
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func firstLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}
