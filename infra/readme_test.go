package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/resetledger/resetledger/internal/settings"
)

// readmeSection returns the root README's text under heading, up to the next heading of the same
// or a higher level.
func readmeSection(t *testing.T, heading string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	for depth := 1; depth <= strings.Index(heading, " "); depth++ {
		section, _, _ = strings.Cut(section, "\n"+strings.Repeat("#", depth)+" ")
	}
	return section
}

// tableRows returns the cells of every markdown table row in text whose first cell matches first,
// trimmed, without the outer pipes.
func tableRows(text string, first *regexp.Regexp) [][]string {
	var rows [][]string
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if first.MatchString(cells[0]) {
			rows = append(rows, cells)
		}
	}
	return rows
}

// defaultCell is how the README writes a declared default.
func defaultCell(def string, required bool) string {
	switch {
	case required:
		return "required"
	case def == "":
		return "-"
	}
	return "`" + def + "`"
}

// TestConfigurationTable: the README's configuration tables are the declarations: one row per
// function setting (settings.Vars) with its context key, default and the functions that read
// it, and one row per stage parameter (stageParams) with its default.
func TestConfigurationTable(t *testing.T) {
	section := readmeSection(t, "## Configuration")
	rows := map[string][]string{}
	for _, cells := range tableRows(section, regexp.MustCompile("^`[A-Z][A-Z_]*`$")) {
		rows[strings.Trim(cells[0], "`")] = cells
	}
	for _, v := range settings.Vars {
		cells, ok := rows[v.Env]
		if !ok {
			t.Errorf("README configuration table has no row for %s", v.Env)
			continue
		}
		delete(rows, v.Env)
		var readers []string
		for _, r := range v.Roles {
			name := string(r)
			if r == settings.Operator {
				name = "ledgerctl"
			}
			readers = append(readers, name)
		}
		want := []string{"`" + v.Env + "`", "-", defaultCell(v.Default, v.Required), strings.Join(readers, ", ")}
		if v.Context != "" {
			want[1] = "`" + v.Context + "`"
		}
		if len(cells) != 5 || !slices.Equal(cells[:4], want) {
			t.Errorf("README row for %s = %q, want %q and what it is", v.Env, cells, want)
		}
	}
	for env := range rows {
		t.Errorf("README configuration table has a row for %s, which internal/settings does not declare", env)
	}

	params := map[string][]string{}
	for _, cells := range tableRows(section, regexp.MustCompile("^`[a-z][A-Za-z]*`$")) {
		params[strings.Trim(cells[0], "`")] = cells
	}
	for _, sp := range stageParams {
		cells, ok := params[sp.Key]
		if !ok {
			t.Errorf("README stage parameter table has no row for %s", sp.Key)
			continue
		}
		delete(params, sp.Key)
		if len(cells) != 3 || cells[1] != defaultCell(sp.Default, false) {
			t.Errorf("README row for %s = %q, want default %s", sp.Key, cells, defaultCell(sp.Default, false))
		}
	}
	for key := range params {
		t.Errorf("README stage parameter table has a row for %s, which stageParams does not declare", key)
	}
}
