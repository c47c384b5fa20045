package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mutationFile holds the report's mutation score section: the figures of
// the last make mutate (bench/mutate/mutate.sh), written there by hand
// from its summary. make bench does not re-run it (it takes hours).
var mutationFile = filepath.Join("mutate", "score.md")

// mutationSection is the report's "Mutation score" section, or none when
// path does not exist.
func mutationSection(path string) []Section {
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) == "" {
		return nil
	}
	return []Section{{Title: "Mutation score (`make mutate`)", Body: string(b)}}
}

// TestMutationSection: the score make mutate measured is kept in the
// report that make bench writes.
func TestMutationSection(t *testing.T) {
	secs := mutationSection(mutationFile)
	if len(secs) != 1 || !strings.Contains(secs[0].Body, "Efficacy") {
		t.Fatalf("%s gives %+v, want one section with the score", mutationFile, secs)
	}
	if secs := mutationSection(filepath.Join(t.TempDir(), "none.md")); secs != nil {
		t.Fatalf("a missing file gives %+v", secs)
	}
}
