// Package dictionaries holds the preset DEFLATE dictionaries this stack's
// functions trust (docs/intent-v2.md §1.5): every *.dict file here, built
// into the claim, dispatch and reconcile binaries. A version 3 envelope
// naming one that is not here is dead-lettered by claim and never opened.
// Adding a template's dictionary is a deploy: the file goes here, the
// stack is deployed, and only then does a producer seal with it
// (docs/deploy.md).
package dictionaries

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	"github.com/resetledger/resetledger/pkg/envelope/wireform"
)

//go:embed *.dict
var files embed.FS

// Stack returns the dictionaries of this stack. It fails on an empty or
// oversized file, so a function with a broken set does not start.
func Stack() (wireform.Dictionaries, error) {
	names, err := fs.Glob(files, "*.dict")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	ds := make([][]byte, 0, len(names))
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ds = append(ds, b)
	}
	set, err := wireform.NewDictionaries(ds...)
	if err != nil {
		return nil, fmt.Errorf("dictionaries: %w", err)
	}
	return set, nil
}
