package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
)

// localContext reads the context localstack/deploy-local.sh deploys the local stage with: every
// -c key=value of its CONTEXT array, a value's $NAME replaced by the default of a NAME="${ENV:-x}"
// line of the script (a value whose variable has no such default keeps its $NAME).
func localContext(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../localstack/deploy-local.sh")
	if err != nil {
		t.Fatal(err)
	}
	script := string(raw)
	defaults := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)="\$\{[A-Z_]+:-([^}]*)\}"$`).FindAllStringSubmatch(script, -1) {
		defaults[m[1]] = m[2]
	}
	_, block, ok := strings.Cut(script, "\nCONTEXT=(\n")
	if block, _, ok = strings.Cut(block, "\n)\n"); !ok {
		t.Fatal("deploy-local.sh: no CONTEXT=( ... ) array")
	}
	ctx := map[string]string{}
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range regexp.MustCompile(`-c\s+(?:"([^"]*)"|(\S+))`).FindAllStringSubmatch(line, -1) {
			key, value, ok := strings.Cut(m[1]+m[2], "=")
			if !ok {
				t.Fatalf("deploy-local.sh: context %q is not key=value", m[0])
			}
			ctx[key] = regexp.MustCompile(`\$([A-Z_]+)`).ReplaceAllStringFunc(value, func(v string) string {
				if d, ok := defaults[v[1:]]; ok {
					return d
				}
				return v
			})
		}
	}
	if len(ctx) == 0 {
		t.Fatal("deploy-local.sh: no context in CONTEXT")
	}
	return ctx
}

// contextDefault returns the declared default of a context key, as docs/configuration.md writes it.
func contextDefault(key string) (string, bool) {
	for _, sp := range stageParams {
		if sp.Key == key {
			return defaultCell(sp.Default, false), true
		}
	}
	for _, v := range settings.Vars {
		if v.Context == key {
			return defaultCell(v.Default, false), true
		}
	}
	return "", false
}

// TestLocalStageDocumented: docs/configuration.md's table of the local stage has a row for every
// context key localstack/deploy-local.sh sets, with the value it sets, and the declared default
// of every key; a key it lists that the script does not set is at its default there.
func TestLocalStageDocumented(t *testing.T) {
	const doc = "docs/configuration.md"
	local := localContext(t)
	rows := map[string][]string{}
	for _, cells := range tableRows(docSection(t, doc, "## The local stage"), regexp.MustCompile("^`[a-z][A-Za-z]*`$")) {
		rows[strings.Trim(cells[0], "`")] = cells
	}
	for key, value := range local {
		cells, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("%s: the local stage's table has no row for %s (deploy-local.sh sets %s)", doc, key, value)
		case len(cells) == 4 && !strings.Contains(value, "$") && !strings.HasPrefix(cells[1], "`"+value+"`"):
			t.Errorf("%s: the local stage's %s is %s, deploy-local.sh sets %s", doc, key, cells[1], value)
		}
	}
	for key, cells := range rows {
		def, ok := contextDefault(key)
		switch {
		case !ok:
			t.Errorf("%s: the local stage's table has a row for %s, which is no context key", doc, key)
		case len(cells) != 4 || cells[2] != def:
			t.Errorf("%s: the local stage's row for %s = %q, want default %s and why", doc, key, cells, def)
		case local[key] == "" && cells[1] != def:
			t.Errorf("%s: the local stage's %s is %s, but deploy-local.sh does not set it: its default is %s", doc, key, cells[1], def)
		}
	}
}
