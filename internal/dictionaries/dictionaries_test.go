package dictionaries

import (
	"bytes"
	"os"
	"testing"

	"github.com/resetledger/resetledger/internal/testkit/shapes"
	"github.com/resetledger/resetledger/pkg/envelope/wireform"
)

// shipped is the dictionary of the sample templates (internal/testkit/shapes),
// which the local stage's sample intent and make bench seal with.
const shipped = "starfall-reset.dict"

// TestShippedDictionaryIsTheSampleTemplates: the stack holds the sample
// templates' dictionary as shapes renders it today, so a changed template
// fails here (VECTORS_UPDATE=1 rewrites the file) rather than in a
// producer's size. And Stack holds it under its id.
func TestShippedDictionaryIsTheSampleTemplates(t *testing.T) {
	want := shapes.Dictionary()
	if os.Getenv("VECTORS_UPDATE") == "1" {
		if err := os.WriteFile(shipped, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(shipped)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("%s is not shapes.Dictionary() (%v); VECTORS_UPDATE=1 rewrites it", shipped, err)
	}
	set, err := Stack()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := set[wireform.DictionaryID(want)]; !ok || !bytes.Equal(d, want) {
		t.Fatalf("Stack() does not hold %s under its id", shipped)
	}
}
