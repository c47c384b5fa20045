package codes

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLinksNoLibrary: reading an allow-list links no phone-number library
// (and so parses no metadata at start), and neither do the settings every
// function loads.
func TestLinksNoLibrary(t *testing.T) {
	for _, pkg := range []string{".", "../../../internal/settings"} {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.Contains(dep, "phonenumbers") || strings.Contains(dep, "protobuf") {
				t.Errorf("%s links %s", pkg, dep)
			}
		}
	}
}

func TestKnownIsSortedAndUnique(t *testing.T) {
	if !slices.IsSorted(known) || len(slices.Compact(slices.Clone(known))) != len(known) {
		t.Error("known is not sorted or has duplicates: Known's binary search needs both")
	}
	if !Known("GB") || Known("ZZ") || Known("001") || Known("gb") {
		t.Error("Known gives wrong answers")
	}
}
