package settings

import (
	"strings"
	"testing"
	"time"
)

// TestDigestSettings: the digest function needs its bucket and key, reads
// the interval (default 5m, at most Lambda's 5-minute batching window) and
// the retention, and of the ledger's tables only the ledger table's name
// (a batch naming another table's stream is never signed).
func TestDigestSettings(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	_, err := Load(Digest, get)
	if err == nil || !strings.Contains(err.Error(), "DIGEST_BUCKET") || !strings.Contains(err.Error(), "DIGEST_KEY_ARN") || !strings.Contains(err.Error(), "LEDGER_TABLE") ||
		strings.Contains(err.Error(), "CONTENT_TABLE") {
		t.Fatalf("without its bucket and key: %v", err)
	}
	env["DIGEST_BUCKET"], env["DIGEST_KEY_ARN"], env["LEDGER_TABLE"] = "digests", "arn:aws:kms:us-east-1:111122223333:key/d", "ledger"
	s, err := Load(Digest, get)
	if err != nil {
		t.Fatal(err)
	}
	if s.DigestInterval != 5*time.Minute || s.DigestBucket != "digests" || s.Policy.Retention == 0 {
		t.Errorf("settings %v %q %v", s.DigestInterval, s.DigestBucket, s.Policy.Retention)
	}
	env["DIGEST_INTERVAL"] = "6m"
	if _, err := Load(Digest, get); err == nil || !strings.Contains(err.Error(), "DIGEST_INTERVAL") {
		t.Errorf("a 6m interval: %v", err)
	}
}
