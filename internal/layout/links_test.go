package layout

import (
	"fmt"
	"io/fs"
	"iter"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestMarkdownLinks: every relative link in every Markdown file of the repository (outside
// node_modules, vendor and dot-folders such as .venv) names a file or folder that exists, and
// its #anchor, if any, names a heading (by GitHub's anchor rules) or an explicit anchor of the
// Markdown file it points to.
func TestMarkdownLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t, root)
	if !slices.Contains(files, "README.md") {
		t.Fatalf("no README.md among the Markdown files found under %s", root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[rel] = markdownAnchors(string(b))
		return anchors[rel]
	}
	checked := 0
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(b)) {
			checked++
			if problem := checkLink(root, rel, l.target, anchorsOf); problem != "" {
				t.Errorf("%s:%d: link %q: %s", rel, l.line, l.target, problem)
			}
		}
	}
	t.Logf("%d relative links checked in %d Markdown files", checked, len(files))
}

// markdownFiles lists the repository's Markdown files, slash-separated from root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor" || name == "cdk.out") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.EqualFold(filepath.Ext(name), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLink returns what is wrong with target, a link in the Markdown file from (relative to
// root), or "" if nothing is.
func checkLink(root, from, target string, anchorsOf func(rel string) map[string]bool) string {
	file, frag, _ := strings.Cut(target, "#")
	unescaped, err := url.PathUnescape(file)
	if err != nil {
		return "bad escape in path"
	}
	rel := from
	if unescaped != "" {
		if strings.HasPrefix(unescaped, "/") {
			rel = path.Clean(strings.TrimPrefix(unescaped, "/"))
		} else {
			rel = path.Join(path.Dir(from), unescaped)
		}
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return "points outside the repository"
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel))); err != nil {
			return "no such file or folder: " + rel
		}
	}
	if frag == "" || !strings.EqualFold(path.Ext(rel), ".md") {
		return ""
	}
	if frag, err = url.PathUnescape(frag); err != nil {
		return "bad escape in anchor"
	}
	if !anchorsOf(rel)[frag] {
		return fmt.Sprintf("%s has no heading or anchor #%s", rel, frag)
	}
	return ""
}

type mdLink struct {
	line   int
	target string
}

var (
	fence       = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	inlineCode  = regexp.MustCompile("(`+)[^`]*?`+")
	inlineLink  = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef      = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	schemeRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	atxHeading  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	htmlIDAttr  = regexp.MustCompile(`\sid="([^"]+)"`)
	mdLinkText  = regexp.MustCompile(`!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)`)
	htmlTag     = regexp.MustCompile(`<[^>]+>`)
	emphasisRun = regexp.MustCompile(`\*+`)
)

// proseLines yields the lines of a Markdown text outside fenced code blocks, each with its
// index (0-based).
func proseLines(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence := ""
		for i, line := range strings.Split(text, "\n") {
			if m := fence.FindStringSubmatch(line); m != nil {
				switch {
				case inFence == "":
					inFence = m[1][:3]
				case strings.HasPrefix(m[1], inFence):
					inFence = ""
				}
				continue
			}
			if inFence == "" && !yield(i, line) {
				return
			}
		}
	}
}

// markdownLinks returns the relative link targets of a Markdown text, outside code blocks and
// code spans: inline links and images, and link reference definitions. Absolute URLs (with a
// scheme, such as https: or mailto:) are left out.
func markdownLinks(text string) []mdLink {
	var out []mdLink
	for i, line := range proseLines(text) {
		line = inlineCode.ReplaceAllString(line, "")
		var targets []string
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			targets = append(targets, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			targets = append(targets, m[1])
		}
		for _, tg := range targets {
			if tg == "" || schemeRE.MatchString(tg) || strings.HasPrefix(tg, "//") {
				continue
			}
			out = append(out, mdLink{line: i + 1, target: tg})
		}
	}
	return out
}

// markdownAnchors returns the anchors a Markdown text defines: GitHub's anchor of every ATX
// heading outside code blocks (numbered -1, -2, ... when repeated), and explicit HTML anchors
// (<a name="x">, id="x").
func markdownAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(text) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		for _, m := range htmlIDAttr.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := atxHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := githubSlug(m[2])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// githubSlug is GitHub's anchor for a heading's Markdown text: the text as rendered (link text
// kept, code spans' backticks, emphasis markers and HTML tags dropped), lowercased, every
// character that is not a letter, mark, digit, connector punctuation (such as _), space or
// hyphen removed, and each space turned into a hyphen.
func githubSlug(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "`", "")
	text = emphasisRun.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Pc):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestGithubSlug: headings as this repository writes them, and their anchors on GitHub.
func TestGithubSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"What it promises": "what-it-promises",
		"Provider answers and what the ledger records":                "provider-answers-and-what-the-ledger-records",
		"Attempt proofs: only evidence of our own sends":              "attempt-proofs-only-evidence-of-our-own-sends",
		"The operator role, and who may write the ledger":             "the-operator-role-and-who-may-write-the-ledger",
		"Run against LocalStack or ministack":                         "run-against-localstack-or-ministack",
		"`ledgerctl` and `SEND_RATE_SMS`":                             "ledgerctl-and-send_rate_sms",
		"Surge cost (`make surge`)":                                   "surge-cost-make-surge",
		"1. Home region — with a standby":                             "1-home-region--with-a-standby",
		"[docs](docs/x.md) *and* notes":                               "docs-and-notes",
		"Adopting it from an account service (Node.js, Python or Go)": "adopting-it-from-an-account-service-nodejs-python-or-go",
	} {
		if got := githubSlug(heading); got != want {
			t.Errorf("githubSlug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestCheckLinkFindsBreaks: the checker reports a missing file, a missing anchor in another file
// and in the same file, a repeated heading's numbered anchor, and passes what exists.
func TestCheckLinkFindsBreaks(t *testing.T) {
	root := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## Notes\n\n## Notes\n\n```\n## Not a heading\n```\n<a name=\"kept\"></a>\n")
	write("README.md", "see [a](docs/a.md#notes-1), [gone](docs/b.md), `[code](nope.md)`, [web](https://example.test/x)\n")
	anchorsOf := func(rel string) map[string]bool {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return markdownAnchors(string(b))
	}
	for target, wantOK := range map[string]bool{
		"docs/a.md": true, "docs/a.md#notes": true, "docs/a.md#notes-1": true, "docs/a.md#kept": true,
		"docs/a.md#notes-2": false, "docs/a.md#not-a-heading": false, "docs/b.md": false, "docs/": true,
		"#missing": false, "../outside.md": false,
	} {
		if got := checkLink(root, "README.md", target, anchorsOf) == ""; got != wantOK {
			t.Errorf("checkLink(%q) ok = %v, want %v", target, got, wantOK)
		}
	}
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	var got []string
	for _, l := range markdownLinks(string(readme)) {
		got = append(got, l.target)
	}
	if want := []string{"docs/a.md#notes-1", "docs/b.md"}; !slices.Equal(got, want) {
		t.Errorf("markdownLinks = %q, want %q", got, want)
	}
}
