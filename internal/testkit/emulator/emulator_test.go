package emulator

import (
	"net"
	"regexp"
	"strings"
	"testing"
)

// DynamoDB table names: 3-255 of [a-zA-Z0-9_.-]. SQS queue names: 1-80 of
// [a-zA-Z0-9_-] (".fifo" suffix allowed). Checking against the stricter SQS
// rule, with room for ".fifo", covers both.
var (
	dynamoName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)
	sqsName    = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,75}$`)
)

func TestUniqueNameValid(t *testing.T) {
	prefixes := []string{
		"ledger",
		"",
		"a",
		"Mixed_Case-ok",
		"has space/and:colon.dot",
		"ünïcode",
		strings.Repeat("x", 300),
	}
	for _, p := range prefixes {
		n := UniqueName(t, p)
		if !dynamoName.MatchString(n) {
			t.Errorf("UniqueName(%q) = %q: not a valid DynamoDB table name", p, n)
		}
		if !sqsName.MatchString(n) {
			t.Errorf("UniqueName(%q) = %q: not a valid SQS queue name (with room for .fifo)", p, n)
		}
		if len(n+".fifo") > 80 {
			t.Errorf("UniqueName(%q) = %q: %d chars, no room for .fifo", p, n, len(n))
		}
	}
}

func TestUniqueNameKeepsPrefixAndIsUnique(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 1000; i++ {
		n := UniqueName(t, "claims")
		if !strings.HasPrefix(n, "claims-") || len(n) != len("claims-")+SuffixLen {
			t.Fatalf("UniqueName(claims) = %q: want claims-<%d chars>", n, SuffixLen)
		}
		if seen[n] {
			t.Fatalf("UniqueName returned %q twice in 1000 calls", n)
		}
		seen[n] = true
	}
}

func TestEndpointPrefersAWSEndpointURL(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
	ep, ok := Endpoint()
	if !ok || ep != "http://127.0.0.1:1" {
		t.Fatalf("Endpoint() = %q, %v; want AWS_ENDPOINT_URL value", ep, ok)
	}
	cfg := Config(t)
	if cfg.BaseEndpoint == nil || *cfg.BaseEndpoint != "http://127.0.0.1:1" {
		t.Fatalf("Config BaseEndpoint = %v; want http://127.0.0.1:1", cfg.BaseEndpoint)
	}
	if cfg.Region == "" {
		t.Fatal("Config Region is empty")
	}
}

// Without AWS_ENDPOINT_URL the emulator is looked for where
// localstack/ministack.sh starts it: MINISTACK_PORT, not always 4566.
func TestEndpointFollowsMinistackPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("MINISTACK_PORT", port)
	if ep, ok := Endpoint(); !ok || ep != "http://127.0.0.1:"+port {
		t.Fatalf("Endpoint() = %q, %v; want http://127.0.0.1:%s", ep, ok, port)
	}
	ln.Close()
	if ep, ok := Endpoint(); ok {
		t.Fatalf("nothing listens on MINISTACK_PORT %s: Endpoint() = %q, want none", port, ep)
	}
}
