package smsregion

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLinksNoLibrary: neither this package nor the dispatch function links
// the phone-number library (whose package initialization parses all of its
// metadata at every cold start) or protobuf.
func TestLinksNoLibrary(t *testing.T) {
	for _, pkg := range []string{".", "../../functions/dispatch"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "phonenumbers") || (pkg == "." && strings.Contains(dep, "protobuf")) {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

// TestInitAllocatesNothing: in the dispatch binary, this package's
// initialization allocates nothing (the metadata is static data; its
// patterns are compiled on first use), and the library's does not run.
func TestInitAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dispatch function")
	}
	bin := filepath.Join(t.TempDir(), "dispatch")
	if out, err := exec.Command("go", "build", "-trimpath", "-o", bin, "../../functions/dispatch").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// With no settings the function refuses its configuration and exits,
	// after every package's initialization.
	cmd := exec.Command(bin)
	cmd.Env = []string{"GODEBUG=inittrace=1"}
	out, _ := cmd.CombinedOutput()
	line := regexp.MustCompile(`(?m)^init github.com/resetledger/resetledger/internal/smsregion @.*$`).Find(out)
	if line == nil {
		t.Fatalf("no inittrace line for internal/smsregion in:\n%s", out)
	}
	if !strings.HasSuffix(string(line), ", 0 bytes, 0 allocs") {
		t.Errorf("internal/smsregion's initialization allocates: %s", line)
	}
	if strings.Contains(string(out), "phonenumbers") {
		t.Error("the dispatch binary initializes the phone-number library")
	}
}
