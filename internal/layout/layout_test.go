package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/resetledger/resetledger"

// maxFuncLines is the longest a function may be, test or not, without a
// comment saying why ("… is long because …").
const maxFuncLines = 80

// sourceFile is one parsed Go file of the module.
type sourceFile struct {
	rel  string // slash-separated, from the module root
	file *ast.File
	test bool // a _test.go file
}

// moduleFiles parses every Go file of the module, tests included, skipping
// build output, tool folders and node_modules.
func moduleFiles(t *testing.T) (*token.FileSet, []sourceFile) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found from %s: %v", root, err)
	}
	fset := token.NewFileSet()
	var files []sourceFile
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "dist" || n == "testdata" || strings.HasPrefix(n, "cdk.out")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files = append(files, sourceFile{rel: filepath.ToSlash(rel), file: f, test: strings.HasSuffix(p, "_test.go")})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := 0
	for _, f := range files {
		if f.test {
			tests++
		}
	}
	if len(files)-tests < 50 || tests < 50 {
		t.Fatalf("found only %d Go files and %d test files under %s: the walk is broken", len(files)-tests, tests, root)
	}
	return fset, files
}

// TestPublicPackagesDoNotImportInternal: what pkg/ exports can be imported
// by other modules, which cannot import internal/; a pkg/ package that
// needs an internal one is in the wrong place. Its tests may: they are not
// exported.
func TestPublicPackagesDoNotImportInternal(t *testing.T) {
	_, files := moduleFiles(t)
	for _, f := range files {
		if f.test || !strings.HasPrefix(f.rel, "pkg/") {
			continue
		}
		for _, imp := range f.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, module+"/internal/") {
				t.Errorf("%s imports %s", f.rel, path)
			}
		}
	}
}

// funcLines is how many lines a function declaration spans, doc comment
// excluded.
func funcLines(fset *token.FileSet, fd *ast.FuncDecl) int {
	return fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
}

// TestFunctionLength: no function, in a test file or not (a Test, Benchmark
// or Fuzz function, a helper, a method), is over maxFuncLines lines unless
// its doc comment says why it is long.
func TestFunctionLength(t *testing.T) {
	fset, files := moduleFiles(t)
	for _, f := range files {
		for _, d := range f.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := funcLines(fset, fd)
			if n <= maxFuncLines || strings.Contains(fd.Doc.Text(), "is long because") {
				continue
			}
			t.Errorf("%s: %s is %d lines (at most %d, or say in its comment why it is long because …)", f.rel, fd.Name.Name, n, maxFuncLines)
		}
	}
}

// TestLayering: the arrows run one way. The handlers decode Lambda events
// and call a use case; the store they read through is a port they are
// given (handler.RowStream), so no handler imports a store. The wiring
// builds ports and use cases for a function's main, which builds the
// handler, so nothing under internal/wire imports the handlers. Nothing
// shipped imports the test harnesses (internal/testkit). Tests may: they
// assemble the real parts.
func TestLayering(t *testing.T) {
	_, files := moduleFiles(t)
	rules := []struct {
		from string   // a folder, slash-separated, from the module root
		not  []string // import paths under the module it may not import
	}{
		{"internal/handler/", []string{"internal/dynamostore", "internal/memstore"}},
		{"internal/wire/", []string{"internal/handler"}},
		// The test harnesses sit in internal/testkit; nothing shipped uses them.
		{"functions/", []string{"internal/testkit"}},
		{"pkg/", []string{"internal/testkit"}},
		{"internal/handler/", []string{"internal/testkit"}},
		{"internal/wire/", []string{"internal/testkit"}},
	}
	for _, f := range files {
		if f.test || strings.HasPrefix(f.rel, "internal/handler/handlertest/") {
			continue // test files and the handlers' test helpers assemble real parts
		}
		for _, r := range rules {
			if !strings.HasPrefix(f.rel, r.from) {
				continue
			}
			for _, imp := range f.file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, n := range r.not {
					if path == module+"/"+n || strings.HasPrefix(path, module+"/"+n+"/") {
						t.Errorf("%s imports %s", f.rel, path)
					}
				}
			}
		}
	}
}

// The packages under internal/usecase: one per use case, the parts some of
// them share, and the one place that assembles them. A new package there
// must be named here, as one or the other.
var (
	useCases = []string{"claim", "dispatch", "reconcile", "expire", "evidence", "resolve"}
	parts    = []string{"sending", "pacing", "admission"}
)

// TestUseCasePackages enforces the kernel's layering: no use-case package
// imports another (nor the assembler), a shared part imports no use case,
// every use case and part imports the kernel, and the kernel imports
// nothing of the module but its character classes.
func TestUseCasePackages(t *testing.T) {
	_, files := moduleFiles(t)
	kind := map[string]string{"assemble": "assembler"}
	for _, n := range useCases {
		kind[n] = "use case"
	}
	for _, n := range parts {
		kind[n] = "part"
	}
	const dir = "internal/usecase/"
	usesKernel := map[string]bool{}
	for _, f := range files {
		if f.test {
			continue
		}
		from := ""
		if rest, ok := strings.CutPrefix(f.rel, dir); ok {
			from, _, _ = strings.Cut(rest, "/")
			if kind[from] == "" {
				t.Errorf("%s: package %s under %s is neither a use case nor a part (name it in useCases or parts)", f.rel, from, dir)
			}
		}
		for _, imp := range f.file.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rel, ok := strings.CutPrefix(path, module+"/")
			if !ok {
				continue
			}
			switch {
			case strings.HasPrefix(f.rel, "pkg/ledger/") && rel != "pkg/charclass":
				t.Errorf("%s: the kernel imports %s", f.rel, path)
			case rel == "pkg/ledger":
				usesKernel[from] = true
			}
			to, ok := strings.CutPrefix(rel, dir)
			if !ok || from == "" || kind[from] == "assembler" || to == from {
				continue
			}
			if k := kind[to]; k == "use case" || k == "assembler" {
				t.Errorf("%s: %s %s imports %s %s", f.rel, kind[from], from, k, to)
			}
		}
	}
	for n, k := range kind {
		if k != "assembler" && !usesKernel[n] {
			t.Errorf("%s %s does not import the kernel, pkg/ledger", k, n)
		}
	}
}
